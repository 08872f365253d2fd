"""End-to-end test fixtures: a running Slurm testbed (scripts/slurm-testbed).

The tests do not start the cluster: scripts/test does (or run
`scripts/slurm-testbed start` by hand). Without a running testbed every test
fails, it does not skip: Slurm is a required feature of Primus.

Jobs are submitted as the testbed's unprivileged user (primus-test) from a
work directory under the testbed directory, since the repository itself may
live where that user cannot read (/root/...). Every subprocess has a timeout
and is killed with its whole process group when it runs over.
"""

import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]
TESTBED_SCRIPT = REPO / "scripts" / "slurm-testbed"
DEFAULT_TIMEOUT = 60


class CommandError(AssertionError):
    pass


def run(argv, *, timeout=DEFAULT_TIMEOUT, check=True, env=None, cwd=None, input=None):
    """Run argv; return CompletedProcess with text stdout/stderr.

    On timeout the whole process group is killed and the test fails with the
    output so far. With check, a non-zero exit fails with the output.
    """
    proc = subprocess.Popen(
        [str(a) for a in argv],
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        raise CommandError(
            f"timed out after {timeout}s: {shlex.join(map(str, argv))}\n"
            f"--- stdout:\n{out}\n--- stderr:\n{err}"
        )
    res = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check and res.returncode != 0:
        raise CommandError(
            f"exit {res.returncode}: {shlex.join(map(str, argv))}\n"
            f"--- stdout:\n{out}\n--- stderr:\n{err}"
        )
    return res


def parse_env_lines(text):
    """Parse `export K=V` lines (as printed by `slurm-testbed env`)."""
    env = {}
    for line in text.splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            k, v = words[1].split("=", 1)
            env[k] = v
    return env


class Testbed:
    """A running testbed: run commands as its unprivileged user or as root."""

    def __init__(self, env):
        self.env = env
        self.dir = Path(env["PRIMUS_TESTBED_DIR"])
        self.conf = env["SLURM_CONF"]
        self.user = env.get("PRIMUS_TESTBED_USER", "primus-test")
        self.as_root = os.geteuid() == 0
        if self.as_root:
            pw = pwd.getpwnam(self.user)
        else:  # not root: jobs run as whoever runs the tests
            pw = pwd.getpwuid(os.geteuid())
            self.user = pw.pw_name
        self.uid = pw.pw_uid
        self.gid = pw.pw_gid
        self.workdir = Path(tempfile.mkdtemp(prefix="e2e-", dir=self.dir / "work"))
        os.chmod(self.workdir, 0o755)
        if self.as_root:
            os.chown(self.workdir, self.uid, self.gid)

    def base_env(self):
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "LANG": "C.UTF-8",
            "HOME": str(self.workdir),
            "SLURM_CONF": self.conf,
        }

    def user_cmd(self, argv, timeout=DEFAULT_TIMEOUT, check=True, cwd=None):
        """Run argv as the unprivileged user, in the work directory."""
        env_args = [f"{k}={v}" for k, v in self.base_env().items()]
        full = ["env", "-i", *env_args, *argv]
        if self.as_root:
            full = ["runuser", "-u", self.user, "--", *full]
        return run(full, timeout=timeout, check=check, cwd=cwd or self.workdir)

    def root_cmd(self, argv, timeout=30, check=True):
        """Run a Slurm admin command (scontrol update, scancel) as root."""
        env = dict(os.environ, SLURM_CONF=self.conf)
        return run(argv, timeout=timeout, check=check, env=env, cwd=self.workdir)

    def srun(self, *args, timeout=DEFAULT_TIMEOUT):
        return self.user_cmd(["srun", *args], timeout=timeout).stdout

    def write_script(self, name, text):
        path = self.workdir / name
        path.write_text(text)
        os.chmod(path, 0o755)
        if self.as_root:
            os.chown(path, self.uid, self.gid)
        return path

    def sbatch(self, *args):
        """Submit; return the job id."""
        out = self.user_cmd(["sbatch", "--parsable", *args], timeout=30).stdout.strip()
        m = re.match(r"^(\d+)", out)
        assert m, f"sbatch printed no job id: {out!r}"
        return m.group(1)

    def job(self, jobid):
        """`scontrol show job` as a dict ({} once the job is gone)."""
        res = self.root_cmd(["scontrol", "-o", "show", "job", jobid], check=False)
        if res.returncode != 0:
            return {}
        info = {}
        for word in res.stdout.split():
            if "=" in word:
                k, v = word.split("=", 1)
                info.setdefault(k, v)
        return info

    def job_ids(self):
        """Every job slurmctld knows, finished ones included (squeue -t all: a job that was
        queued and has already failed or completed still shows, for MinJobAge = 60 s). Compare
        with `new_jobs(before)`: ids only grow, while old jobs drop out of the list."""
        out = self.root_cmd(["squeue", "-h", "-a", "-t", "all", "-o", "%i"]).stdout
        return set(out.split())

    def new_jobs(self, before):
        """Jobs that appeared since `before` (a job_ids() result)."""
        return self.job_ids() - before

    ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
             "BOOT_FAIL", "DEADLINE", "PREEMPTED")

    def wait_ended(self, jobs, timeout):
        """Waits until every job has ended (or is gone); returns {job: JobState or 'gone'}."""
        def states():
            return {j: self.job(j).get("JobState", "gone") for j in jobs}
        self.wait_for(lambda: all(s in self.ENDED + ("gone",) for s in states().values()),
                      timeout, lambda: f"jobs {jobs} to end: {states()}", interval=0.5)
        return states()

    def cancel(self, *jobids):
        ids = [j for j in jobids if j]
        if ids:
            self.root_cmd(["scancel", *ids], check=False)

    def wait_for(self, predicate, timeout, what, interval=0.25):
        return wait_for(predicate, timeout, what, interval)

    def read(self, name):
        path = self.workdir / name
        return path.read_text() if path.exists() else ""


