#!/usr/bin/env python3
"""From a lost node to training again, two ways, on the testbed (started with the plugin), with
tests/python/train_tiny.py at 6 ranks (0.5 s a step, a checkpoint every 5 steps):

  spare     sbatch -N4 --ntasks-per-node=2 --no-kill, primus-launch --primus-spare-nodes=1: the
            ranks start again on the spare in the same allocation;
  requeue   sbatch -N3 --ntasks-per-node=2 --requeue: Slurm requeues the job at the node failure,
            and it runs again as soon as the testbed lets it: its ~120 s BeginTime is skipped
            (scontrol update StartTime=now once its old allocation's processes are gone, and 2 s
            more, since slurmd refuses a job started within the second its credential was
            revoked), the floor of going back to a queue with no other jobs.

Each run trains past step 7, then n3 (one of its rank nodes, not the batch host) is lost
(tests/e2e/node_loss.py); the time counts from the loss until rank 0 has finished step 6 again
(resumed from the checkpoint of step 5). Printed: each way's times, their medians and the ratio
spare / requeue (goal: at most 0.5). Exits 1 when the goal is missed or a run failed.
Usage: bench_node_loss.py BUILD_DIR. Environment: PRIMUS_BENCH_NODE_LOSS_PAIRS (2)."""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "tests" / "e2e"))

from bench_launch_slurm import testbed_env  # noqa: E402
from conftest import Testbed  # noqa: E402
from node_loss import lose_node, restore_node  # noqa: E402
from slurm_jobs import Launch, start_again  # noqa: E402

GOAL = 0.5


def training_again(testbed, run, lost_at, timeout=300):
    testbed.wait_for(lambda: run.step() == 6, timeout,
                     lambda: f"job {run.job} to train again: {testbed.job(run.job)} "
                             f"{run.output()[-2000:]}", 0.05)
    return time.monotonic() - lost_at


def spare_path(testbed, prefix, name):
    run = Launch(testbed, prefix, name, layout="-N4 --ntasks-per-node=2 --no-kill")
    run.submit(launch="--primus-spare-nodes=1", env="STEP_SLEEP=0.5")
    try:
        run.wait_step(7)
        lost_at = time.monotonic()
        lose_node(testbed, "n3", batch_host="n1")
        seconds = training_again(testbed, run, lost_at)
        assert run.wait_ended() == "COMPLETED", run.output()[-3000:]
        assert testbed.job(run.job)["Restarts"] == "0"
        return seconds
    finally:
        testbed.cancel(run.job)
        restore_node(testbed, "n3")


def requeue_path(testbed, prefix, name):
    run = Launch(testbed, prefix, name, layout="-N3 --ntasks-per-node=2 --requeue")
    run.submit(env="STEP_SLEEP=0.5")
    try:
        run.wait_step(7)
        lost_at = time.monotonic()
        lose_node(testbed, "n3", batch_host="n1")
        testbed.wait_for(lambda: testbed.job(run.job).get("JobState") == "PENDING", 120,
                         lambda: f"job {run.job} to be requeued: {testbed.job(run.job)}", 0.05)
        start_again(testbed, run)
        seconds = training_again(testbed, run, lost_at)
        assert run.wait_ended() == "COMPLETED", run.output()[-3000:]
        assert testbed.job(run.job)["Restarts"] == "1"
        return seconds
    finally:
        testbed.cancel(run.job)
        restore_node(testbed, "n3")


def main():
    build = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    pairs = int(os.environ.get("PRIMUS_BENCH_NODE_LOSS_PAIRS", "2"))
    env = testbed_env()
    os.environ.update({k: v for k, v in env.items() if k.startswith(("SLURM_", "PRIMUS_"))})
    testbed = Testbed(env)
    prefix = Path(tempfile.mkdtemp(prefix="install-", dir=testbed.dir / "work"))
    subprocess.run(["make", "-C", str(build), "-s", "install", f"prefix={prefix}"], check=True,
                   capture_output=True)
    for root, dirs, files in os.walk(prefix):
        for entry in dirs + files:
            os.chmod(os.path.join(root, entry), 0o755)
    os.chmod(prefix, 0o755)
    spare, requeue = [], []
    for i in range(pairs):  # interleaved, the order alternating
        ways = [("spare", spare_path, spare), ("requeue", requeue_path, requeue)]
        for label, measure, times in (ways if i % 2 == 0 else ways[::-1]):
            times.append(measure(testbed, prefix, f"{label}-{i}"))
            print(f"  {label:8s} run {i}: training again {times[-1]:.2f} s after the loss",
                  flush=True)
    ratio = statistics.median(spare) / statistics.median(requeue)
    print(f"# from a lost node to training again (train_tiny, 6 ranks, testbed), {pairs} pairs")
    print(f"    spare node, same allocation: median {statistics.median(spare):.2f} s "
          f"({min(spare):.2f} to {max(spare):.2f})")
    print(f"    requeued, BeginTime skipped: median {statistics.median(requeue):.2f} s "
          f"({min(requeue):.2f} to {max(requeue):.2f})")
    print(f"# spare / requeue: {ratio:.3f} (goal: at most {GOAL})")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
