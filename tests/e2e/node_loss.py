"""Losing a node of the testbed, and bringing it back, inside a running cluster.

All four nodes are daemons on this one host, so "losing" n3 means freezing (SIGSTOP) n3's
slurmd, its slurmstepd processes and every process of its tasks, killing them all (SIGKILL, the
tasks first), then marking the node DOWN as root. `restore_node` starts its slurmd again exactly as scripts/slurm-testbed
does and waits until the node is usable. See TESTBED.md, "Losing a node".

    lost = lose_node(testbed, "n3")          # refuses a node that is some job's batch host
    ...                                      # the job's steps on n3 fail ("Node failure on n3")
    restore_node(testbed, "n3")              # slurmd back, State=RESUME, sinfo idle/mixed/alloc

Seen on the testbed (Slurm 22.05.8, a --no-kill job on n[1-4], batch host n1, a step on n[2-4]):
the step survives the kills unnoticed until the node is marked DOWN (lose_node(down=False) then
`mark_down` shows it); at DOWN, slurmctld drops n3 from the job at once (NodeList n[1-2,4],
NumNodes=3) and srun prints "Node failure on n3" and ends the step, exit 137, in ~0.1 s. The job
goes on; a step in it after the loss is best given -N, -n and --nodelist. With
ReturnToService=2, the node is back (IDLE) as soon as its slurmd registers, even while that job
still runs; it does not rejoin the job.

`testbed` is conftest's Testbed (its .dir, .conf and .root_cmd are used). Needs root.
"""

import os
import resource
import signal
import subprocess
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slurm-testbed"
# What scripts/slurm-testbed's start_slurm runs for each node; restore_node checks that the script
# still says so, so that the two cannot drift apart silently.
SCRIPT_SLURMD_LINE = ('env -u _PRIMUS_TESTBED_SCRIPT "$MARK" slurmd -N "$n" -f "$CONF" '
                      '2>>"$DIR/log/slurmd-$n.stderr"')
USABLE = ("idle", "mixed", "allocated")


class NodeLossError(AssertionError):
    pass


# --- processes -------------------------------------------------------------------------------

def _environ(pid):
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return []


def _comm(pid):
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _alive(pid):
    """Exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _holds_open(pid, path):
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"{fd_dir}/{fd}") == path:
                return True
        except OSError:
            continue
    return False


def slurmd_pid(testbed, node):
    """The pid of `node`'s slurmd (from its pid file, checked to be that very daemon) or None."""
    try:
        pid = int(Path(testbed.dir, "run", f"slurmd-{node}.pid").read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    marker = f"PRIMUS_TESTBED_DAEMON={testbed.dir}".encode()
    if not _alive(pid) or b"-N" not in cmd or node.encode() not in cmd or marker not in _environ(pid):
        return None
    return pid


def node_processes(testbed, node):
    """{'slurmd': [pid], 'slurmstepd': [...], 'tasks': [...]} of `node`, alive ones only.

    slurmstepd: named slurmstepd, SLURM_CONF=<testbed conf> in its environment (slurmd gives it
    only that) and its node's log/slurmd-<node>.log open. Tasks (and batch scripts): the
    testbed's SLURM_CONF and SLURMD_NODENAME=<node> in their environment, not slurmstepd.
    """
    conf = f"SLURM_CONF={testbed.conf}".encode()
    nodename = f"SLURMD_NODENAME={node}".encode()
    log = str(Path(testbed.dir, "log", f"slurmd-{node}.log"))
    me = os.getpid()
    stepds, tasks = [], []
    for pid in _pids():
        if pid == me or not _alive(pid):
            continue
        env = _environ(pid)
        if conf not in env:
            continue
        if _comm(pid) == "slurmstepd":
            if _holds_open(pid, log):
                stepds.append(pid)
        elif nodename in env:
            tasks.append(pid)
    slurmd = slurmd_pid(testbed, node)
    return {"slurmd": [slurmd] if slurmd else [], "slurmstepd": stepds, "tasks": tasks}


# --- Slurm's view -----------------------------------------------------------------------------

def node_info(testbed, node):
    """`scontrol show node -o NODE` as a dict (first value of each key)."""
    out = testbed.root_cmd(["scontrol", "show", "node", "-o", node]).stdout
    info = {}
    for word in out.split():
        if "=" in word:
            k, v = word.split("=", 1)
            info.setdefault(k, v)
    return info


def node_state(testbed, node):
    """scontrol's State string, such as 'IDLE', 'DOWN+NOT_RESPONDING' or 'MIXED'."""
    return node_info(testbed, node).get("State", "")


def sinfo_state(testbed, node):
    """sinfo's long state of `node` ('idle', 'down*', 'mixed', ...): '*' = not responding."""
    out = testbed.root_cmd(["sinfo", "-h", "-N", "-n", node, "-o", "%T"]).stdout.split()
    return out[0] if out else ""


def batch_hosts(testbed):
    """{node: [job ids]} of the batch hosts of the jobs that run now."""
    out = testbed.root_cmd(["squeue", "-h", "-t", "RUNNING,COMPLETING,SUSPENDED", "-o", "%A %B"]).stdout
    hosts = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) == 2:
            hosts.setdefault(words[1], []).append(words[0])
    return hosts


