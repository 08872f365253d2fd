"""Seeded trials of the fault campaign on the testbed (scripts/test --full; docs/reliability.md):
PRIMUS_FAULT_SLURM_TRIALS trials (24 by default; seed PRIMUS_FAULT_SEED, 39 by default), each
one fault of tests/e2e/fault_trials.py's FAULTS at one of its INSTANTS with a seeded delay, in
the CNN example's batch job (4 nodes x 2 ranks, `-p low --requeue`, steps of 0.3 s), then the
contract, followed through every requeue:

- the job ends COMPLETED with the uninterrupted run's bits and every record once per epoch;
  except that SIGKILL of primus-launch ends it FAILED (nothing can save) and `primus-launch
  stop` ends it COMPLETED after its checkpoint, and then the same script submitted again
  resumes and ends so; and a stopped rank (SIGSTOP) is found by the hang timeout, named, and
  the job FAILED (its node is excluded, and there is no spare here), or it finished first;
- never more than one requeue or restart for the fault;
- no process of the job left on a node (Launch.wait_ended).

And PRIMUS_FAULT_NODE_TRIALS (4 by default) trials of a lost node at a seeded instant:
tests/python/train_tiny.py on 3 nodes x 2 ranks of a `--no-kill` job of 4 nodes under
--primus-spare-nodes=1; n3 is lost (tests/e2e/node_loss.py), the ranks start again on the spare
from the newest checkpoint, and the job ends COMPLETED, in its allocation, bitwise equal to the
uninterrupted run of 3 nodes."""

import os
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cnn_jobs import CnnJob, dataset, reference  # noqa: E402,F401 (fixtures)
from fault_trials import FAULTS, INSTANTS, LAUNCH, aim, follow  # noqa: E402
from node_loss import lose_node, restore_node  # noqa: E402
from slurm_jobs import Launch  # noqa: E402

TRIALS = int(os.environ.get("PRIMUS_FAULT_SLURM_TRIALS", "24"))
SEED = int(os.environ.get("PRIMUS_FAULT_SEED", "39"))
NODE_TRIALS = int(os.environ.get("PRIMUS_FAULT_NODE_TRIALS", "4"))
# train_tiny.py at 6 ranks: 15 steps (5 an epoch), a checkpoint every 5.
NODE_INSTANTS = {
    "imports": ("launched", 0.4, 1.6),
    "rendezvous": ("launched", 0.5, 0.95),
    "first-step": ("step>=1", 0.0, 0.5),
    "save": ("checkpoint-started", 0.0, 0.1),
    "commit": ("checkpoint-committed", 0.0, 0.1),
    "mid-training": ("step>=8", 0.0, 0.5),
    "last-step": ("step>=14", 0.0, 0.5),
}


def plan():
    """Every fault once before any twice, each at a seeded instant, with its own seed."""
    rng = random.Random(SEED)
    trials = []
    while len(trials) < TRIALS:
        faults = sorted(FAULTS)
        rng.shuffle(faults)
        for fault in faults[:TRIALS - len(trials)]:
            trials.append((fault, rng.choice(sorted(INSTANTS)), rng.getrandbits(32)))
    return trials


@pytest.mark.parametrize("fault, instant, seed", plan(),
                         ids=[f"{n}-{f}-{i}" for n, (f, i, _) in enumerate(plan())])
def test_one_fault_at_a_seeded_instant_keeps_the_contract(
        testbed, prefix, dataset, reference, fault, instant, seed):
    rng = random.Random(seed)
    run = CnnJob(testbed, prefix, f"trial-{fault}-{instant}-{seed}", dataset)
    launch = f"{LAUNCH} --primus-job-dir={run.dir}/primus-kept"
    run.primus_id = "kept"  # one job directory for a submission again (events.jsonl's folder)
    run.submit(sbatch="-p low --requeue", launch=launch, env="STEP_SLEEP=0.3")
    high = None
    try:
        aim(testbed, run, instant, reference, rng)
        high = FAULTS[fault](testbed, run)
        state = follow(testbed, run)
        names = run.milestones()
        assert names.count("requeued") + names.count("restarted") <= 1, run.events()
        if fault == "sigstop-rank" and state == "FAILED":
            assert [e["rank"] for e in run.events() if e["event"] == "hang"] == [5], run.events()
            assert "rank 5 on n" in run.output(), run.output()[-3000:]
            return
        if fault == "sigkill-launcher":
            assert state in ("FAILED", "COMPLETED"), run.output()[-4000:]
        else:
            assert state == "COMPLETED", run.output()[-4000:]
        if not run.out.exists() or state != "COMPLETED":
            # Stopped (primus-launch stop) or killed: the same script again finishes the job.
            assert fault in ("primus-launch-stop", "sigkill-launcher"), run.output()[-4000:]
            run.submit(sbatch="-p low --requeue", launch=launch,
                       env=f"TRACE_RUN={run.name}-again")
            assert follow(testbed, run) == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(run.job)
        if high is not None:
            testbed.wait_ended([high], 120)
            testbed.cancel(high)
    assert run.final() == reference.final()
    run.exactly_once()


@pytest.fixture(scope="module")
def reference3(testbed, prefix):
    """The uninterrupted run of train_tiny.py at the spare job's world size: 3 nodes x 2 ranks."""
    run = Launch(testbed, prefix, "trial-reference-3-nodes", layout="-N3 --ntasks-per-node=2")
    run.submit(launch=LAUNCH)
    assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    return run


def node_plan():
    rng = random.Random(SEED + 1)
    return [(rng.choice(sorted(NODE_INSTANTS)), rng.getrandbits(32)) for _ in range(NODE_TRIALS)]


@pytest.mark.parametrize("instant, seed", node_plan(),
                         ids=[f"{n}-{i}" for n, (i, _) in enumerate(node_plan())])
def test_a_node_lost_at_a_seeded_instant_is_replaced_by_the_spare_bitwise_equal(
        testbed, prefix, reference3, instant, seed):
    rng = random.Random(seed)
    run = Launch(testbed, prefix, f"trial-node-lost-{instant}-{seed}",
                 layout="-N4 --ntasks-per-node=2 --no-kill")
    run.submit(launch=f"{LAUNCH} --primus-spare-nodes=1", env="STEP_SLEEP=0.5")
    try:
        aim(testbed, run, instant, reference3, rng, NODE_INSTANTS)
        lose_node(testbed, "n3", batch_host="n1")  # the ranks run on n1, n2 and n3
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(run.job)
        restore_node(testbed, "n3")
    assert testbed.job(run.job)["Restarts"] == "0"  # the same allocation
    names = run.milestones()
    assert names.count("restarted") <= 1, run.events()
    assert run.final() == reference3.final()
