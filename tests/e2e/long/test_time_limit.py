"""Time limits under primus-launch (scripts/test --full: these take minutes). A job of 2 nodes x 1
rank with `--time=3 --signal=USR2@90 --requeue` needs more than one allocation: at the warning
signal its ranks checkpoint and exit 75, the launcher requeues the job, and the next allocation
resumes; the run ends bitwise equal to the uninterrupted one. With --primus-max-requeues=1 a job
that needs more allocations ends with exit 1 and a requeue-cap-reached event. The CNN example
(4 nodes x 2 ranks, primus.train) does the same with the README's `--signal=B:USR2@90`, and reads
every record once per epoch."""

import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cnn_jobs import CnnJob, dataset, reference  # noqa: E402,F401 (fixtures)
from slurm_jobs import Launch, job_processes  # noqa: E402


def skip_begin_time(testbed, run, stop):
    """A requeued job waits ~120 s (Reason=BeginTime): let it start again after 3 s (at once,
    slurmd may refuse its revoked credential; see slurm_jobs.start_again)."""
    pending_since = None
    while not stop.wait(1):
        job = testbed.job(run.job)
        if job.get("JobState") == "PENDING" and job.get("Reason") == "BeginTime":
            pending_since = pending_since or time.monotonic()
            if time.monotonic() - pending_since >= 3:
                testbed.root_cmd(["scontrol", "update", f"JobId={run.job}", "StartTime=now"],
                                 check=False)
                pending_since = None
        else:
            pending_since = None


def test_time_limits_requeue_until_the_run_ends_bitwise_equal_and_the_cap_ends_with_1(
        testbed, prefix):
    layout = "-N2 --ntasks-per-node=1"
    reference = Launch(testbed, prefix, "tl-reference", layout=layout)
    reference.submit()
    assert reference.wait_ended() == "COMPLETED", reference.output()[-3000:]

    limited = Launch(testbed, prefix, "tl-requeued", layout=layout)
    limited.submit(sbatch="--time=3 --signal=USR2@90 --requeue", env="STEP_SLEEP=2.5")
    capped = Launch(testbed, prefix, "tl-capped", layout=layout)
    capped.submit(sbatch="--time=3 --signal=USR2@90 --requeue", launch="--primus-max-requeues=1",
                  env="STEP_SLEEP=10")
    stop = threading.Event()
    helpers = [threading.Thread(target=skip_begin_time, args=(testbed, r, stop), daemon=True)
               for r in (limited, capped)]
    for helper in helpers:
        helper.start()
    try:
        assert limited.wait_ended(timeout=900) == "COMPLETED", limited.output()[-3000:]
        assert capped.wait_ended(timeout=900) == "FAILED", capped.output()[-3000:]
    finally:
        stop.set()
        testbed.cancel(limited.job, capped.job)

    assert limited.final() == reference.final()
    events = limited.events()
    allocations = sorted({e["allocation"] for e in events})
    assert len(allocations) >= 2, events
    assert [e["event"] for e in events].count("time-limit") == len(allocations) - 1, events
    resumed = [int(s) for s in __import__("re").findall(r"rank 0: resumed at step (\d+)",
                                                       limited.output())]
    assert resumed == sorted(resumed) and len(resumed) == len(allocations) - 1, limited.output()
    assert resumed[0] > 0  # every allocation made progress

    assert capped.exit_code() == "1:0"
    names = capped.milestones()
    assert names.count("requeued") == 1 and names[-1] == "requeue-cap-reached", capped.events()
    assert "--primus-max-requeues=1" in capped.output(), capped.output()[-3000:]


def test_the_cnn_example_across_time_limited_allocations_ends_bitwise_equal_reading_once(
        testbed, prefix, dataset, reference):
    """The CNN example (4 nodes x 2 ranks, primus.train) as the README's preemptible job:
    `--time=3 --requeue --signal=B:USR2@90` and `exec primus-launch`, each step 2.5 s longer so
    that the 48 steps need more than one allocation. At each warning the batch shell's
    primus-launch has the ranks save the step they are at and requeues the job; the last
    allocation finishes with the uninterrupted run's parameters and optimizer state, bit for
    bit, and the steps the final model descends from read every record once per epoch."""
    run = CnnJob(testbed, prefix, "cnn-time-limit", dataset)
    run.submit(sbatch="--time=3 --signal=B:USR2@90 --requeue", env="STEP_SLEEP=2.5")
    stop = threading.Event()
    helper = threading.Thread(target=skip_begin_time, args=(testbed, run, stop), daemon=True)
    helper.start()
    try:
        assert run.wait_ended(timeout=1200) == "COMPLETED", run.output()[-4000:]
    finally:
        stop.set()
        testbed.cancel(run.job)
    assert run.final() == reference.final()
    events = run.events()
    allocations = sorted({e["allocation"] for e in events})
    assert len(allocations) >= 2, events
    assert [e["event"] for e in events].count("time-limit") == len(allocations) - 1, events
    assert testbed.job(run.job).get("Restarts") == str(len(allocations) - 1)
    stopped = run.stopped_at()
    assert len(stopped) == len(allocations) - 1 and stopped == sorted(set(stopped)), \
        run.output()[-4000:]
    assert stopped[0] > 0  # every allocation made progress
    resumed = [int(e["details"]["step"]) for e in events if e["event"] == "resuming"]
    assert resumed == stopped, events  # each allocation resumes where the last one saved
    run.exactly_once()
    assert not job_processes(run.job)