# --- losing and restoring ---------------------------------------------------------------------

def lose_node(testbed, node, *, batch_host=None, reason="e2e: node lost", down=True, timeout=10):
    """Simulates losing `node`: SIGSTOP its slurmd, its slurmstepd and its tasks, then SIGKILL
    the tasks, the slurmstepd and the slurmd (all frozen first, so that none reports another's
    end), then `scontrol update NodeName=node State=DOWN Reason=...` as root.

    Refuses (NodeLossError) a node that is the batch host of a running job, or `batch_host`
    when given. With down=False the node is left for slurmctld to notice (SlurmdTimeout);
    `mark_down` does the rest later. Returns the pids killed:
    {'slurmd': [...], 'slurmstepd': [...], 'tasks': [...]}.
    """
    if batch_host is not None and node == batch_host:
        raise NodeLossError(f"refusing to lose {node}: it is the batch host")
    jobs = batch_hosts(testbed).get(node)
    if jobs:
        raise NodeLossError(f"refusing to lose {node}: batch host of running job(s) {jobs}")
    if slurmd_pid(testbed, node) is None:
        raise NodeLossError(f"{node}'s slurmd is not running (pid file in {testbed.dir}/run)")

    killed = {"slurmd": [], "slurmstepd": [], "tasks": []}
    deadline = time.monotonic() + timeout
    while True:
        procs = node_processes(testbed, node)
        if not any(procs.values()):
            break
        if time.monotonic() >= deadline:
            raise NodeLossError(f"{node}: processes survive SIGKILL after {timeout}s: {procs}")
        # Every process of the node is frozen before any is killed, as a machine that vanishes
        # says nothing: killed one by one, a rank killed before its wrapper (primus-task) let
        # the wrapper report the rank's SIGKILL to primus-launch in between, which then wrote a
        # rank-failed event before node-lost (seen once in test_node_failure's spare test).
        # Frozen: slurmd first (no report to slurmctld), then the step daemons (no task-exit
        # report to srun), then the tasks. Killed the other way round, tasks first: a slurmstepd
        # that exits before its tasks leaves their process group orphaned with stopped members,
        # and the kernel then sends the group SIGHUP and SIGCONT (POSIX job control). A wrapper
        # not yet killed woke up, saw its rank end by that SIGHUP and reported it: rank-failed
        # before node-lost, seen in 2 of 18 runs of the spare test (events.jsonl: "rank 5, n3,
        # killed by signal 1 (SIGHUP)" at the instant of the loss). A machine that vanishes
        # sends nothing. A task with SIGKILL pending never runs again, whatever comes after.
        for sig, kinds in ((signal.SIGSTOP, ("slurmd", "slurmstepd", "tasks")),
                           (signal.SIGKILL, ("tasks", "slurmstepd", "slurmd"))):
            for kind in kinds:
                for pid in procs[kind]:
                    try:
                        os.kill(pid, sig)
                        if sig == signal.SIGKILL and pid not in killed[kind]:
                            killed[kind].append(pid)
                    except ProcessLookupError:
                        pass
        time.sleep(0.1)
    if down:
        mark_down(testbed, node, reason)
    return killed


