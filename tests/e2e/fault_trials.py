"""The fault campaign on the testbed (docs/reliability.md): what its trials share. The fixed set
(tests/e2e/test_faults.py, in every run) and the seeded trials (tests/e2e/long/
test_fault_trials.py, scripts/test --full) run the CNN example under primus.train as a batch job
of 4 nodes x 2 ranks under `exec primus-launch`, aim one fault at an instant of its life, and
follow the job to its end: a requeued job is started again at once (slurm_jobs.start_again),
and Launch.wait_ended checks that no process of it is left on a node."""

import os
import signal
import time
from pathlib import Path

from slurm_jobs import INIT, processes_of, start_again

LAUNCH = "--primus-max-restarts=1 --primus-hang-timeout=20 --primus-heartbeat-interval=1"


def events_of(run):
    try:
        return run.events()
    except (OSError, ValueError):
        return []


def wait_instant(testbed, run, instant):
    """Waits for the instant's marker (and its delay) in `run`'s first allocation."""
    def has(name):
        return any(e["event"] == name and e["allocation"] == 0 for e in events_of(run))

    testbed.wait_for(lambda: has("launched"), 120,
                     lambda: f"job {run.job} to start: {run.output()[-2000:]}")
    if instant == "imports":
        time.sleep(1)
    elif instant == "rendezvous":
        # Aimed from this run's own progress: the moment rank 5 is connected to rank 0's store
        # (the rendezvous cannot end before it, and torch's gloo setup after it takes longer than
        # a poll here). Aimed at 0.7 of the reference run's ranks-ready time, a run 30 % faster
        # than the reference (scripts/test on cb5b6d2: ready at 5.96 s, the reference at 8.5 s,
        # slowed by the ASan build beside it) was ready before the fault came.
        testbed.wait_for(lambda: rank_pid(run, 5) is not None, 120, "rank 5's process")
        pid = rank_pid(run, 5)
        port = int(_environment(pid).get("MASTER_PORT", "0"))
        testbed.wait_for(lambda: has("ranks-ready") or connected_to(pid, port), 120,
                         lambda: f"rank 5 (pid {pid}) to reach the store at port {port}",
                         interval=0.002)
    elif instant == "first-step":
        run.wait_step(1)
    elif instant == "save":
        testbed.wait_for(lambda: has("checkpoint-started"), 180,
                         lambda: f"job {run.job}'s first checkpoint: {run.output()[-2000:]}")
    if instant in ("imports", "rendezvous"):
        assert not has("ranks-ready"), f"the fault came after the ranks were ready: {run.events()}"


def _environment(pid):
    try:
        entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return {}
    return dict(e.decode(errors="replace").split("=", 1) for e in entries if b"=" in e)


def connected_to(pid, port):
    """Whether process `pid` holds an established TCP connection to `port` (its sockets'
    inodes matched against its network namespace's tables)."""
    try:
        inodes = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    except OSError:
        return False
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if fields[3] == "01" and remote_port == port and f"socket:[{fields[9]}]" in inodes:
                return True
    return False


def rank_pid(run, rank):
    """The pid of `rank` of the job's ranks (not its task wrapper), found through /proc."""
    for pid, comm, env in processes_of(run.job):
        if f"RANK={rank}".encode() in env and comm.startswith("python"):
            return pid
    return None


