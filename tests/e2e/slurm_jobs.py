"""Helpers of the end-to-end tests that follow a batch job through its allocations: a job that
runs a training program under primus-launch, the processes left of a job, and a requeued job
started again without its wait."""

import json
import os
import shutil
import time
from pathlib import Path

TRAIN = Path(__file__).resolve().parents[1] / "python" / "train_tiny.py"
INIT = "/usr/share/lmod/lmod/init/bash"


def processes_of(job):
    """(pid, command name, environment entries) of every process whose environment says it
    belongs to `job`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if f"SLURM_JOB_ID={job}".encode() in env:
            found.append((int(pid), comm, env))
    return found


def job_processes(job):
    """Processes (other than slurmstepd) whose environment says they belong to `job`."""
    return [f"{pid} {comm}" for pid, comm, _ in processes_of(job) if comm != "slurmstepd"]


def start_again(testbed, run):
    """Skips a requeued job's wait (~120 s, Reason=BeginTime). Not at once: started within the
    second its old allocation's credential was revoked, slurmd refuses it ("Killing non-startable
    batch job: Job credential revoked", and the job FAILS); seen on the testbed."""
    testbed.wait_for(lambda: not job_processes(run.job), 30,
                     lambda: f"job {run.job}'s old allocation to end: {job_processes(run.job)}")
    time.sleep(2)
    testbed.root_cmd(["scontrol", "update", f"JobId={run.job}", "StartTime=now"])


def preempt(testbed, run):
    """An exclusive job in `high` takes every node: `run` is preempted and requeued; then it is
    started again at once (without the requeue's wait)."""
    high = testbed.sbatch("-p", "high", "-N4", "--exclusive", "-o", "/dev/null", "--wrap",
                          "sleep 1")
    try:
        testbed.wait_for(lambda: testbed.job(run.job).get("Restarts") == "1"
                         and testbed.job(run.job).get("JobState") == "PENDING", 120,
                         lambda: f"job {run.job} to be requeued: {testbed.job(run.job)}")
        testbed.wait_ended([high], 120)
    finally:
        testbed.cancel(high)


class Launch:
    """A batch job of `layout` that runs `program` (a copy of it, in the job's own folder under
    the testbed's work directory) under `exec primus-launch`, from the installed module."""

    def __init__(self, testbed, prefix, name, layout="-N4 --ntasks-per-node=2", program=TRAIN):
        self.testbed, self.prefix, self.name, self.layout = testbed, prefix, name, layout
        self.dir = testbed.workdir / name
        self.dir.mkdir()
        self.program = self.dir / Path(program).name
        shutil.copy(program, self.program)
        if testbed.as_root:
            os.chown(self.dir, testbed.uid, testbed.gid)
            os.chown(self.program, testbed.uid, testbed.gid)
        self.out = self.dir / "final.json"
        self.progress = self.dir / "progress"

    def submit(self, *, sbatch="", launch="", env="", exec_="exec "):
        script = self.dir / "job.sh"
        script.write_text(
            "#!/bin/bash\n"
            f"#SBATCH {self.layout} --open-mode=append -o {self.dir}/job.out {sbatch}\n"
            f". {INIT}; module use {self.prefix}/share/modulefiles; module load primus\n"
            f"export OMP_NUM_THREADS=1 GLOG_minloglevel=2 OUT={self.out} PROGRESS={self.progress} {env}\n"
            f"{exec_}primus-launch {launch} -- /usr/bin/python3 {self.program}\n")
        os.chmod(script, 0o755)
        if self.testbed.as_root:
            os.chown(script, self.testbed.uid, self.testbed.gid)
        self.job = self.testbed.user_cmd(
            ["sbatch", "--parsable", str(script)], timeout=30, cwd=self.dir
        ).stdout.strip().split(";")[0]
        return self.job

    def wait_ended(self, timeout=240):
        state = self.testbed.wait_ended([self.job], timeout)[self.job]
        # Slurm may still be tearing the step down for a moment after the state changes.
        self.testbed.wait_for(lambda: not job_processes(self.job), 30,
                              lambda: f"no process of job {self.job} to be left: "
                                      f"{job_processes(self.job)}")
        return state

    def step(self):
        try:
            return int(self.progress.read_text() or 0)
        except (OSError, ValueError):
            return 0

    def wait_step(self, at_least, timeout=120):
        self.testbed.wait_for(lambda: self.step() >= at_least, timeout,
                              lambda: f"job {self.job} to reach step {at_least}: step "
                                      f"{self.step()}, {self.testbed.job(self.job)}, "
                                      f"{self.output()[-3000:]}")

    def output(self):
        path = self.dir / "job.out"
        return path.read_text() if path.exists() else ""

    def events(self):
        # PRIMUS_JOB_ID: <array job>_<task> in an array.
        path = self.dir / f"primus-{getattr(self, 'primus_id', self.job)}" / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def milestones(self):
        """The events without the checkpoints' and the ranks' readiness (ranks-ready): what the
        launcher decided."""
        return [e["event"] for e in self.events()
                if not e["event"].startswith("checkpoint-") and e["event"] != "ranks-ready"]

    def final(self):
        assert self.out.exists(), self.output()[-4000:]
        return json.loads(self.out.read_text())

    def exit_code(self):
        return self.testbed.job(self.job).get("ExitCode")
