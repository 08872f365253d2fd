"""Shared helpers of the checkpoint reliability tests (tests/ckpt/*.test).

The tests run from the top build directory (make check), where tests/ckpt/crash-writer and
tests/ckpt/crash-check are built. They drive the writer under strace: traces with -y (the
path of every file descriptor) tell which file each syscall touches, and
-e inject=SYSCALL:signal=KILL:when=N kills it on entering the N-th call of SYSCALL (counted per
syscall and per process; the killed call does not run).
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

WRITER = os.path.join("tests", "ckpt", "crash-writer")
CHECKER = os.path.join("tests", "ckpt", "crash-check")
STRACE = shutil.which("strace") or "/usr/bin/strace"
SKIP = 77
HARD_ERROR = 99

# Syscalls that write, sync, rename or close: what a save does to its files.
TRACED = "openat,open,creat,write,pwrite64,pwritev,pwritev2,writev,fsync,fdatasync,sync_file_range," \
         "rename,renameat,renameat2,close,unlink,unlinkat,mkdir,rmdir"
WRITES = ("write", "pwrite64", "pwritev", "pwritev2", "writev")
SYNCS = ("fsync", "fdatasync")
RENAMES = ("rename", "renameat", "renameat2")


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


def need_programs():
    for program in (WRITER, CHECKER):
        if not os.access(program, os.X_OK):
            print("ERROR: %s is not built (run from the top build directory)" % program)
            sys.exit(HARD_ERROR)


def need_strace():
    """Skips the test when strace is missing, cannot trace here (no ptrace in a container) or
    cannot inject a signal (too old)."""
    if not os.access(STRACE, os.X_OK):
        skip("strace is not installed")
    probe = subprocess.run([STRACE, "-f", "-qq", "-o", os.devnull, "-e", "trace=getppid",
                            "-e", "inject=getppid:signal=KILL:when=1",
                            sys.executable, "-c", "import os; os.getppid()"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if not killed_by_sigkill(probe.returncode):
        skip("strace cannot trace or inject a signal here (exit %d): %s" %
             (probe.returncode, probe.stderr.strip()))


def scratch(prefix):
    """A fresh directory for the test's checkpoint roots. /dev/shm (tmpfs) when usable: a
    SIGKILL tests what the process leaves behind, not the disk, and tmpfs makes the hundreds of
    fsyncs free. CKPT_TEST_TMPDIR overrides."""
    base = os.environ.get("CKPT_TEST_TMPDIR")
    if not base and os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        base = "/dev/shm"
    return os.path.realpath(tempfile.mkdtemp(prefix=prefix, dir=base))


def environment(traced):
    """The environment of the programs. Under strace, LeakSanitizer (an ASan build) cannot run:
    at exit it stops the process's threads with ptrace, which fails when strace already traces
    it, and turns a clean exit into an error. So detect_leaks=0 for traced runs only (a process
    killed by SIGKILL reports nothing anyway); untraced runs keep leak detection."""
    env = dict(os.environ)
    if traced:
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    return env


def writer_args(root, first, count=1, extra=(), generation=None, repeat=None):
    args = [WRITER, root, "--from", str(first), "--count", str(count)]
    if generation is not None:
        args += ["--generation", str(generation)]
    if repeat is not None:
        args += ["--repeat", str(repeat)]
    return args + list(extra)


def run(args, traced=False, env=None):
    environ = environment(traced)
    if env:
        environ.update(env)
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=environ)


def save(root, first, count=1, extra=(), env=None):
    """Saves steps without strace; any failure is a hard error of the test itself."""
    result = run(writer_args(root, first, count, extra), env=env)
    if result.returncode != 0:
        print("ERROR: %s failed (%d): %s" % (" ".join(writer_args(root, first, count, extra)),
                                             result.returncode, result.stderr.strip()))
        sys.exit(HARD_ERROR)


class Checked:
    """What crash-check says about one root: its line "STEP LATEST=L GEN=G ok|MISMATCH ROOT"
    and the exit status of the run that checked it."""

    def __init__(self, root, line, rc, stderr):
        self.root = root
        self.rc = rc
        prefix = "crash-check: %s: " % root
        self.stderr = "\n".join(l[len(prefix):] for l in stderr.split("\n")
                                if l.startswith(prefix))
        self.step = None
        self.latest = None
        self.generation = None
        self.ok = False
        parts = line.split(" ", 4) if line else []
        self.valid_output = len(parts) == 5 and parts[1].startswith("LATEST=") and \
            parts[2].startswith("GEN=") and parts[4] == root
        if self.valid_output:
            self.step = None if parts[0] == "none" else int(parts[0])
            latest = parts[1][len("LATEST="):]
            self.latest = None if latest == "none" else int(latest)
            generation = parts[2][len("GEN="):]
            self.generation = None if generation == "none" else int(generation)
            self.ok = parts[3] == "ok"
        if (not self.valid_output and not self.stderr) or (rc != 0 and self.ok):
            # Nothing about this root in particular: what went wrong is the run's (a sanitizer's
            # report at exit, say).
            self.stderr = stderr.strip()

    def exact(self):
        """The line says ok, and crash-check exited 0: a leak report or a sanitizer error at
        exit, after a correct line, is a failure too."""
        return self.valid_output and self.ok and self.rc == 0

    def describe(self):
        what = "step %s, LATEST %s, generation %s" % (
            self.step if self.step is not None else "none",
            self.latest if self.latest is not None else "none",
            self.generation if self.generation is not None else "none")
        if not self.exact():
            what += " (crash-check exit %d: %s)" % (self.rc, self.stderr[-600:])
        return what


def check_all(roots, extra=()):
    """crash-check over several roots in one process: {root: Checked}. The exit status is the
    run's, not a root's: when it is not 0, each root is checked again on its own, so that a
    failure is charged to the root it belongs to (and to every root when the run itself fails,
    at exit, say)."""
    result = run([CHECKER] + list(roots) + list(extra))
    if result.returncode != 0 and len(roots) > 1:
        checked = {}
        for root in roots:
            checked.update(check_all([root], extra))
        return checked
    lines = result.stdout.split("\n")
    checked = {}
    for i, root in enumerate(roots):
        line = lines[i] if i < len(lines) else ""
        checked[root] = Checked(root, line, result.returncode, result.stderr)
    return checked


def check(root, extra=()):
    return check_all([root], extra)[root]


class Event:
    """One syscall of a trace."""

    def __init__(self, name, seq, args, ret, line):
        self.name = name      # the syscall
        self.seq = seq        # its invocation number in the process (strace's when=)
        self.args = args
        self.ret = ret
        self.line = line
        fd = re.match(r"-?\d+<(.*?)>(?:, |$)", args)
        self.fd_path = fd.group(1) if fd else None
        self.strings = re.findall(r'"((?:[^"\\]|\\.)*)"', args)
        self.ok = ret is not None and not ret.startswith("-1")

    def rename_paths(self):
        if self.name == "rename" and len(self.strings) >= 2:
            return self.strings[0], self.strings[1]
        if self.name in ("renameat", "renameat2"):
            # renameat(3</root>, "from", 3</root>, "to"), names relative to the directories
            # (strace -y shows their paths), or AT_FDCWD</cwd> with absolute names.
            pairs = re.findall(r'(?:^|, )(?:AT_FDCWD|-?\d+)<(.*?)>, "((?:[^"\\]|\\.)*)"',
                               self.args)
            if len(pairs) >= 2:
                return tuple(name if name.startswith("/") else os.path.join(dir_path, name)
                             for dir_path, name in pairs[:2])
        return None


LINE = re.compile(r"^(\d+)\s+(\w+)\((.*)$")


def parse_trace(path):
    """The events of a strace -f -qq -y log, in order, with per-process invocation numbers.
    Returns (events, killed): killed when the process died of SIGKILL."""
    events = []
    counts = {}
    killed = False
    with open(path, errors="replace") as log:
        for line in log:
            line = line.rstrip("\n")
            if "+++ killed by SIGKILL" in line:
                killed = True
                continue
            match = LINE.match(line)
            if not match or "resumed>" in line:
                continue
            pid, name, rest = match.groups()
            ret = None
            unfinished = rest.endswith("<unfinished ...>")
            end = rest.rfind(") = ")
            if end >= 0 and not unfinished:
                args, ret = rest[:end], rest[end + 4:]
            else:
                args = rest
                if rest.endswith(") = ?"):
                    args = rest[:-len(") = ?")]
            key = (pid, name)
            counts[key] = counts.get(key, 0) + 1
            events.append(Event(name, counts[key], args, ret, line))
    return events, killed


def relative(path, root):
    if path is None:
        return None
    if path == root:
        return "."
    if path.startswith(root + "/"):
        return path[len(root) + 1:]
    return None


RANK = re.compile(r"^\.tmp-step-(\d{12})/rank-\d{5}\.h5$")
TMP_DIR = re.compile(r"^\.tmp-step-(\d{12})$")
MANIFEST_TMP = re.compile(r"^\.tmp-step-(\d{12})/manifest\.json\.tmp$")
STEP_DIR = re.compile(r"^step-(\d{12})$")


def classify(event, root):
    """(phase, step) of a syscall of a save under root, or (None, step-or-None)."""
    if event.name in RENAMES:
        paths = event.rename_paths()
        if not paths:
            return None, None
        source, target = relative(paths[0], root), relative(paths[1], root)
        if source is None or target is None:
            return None, None
        manifest = MANIFEST_TMP.match(source)
        if manifest:
            return "manifest-rename", int(manifest.group(1))
        tmp = TMP_DIR.match(source)
        if tmp and STEP_DIR.match(target):
            return "dir-rename", int(tmp.group(1))
        if STEP_DIR.match(source) and target.startswith(".old-"):
            return "dir-displace", int(STEP_DIR.match(source).group(1))
        if source == "LATEST.tmp" and target == "LATEST":
            return "latest-rename", None
        return None, None
    path = relative(event.fd_path, root)
    if path is None:
        return None, None
    rank = RANK.match(path)
    if rank:
        step = int(rank.group(1))
        if event.name in WRITES:
            return "tensor-write", step
        if event.name == "close":
            return "rank-close", step
        if event.name in SYNCS:
            return "rank-fsync", step
        return None, step
    manifest = MANIFEST_TMP.match(path)
    if manifest:
        step = int(manifest.group(1))
        if event.name in WRITES:
            return "manifest-write", step
        if event.name in SYNCS:
            return "manifest-fsync", step
        return None, step
    tmp = TMP_DIR.match(path)
    if tmp:
        return ("dir-fsync" if event.name in SYNCS else None), int(tmp.group(1))
    if path == "LATEST.tmp":
        if event.name in WRITES:
            return "latest-write", None
        if event.name in SYNCS:
            return "latest-fsync", None
        return None, None
    if path == "." and event.name in SYNCS:
        return "root-fsync", None
    return None, None


def classified(events, root):
    """[(event, phase, step)]: the step of a root-level event (LATEST, the root's fsync) is the
    one whose files were touched last."""
    out = []
    current = None
    for event in events:
        phase, step = classify(event, root)
        if step is not None:
            current = step
        out.append((event, phase, step if step is not None else current))
    return out


def trace(args, log, root, syscalls=TRACED):
    """Runs args under strace -f -y and returns its classified events."""
    result = run([STRACE, "-f", "-qq", "-y", "-o", log, "-e", "trace=" + syscalls] + args,
                 traced=True)
    if result.returncode != 0:
        print("ERROR: the traced run failed (%d): %s" % (result.returncode, result.stderr))
        sys.exit(HARD_ERROR)
    events, _ = parse_trace(log)
    return classified(events, root)


def killed_by_sigkill(returncode):
    # strace re-raises the signal that killed its tracee, so it dies of SIGKILL too.
    return returncode in (-signal.SIGKILL, 128 + signal.SIGKILL)


def spread(items, count):
    """count items spread evenly over the list (all of them when it is shorter)."""
    if len(items) <= count:
        return list(items)
    picked = []
    for i in range(count):
        item = items[round(i * (len(items) - 1) / (count - 1))]
        if item not in picked:
            picked.append(item)
    return picked


def table(rows, header):
    widths = [max(len(str(row[i])) for row in rows + [header]) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(header, widths))]
    lines.append("  ".join("-" * width for width in widths))
    for row in rows:
        lines.append("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)))
    return "\n".join(lines)
