"""One training job of the fault campaign on this machine (tests/faults/campaign.py): the CNN
example under primus.train (primus.ddp, primus.data, checkpoints in the background every 10
steps) as tests/python/train_cnn.py runs it, started by primus-launch --nproc, with what the
campaign needs to aim a fault and judge the job afterwards:

- markers, read while the job runs: the launcher's events.jsonl (launched, resuming,
  ranks-ready, checkpoint-started, checkpoint-committed, finished), the step rank 0 reached
  (PROGRESS), the final parameters' file (OUT);
- the processes a run left behind: every process of a job carries FAULT_TRIAL=<token> in its
  environment, so that /proc tells them apart from anything else on the machine;
- the final parameters and optimizer state (final.json), and every step's records (TRACE) for
  tests/python/train_oracle.py's exactly-once check.
"""

import json
import os
import resource
import signal
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parents[1]
sys.path.insert(0, str(SOURCE / "tests" / "python"))
from job_env import job_environment  # noqa: E402
HARNESS = SOURCE / "tests" / "python" / "train_cnn.py"
RECORDS, GLOBAL_BATCH, EPOCHS = 512, 64, 3
STEPS = EPOCHS * RECORDS // GLOBAL_BATCH


def rank_environment(extra):
    return job_environment(**extra)


def make_data(where):
    """The CNN example's TFRecord files (RECORDS records in 3 files) under `where`."""
    where = Path(where)
    if not (where / "done").exists():
        result = subprocess.run(
            [sys.executable, str(SOURCE / "examples" / "cnn" / "make_data.py"), str(where),
             "--records", str(RECORDS), "--files", "3"],
            capture_output=True, text=True, timeout=120, env=rank_environment({}))
        if result.returncode != 0:
            raise RuntimeError(f"make_data.py failed: {result.stderr}")
        (where / "done").touch()
    return where


def allow_cores():
    """In the child before exec: a rank that aborts leaves a core (core_pattern "core": in its
    working directory, the job's), for its threads' backtraces."""
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def backtraces(core):
    """Every thread's backtrace in a rank's core (gdb), or why there is none."""
    if not shutil.which("gdb"):
        return "(no gdb here to read the core)"
    result = subprocess.run(["gdb", "-batch", "-ex", "info threads", "-ex",
                             "thread apply all bt 25", sys.executable, str(core)],
                            capture_output=True, text=True, timeout=300)
    return "\n".join(line for line in result.stdout.splitlines()
                     if not line.startswith(("[New LWP", "warning:")))


class Run:
    """One command of a job: `primus-launch --nproc N ... -- python3 train_cnn.py` in the job's
    directory, running in the background."""

    def __init__(self, job, name, extra_env):
        self.job = job
        self.name = name
        self.started = time.monotonic()
        env = rank_environment({**job.env, "TRACE_RUN": name, **extra_env})
        self.log = open(job.dir / f"run-{name}.log", "w")
        self.process = subprocess.Popen(
            [job.launcher, "--nproc", str(job.nproc), *job.options, "--", sys.executable,
             str(HARNESS)], cwd=job.dir, env=env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=allow_cores if job.cores else None)

    def poll(self):
        return self.process.poll()

    def wait(self, timeout):
        """The exit status, or None when the run did not end within `timeout` seconds."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()

    def output(self):
        self.log.flush()
        return (self.job.dir / f"run-{self.name}.log").read_text(errors="replace")


class Job:
    """A job directory; every Run in it is the same command, so a later one resumes."""

    def __init__(self, directory, launcher, data, token, nproc=4, options=(), env=None,
                 cores=False):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "trace").mkdir(exist_ok=True)
        self.launcher = launcher
        self.nproc = nproc
        self.options = list(options)
        self.token = token
        self.cores = cores
        self.env = {"PRIMUS_DATA": f"{data}/*.tfrecord", "EPOCHS": EPOCHS,
                    "OUT": self.dir / "final.json", "TRACE": self.dir / "trace",
                    "PROGRESS": self.dir / "progress", "FAULT_TRIAL": token, **(env or {})}
        self.runs = []

    def start(self, name, **extra_env):
        run = Run(self, name, extra_env)
        self.runs.append(run)
        return run

    # Markers
    def events(self):
        path = self.dir / "primus-local" / "events.jsonl"
        try:
            lines = path.read_text().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line being written
        return out

    def step(self):
        try:
            return int((self.dir / "progress").read_text() or -1)
        except (FileNotFoundError, ValueError):
            return -1

    def finished_output(self):
        return (self.dir / "final.json").exists()

    def newest_checkpoint(self):
        """The newest committed checkpoint's directory (a step directory with its manifest)."""
        steps = sorted((self.dir / "primus-local" / "ckpt").glob("step-*"))
        committed = [s for s in steps if (s / "manifest.json").exists()]
        return committed[-1] if committed else None

    # Judging
    def leftovers(self):
        """pids of processes that carry this job's token (none once the job is over)."""
        found = []
        needle = f"FAULT_TRIAL={self.token}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                continue
        return found

    def kill_leftovers(self):
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def final_state(self):
        try:
            return json.loads((self.dir / "final.json").read_text())
        except (FileNotFoundError, ValueError):
            return None

    def restarts(self):
        return [e for e in self.events() if e["event"] == "restarted"]