def wait_for(predicate, timeout, what, interval=0.25):
    """Poll predicate until it returns a truthy value; fail after timeout.

    `what` describes the wait; it may be a callable, called at the timeout so
    that the message shows the state then.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what() if callable(what) else what}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def e2e():
    """Helpers for tests that do not need a running testbed (no import of
    conftest from test files: several conftest.py may exist under tests/)."""
    return SimpleNamespace(
        script=TESTBED_SCRIPT, run=run, wait_for=wait_for, parse_env_lines=parse_env_lines,
        CommandError=CommandError,
    )


@pytest.fixture(scope="session")
def testbed():
    if not TESTBED_SCRIPT.exists():
        pytest.fail(f"{TESTBED_SCRIPT} is missing")
    try:
        status = run([TESTBED_SCRIPT, "status"], timeout=30, check=False)
    except CommandError as e:
        pytest.fail(f"scripts/slurm-testbed status hung:\n{e}")
    if status.returncode != 0:
        pytest.fail(
            "no running Slurm testbed: the end-to-end tests need one "
            "(scripts/test starts it; by hand: scripts/slurm-testbed start, as root).\n"
            f"scripts/slurm-testbed status said (exit {status.returncode}):\n"
            f"{status.stdout}{status.stderr}",
            pytrace=False,
        )
    env = parse_env_lines(run([TESTBED_SCRIPT, "env"], timeout=10).stdout)
    assert "SLURM_CONF" in env and "PRIMUS_TESTBED_DIR" in env, env
    tb = Testbed(env)
    yield tb
    if os.environ.get("PRIMUS_E2E_KEEP") == "1":  # for a look at the jobs' folders afterwards
        print(f"\nkept the jobs' folders in {tb.workdir}")
    else:
        shutil.rmtree(tb.workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def prefix(testbed):
    """`make install` of the build tree (PRIMUS_BUILD_DIR) into a prefix the job user can read."""
    build = os.environ.get("PRIMUS_BUILD_DIR")
    if not build or not (Path(build) / "Makefile").exists():
        pytest.fail("PRIMUS_BUILD_DIR must name a configured build tree (scripts/test sets it)")
    where = Path(tempfile.mkdtemp(prefix="install-", dir=testbed.dir / "work"))
    res = subprocess.run(["make", "-C", build, "install", f"prefix={where}"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    for root, dirs, files in os.walk(where):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o755)
    os.chmod(where, 0o755)
    return where