def mark_down(testbed, node, reason="e2e: node lost"):
    """`scontrol update NodeName=node State=DOWN Reason=reason` as root."""
    testbed.root_cmd(["scontrol", "update", f"NodeName={node}", "State=DOWN", f"Reason={reason}"])


def _raise_core_limit():
    # scripts/slurm-testbed: `ulimit -S -c unlimited` (cores land in the log directory).
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
    except (ValueError, OSError):
        pass


def start_slurmd(testbed, node, timeout=30):
    """Starts `node`'s slurmd as scripts/slurm-testbed's start_slurm does: with the testbed's
    daemon marker in its environment and without the script's own, stderr appended to
    log/slurmd-<node>.stderr, soft core limit raised. slurmd daemonizes; returns its pid."""
    if SCRIPT_SLURMD_LINE not in SCRIPT.read_text():
        raise NodeLossError(f"{SCRIPT} no longer starts slurmd with\n  {SCRIPT_SLURMD_LINE}\n"
                            "update node_loss.start_slurmd to match it")
    env = {k: v for k, v in os.environ.items() if k != "_PRIMUS_TESTBED_SCRIPT"}
    env["PRIMUS_TESTBED_DAEMON"] = str(testbed.dir)
    stderr_path = Path(testbed.dir, "log", f"slurmd-{node}.stderr")
    with open(stderr_path, "a") as err:
        res = subprocess.run(["slurmd", "-N", node, "-f", testbed.conf], env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=err, timeout=timeout,
                             preexec_fn=_raise_core_limit)
    if res.returncode != 0:
        raise NodeLossError(f"slurmd -N {node} failed to start (exit {res.returncode}):\n"
                            + _tail(stderr_path) + _tail(Path(testbed.dir, "log", f"slurmd-{node}.log")))
    deadline = time.monotonic() + timeout
    while (pid := slurmd_pid(testbed, node)) is None:
        if time.monotonic() >= deadline:
            raise NodeLossError(f"slurmd -N {node} wrote no pid file within {timeout}s:\n"
                                + _tail(Path(testbed.dir, "log", f"slurmd-{node}.log")))
        time.sleep(0.1)
    return pid


def restore_node(testbed, node, timeout=30):
    """Brings a lost `node` back inside the running cluster: starts its slurmd (unless it runs),
    `scontrol update NodeName=node State=RESUME`, and waits until sinfo shows it idle, mixed or
    allocated (responding). NodeLossError, with the state and the slurmd log, after `timeout` s.
    Returns the seconds it took."""
    t0 = time.monotonic()
    if slurmd_pid(testbed, node) is None:
        start_slurmd(testbed, node, timeout)
    deadline = t0 + timeout
    resume = None
    while True:
        state = sinfo_state(testbed, node)
        if state in USABLE:
            return time.monotonic() - t0
        # ReturnToService=2: a DOWN node usually comes back by itself as soon as its slurmd
        # registers, and a RESUME then is refused ("Invalid node state specified"): harmless.
        if resume is None and any(w in node_state(testbed, node) for w in ("DOWN", "DRAIN", "FAIL")):
            resume = testbed.root_cmd(["scontrol", "update", f"NodeName={node}", "State=RESUME"],
                                      check=False)
        if time.monotonic() >= deadline:
            raise NodeLossError(
                f"{node} did not come back within {timeout}s: sinfo {state!r}, "
                f"scontrol {node_info(testbed, node)}"
                + (f", RESUME said {resume.stderr.strip()!r}" if resume and resume.returncode else "")
                + "\n" + _tail(Path(testbed.dir, "log", f"slurmd-{node}.log")))
        time.sleep(0.3)


def _tail(path, lines=15):
    try:
        text = Path(path).read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return f"--- tail {path}:\n" + "\n".join(text) + "\n"