def flip_a_bit(path):
    """One bit of the data of the largest contiguous dataset of an HDF5 file, in place."""
    import h5py

    with h5py.File(path, "r") as f:
        found = []
        f.visititems(lambda name, item: found.append(
            (item.id.get_storage_size(), item.id.get_offset()))
            if isinstance(item, h5py.Dataset) and item.id.get_offset() is not None else None)
    size, offset = max(found)
    data = bytearray(path.read_bytes())
    data[offset + size // 2] ^= 0x10
    path.write_bytes(bytes(data))


def requeued(testbed, run):
    job = testbed.job(run.job)
    return job.get("Restarts") == "1" and job.get("JobState") == "PENDING"


def ended(testbed, run):
    return testbed.job(run.job).get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")


def requeued_once_and_finished(testbed, run, reference):
    testbed.wait_for(lambda: testbed.job(run.job).get("Restarts") == "1"
                     and testbed.job(run.job).get("JobState") == "PENDING", 120,
                     lambda: f"job {run.job} to be requeued: {testbed.job(run.job)}")
    start_again(testbed, run)
    assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    assert testbed.job(run.job).get("Restarts") == "1", testbed.job(run.job)
    assert [e["event"] for e in run.events()].count("requeued") == 1, run.events()
    assert run.final() == reference.final()
    run.exactly_once()


def launcher_pid(run):
    """primus-launch's pid in the job's batch step (the batch shell exec'd it)."""
    for pid, comm, _ in processes_of(run.job):
        if comm == "primus-launch":
            return pid
    return None


def pending_again(testbed, run):
    """Requeued and waiting for its next allocation (Restarts counts every requeue)."""
    job = testbed.job(run.job)
    return job.get("JobState") == "PENDING" and int(job.get("Restarts") or 0) > 0


def follow(testbed, run, most=2):
    """Follows the job to its end, starting it again at once each time it is requeued (at most
    `most` times); returns its final state."""
    for _ in range(most + 1):
        testbed.wait_for(lambda: pending_again(testbed, run) or ended(testbed, run), 300,
                         lambda: f"job {run.job} to be requeued or end: {testbed.job(run.job)}")
        if ended(testbed, run):
            break
        start_again(testbed, run)
        # Until it runs again: just after the update it still shows PENDING with its restart.
        testbed.wait_for(lambda: testbed.job(run.job).get("JobState") != "PENDING", 120,
                         lambda: f"job {run.job} to start again: {testbed.job(run.job)}")
    return run.wait_ended()


# Where a seeded trial's fault lands: a marker of the first allocation (an event of the
# launcher's, or the step rank 0 reached), then a delay drawn from [low, high) seconds. The
# rendezvous' delay is a fraction of the reference run's start (its ranks-ready event).
INSTANTS = {
    "imports": ("launched", 0.4, 1.6),
    "rendezvous": ("launched", 0.5, 0.95),
    "first-step": ("step>=1", 0.0, 0.3),
    "save": ("checkpoint-started", 0.0, 0.1),
    "commit": ("checkpoint-committed", 0.0, 0.1),
    "mid-training": ("step>=20", 0.0, 0.3),
    "last-step": ("step>=47", 0.0, 0.3),
}


def aim(testbed, run, instant, reference, rng, instants=None):
    """Waits for a seeded trial's instant (of `instants`, INSTANTS by default) in `run`'s first
    allocation."""
    marker, low, high = (instants or INSTANTS)[instant]

    def reached():
        if marker.startswith("step>="):
            return run.step() >= int(marker[len("step>="):])
        return any(e["event"] == marker and e["allocation"] == 0 for e in events_of(run))

    testbed.wait_for(reached, 180, lambda: f"job {run.job} to reach {marker}: "
                                           f"{run.output()[-2000:]}", interval=0.02)
    delay = rng.uniform(low, high)
    if instant == "rendezvous":
        ready = [float(e["details"]["seconds"]) for e in reference.events()
                 if e["event"] == "ranks-ready"]
        delay *= ready[0]
    time.sleep(delay)


def signal_rank(sig, rank=5):
    def inject(testbed, run):
        testbed.wait_for(lambda: rank_pid(run, rank) is not None, 60, f"rank {rank}'s process")
        os.kill(rank_pid(run, rank), sig)
    return inject


def kill_launcher(testbed, run):  # noqa: ARG001 (an injector's signature)
    os.kill(launcher_pid(run), signal.SIGKILL)


def scancel(*options):
    def inject(testbed, run):
        testbed.root_cmd(["scancel", *options, run.job])
    return inject


def preempt_now(testbed, run):  # noqa: ARG001
    """An exclusive job in `high` over every node: `run` (in `low`) is preempted. Returns it."""
    return testbed.sbatch("-p", "high", "-N4", "--exclusive", "-o", "/dev/null", "--wrap",
                          "sleep 1")


def user_stop(testbed, run):
    module = f". {INIT}; module use {run.prefix}/share/modulefiles; module load primus; "
    testbed.user_cmd(["bash", "-c", module + f"primus-launch stop {run.job}"], cwd=run.dir,
                     check=False)


FAULTS = {
    "preemption": preempt_now,
    "usr2-to-the-batch-shell": scancel("--batch", "--signal=USR2"),  # the time limit's warning
    "scancel-signal": scancel("--signal=USR2"),  # to the steps: the ranks
    "sigterm-rank": signal_rank(signal.SIGTERM),
    "sigkill-rank": signal_rank(signal.SIGKILL),
    "sigstop-rank": signal_rank(signal.SIGSTOP),
    "primus-launch-stop": user_stop,
    "sigkill-launcher": kill_launcher,
}
