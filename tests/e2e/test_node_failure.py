"""Surviving a lost node in the same allocation (docs/architecture.md, "Node failures"), on the
testbed with real PyTorch: tests/python/train_tiny.py (dropout, Adam, a schedule, a checkpoint
every 5 steps) under primus-launch in a --no-kill job. Losing a node here means killing its
slurmd, its slurmstepd and its tasks and setting it DOWN (node_loss.py); never the batch host.
Every test brings the node back and checks that no process of its jobs is left."""

import json
import os
import time

import pytest

from cnn_jobs import CnnJob, write_dataset
from node_loss import lose_node, restore_node
from slurm_jobs import Launch, job_processes, start_again

import train_oracle  # noqa: E402 (cnn_jobs puts tests/python on the path)


@pytest.fixture(scope="module")
def reference3(testbed, prefix):
    """The uninterrupted run at the spare job's world size: 3 nodes x 2 ranks."""
    run = Launch(testbed, prefix, "reference-3-nodes", layout="-N3 --ntasks-per-node=2")
    run.submit()
    assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    return run


def test_a_lost_node_is_replaced_by_a_spare_and_the_run_ends_bitwise_equal(
        testbed, prefix, reference3):
    run = Launch(testbed, prefix, "spare", layout="-N4 --ntasks-per-node=2 --no-kill")
    run.submit(launch="--primus-spare-nodes=1", env="STEP_SLEEP=0.7")
    try:
        run.wait_step(7)  # past the checkpoint at step 5
        lost_at = time.monotonic()
        lose_node(testbed, "n3", batch_host="n1")  # the ranks run on n1, n2 and n3
        # Training again: rank 0 has finished step 6 again, resumed from step 5.
        testbed.wait_for(lambda: run.step() == 6, 120,
                         lambda: f"the ranks to train again: {run.output()[-3000:]}", 0.05)
        training_again = time.monotonic() - lost_at
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        restore_node(testbed, "n3")
    assert run.exit_code() == "0:0"
    assert run.final() == reference3.final()
    job = testbed.job(run.job)
    assert job["Restarts"] == "0", job  # the same allocation, never back in the queue
    events = run.events()
    assert run.milestones() == ["launched", "placed", "node-lost", "node-excluded", "restarted",
                                "placed", "resuming", "finished"], events
    placed = [e["details"] for e in events if e["event"] == "placed"]
    assert [p["nodes"] for p in placed] == ["n[1-3]", "n[1-2,4]"], placed
    assert [p["ranks"] for p in placed] == ["6", "6"], placed
    lost = [e for e in events if e["event"] == "node-lost"][0]
    assert lost["node"] == "n3" and "State=DOWN" in lost["details"]["reason"], lost
    resuming = [e for e in events if e["event"] == "resuming"][0]
    assert (resuming["attempt"], resuming["details"]["step"]) == (1, "5"), resuming
    excluded = json.loads((run.dir / f"primus-{run.job}" / "excluded-nodes.json").read_text())
    assert [e["node"] for e in excluded["excluded"]] == ["n3"], excluded
    assert excluded["excluded"][0]["reason"].startswith("lost: State=DOWN"), excluded
    out = run.output()
    assert "node n3 was lost" in out and "starting the ranks again without n3" in out, out[-4000:]
    print(f"\nnode lost with a spare: training again {training_again:.2f} s after the kill")
    print(run.output()[-2500:])


def test_without_spares_a_lost_node_ends_the_job_naming_it(testbed, prefix):
    run = Launch(testbed, prefix, "no-spare", layout="-N4 --ntasks-per-node=2 --no-kill")
    run.submit(launch="--primus-max-restarts=2", env="STEP_SLEEP=0.7")
    try:
        run.wait_step(3)
        lose_node(testbed, "n2", batch_host="n1")
        assert run.wait_ended() == "FAILED", run.output()[-4000:]
    finally:
        restore_node(testbed, "n2")
    out = run.output()
    assert "node n2 was lost" in out, out[-4000:]
    assert "the ranks cannot go on after losing n2" in out and "--primus-spare-nodes" in out, \
        out[-4000:]
    assert run.milestones()[-3:] == ["node-lost", "node-excluded", "failed"], run.events()
    assert "restarted" not in run.milestones()


SHRINK_RECORDS, SHRINK_BATCH, SHRINK_EPOCHS = 960, 24, 2  # 960 = 40 x 24: no batch is short


@pytest.fixture(scope="module")
def dataset960(testbed, prefix):
    return write_dataset(testbed, prefix, SHRINK_RECORDS)


def test_elastic_a_job_that_loses_a_node_finishes_on_three_reading_every_record_once(
        testbed, prefix, dataset960):
    """4 nodes x 2 ranks, --primus-elastic=2, a global batch of 24; n4 is lost after the
    checkpoint at step 20: the ranks go on at 6 ranks on n[1-3] from that checkpoint (24 = 6 x
    4), and every record is read exactly once per epoch by the steps the final model descends
    from. Not bitwise equal to the 8-rank run: 6 shares are summed in another order than 8."""
    run = CnnJob(testbed, prefix, "cnn-elastic", dataset960, layout="-N4 --ntasks-per-node=2 --no-kill")
    run.submit(launch="--primus-elastic=2 --primus-global-batch-size=24",
               env=f"EPOCHS={SHRINK_EPOCHS} STEP_SLEEP=0.3")
    try:
        run.wait_step(24)
        lose_node(testbed, "n4", batch_host="n1")
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        restore_node(testbed, "n4")
    assert testbed.job(run.job)["Restarts"] == "0"
    placed = [e["details"] for e in run.events() if e["event"] == "placed"]
    assert [(p["nodes"], p["ranks"], p["shrunk"]) for p in placed] == \
        [("n[1-4]", "8", "false"), ("n[1-3]", "6", "true")], placed
    assert "the ranks go on with 6 ranks on 3 nodes (n1,n2,n3) instead of 4" in run.output()
    steps_per_epoch = SHRINK_RECORDS // SHRINK_BATCH
    chain = train_oracle.check_exactly_once(train_oracle.read_trace(run.trace), SHRINK_RECORDS,
                                            SHRINK_EPOCHS, steps_per_epoch)
    resumed = [e for e in run.events() if e["event"] == "resuming"][0]["details"]["step"]
    assert {len(chain[s]["ranks"]) for s in range(1, int(resumed) + 1)} == {8}
    assert {len(chain[s]["ranks"]) for s in range(int(resumed) + 1,
                                                 SHRINK_EPOCHS * steps_per_epoch + 1)} == {6}
    assert not job_processes(run.job)


def test_without_spares_an_allocation_holding_an_excluded_node_starts_no_rank(testbed, prefix):
    """A job directory that excludes n2 (an earlier allocation's verdict) and an allocation that
    holds it (Slurm gave it back, as a requeue by hand would): without spares the ranks would need
    n2, so none starts, and the message says why and what to do."""
    run = Launch(testbed, prefix, "excluded-held", layout="-N2 --nodelist=n[1-2] --ntasks-per-node=2")
    job_dir = run.dir / "jobdir"
    job_dir.mkdir(mode=0o700)
    listed = job_dir / "excluded-nodes.json"
    listed.write_text(json.dumps({"excluded": [{"node": "n2", "reason": "ranks 0 and 2 failed there",
                                                "time": "2026-12-03T00:00:00.000Z",
                                                "allocation": 0, "attempt": 1}]}))
    if testbed.as_root:
        os.chown(job_dir, testbed.uid, testbed.gid)
        os.chown(listed, testbed.uid, testbed.gid)
    run.submit(launch=f"--primus-job-dir={job_dir}")
    assert run.wait_ended() == "FAILED", run.output()[-3000:]
    out = run.output()
    assert ("not starting the ranks: the allocation includes nodes this job excluded: n2 (ranks 0 "
            "and 2 failed there); submit with --exclude=NODES") in out, out[-3000:]
    events = [json.loads(line)["event"] for line in (job_dir / "events.jsonl").read_text().splitlines()]
    assert events == ["launched", "failed"], events
    assert not list(job_dir.glob("logs/*/*/rank-*.log"))


@pytest.fixture(scope="module")
def reference2(testbed, prefix):
    """The uninterrupted run at the exclusion job's world size: 2 nodes x 2 ranks."""
    run = Launch(testbed, prefix, "reference-2-nodes", layout="-N2 --ntasks-per-node=2")
    run.submit()
    assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    return run


def test_a_node_where_two_ranks_failed_is_excluded_here_and_in_the_next_allocation(
        testbed, prefix, reference2):
    """Local rank 0 fails at step 3 on n2 only. 3 nodes, ranks on 2 (a spare): attempt 0 on
    n[1-2] loses rank 2 there; the restart rotates to n[2-3] and loses rank 0 there: two
    different ranks, so n2 is excluded and attempt 2 runs on n1 and n3. A stop at step 10 then
    has the launcher requeue the job with ExcNodeList=n2, and the next allocation places no rank
    on n2. The world size is 4 throughout: the run ends bitwise equal to the uninterrupted one."""
    run = Launch(testbed, prefix, "exclude", layout="-N3 --ntasks-per-node=2 -p low --requeue")
    run.submit(launch="--primus-spare-nodes=1 --primus-max-restarts=3",
               env="FAIL_NODE=n2 FAIL_AT=3 FAIL_RANK=-1 STOP_AT=10 STEP_SLEEP=0.3")
    try:
        # Requeued, held, given its ExcNodeList and released: pending for its BeginTime.
        testbed.wait_for(lambda: (testbed.job(run.job).get("Restarts"),
                                  testbed.job(run.job).get("Reason")) == ("1", "BeginTime"), 180,
                         lambda: f"the job to be requeued and released: {testbed.job(run.job)} "
                                 f"{run.output()[-3000:]}")
        job = testbed.job(run.job)
        assert job["ExcNodeList"] == "n2", (job, run.output()[-3000:], run.events())
        start_again(testbed, run)
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(run.job)
    job = testbed.job(run.job)
    assert job["Restarts"] == "1" and "n2" not in job["NodeList"], job
    assert run.final() == reference2.final()
    events = run.events()
    failed = [(e["rank"], e["node"]) for e in events if e["event"] == "rank-failed"]
    assert failed == [(2, "n2"), (0, "n2")], events
    excluded = [e for e in events if e["event"] == "node-excluded"]
    assert [(e["node"], e["details"]["reason"]) for e in excluded] == \
        [("n2", "ranks 0 and 2 failed there")], events
    placed = [(e["allocation"], e["details"]["nodes"]) for e in events if e["event"] == "placed"]
    assert placed[:3] == [(0, "n[1-2]"), (0, "n[2-3]"), (0, "n[1,3]")], placed
    assert [nodes for allocation, nodes in placed if allocation == 1] == ["n[1,3]"], placed
    requeued = [e for e in events if e["event"] == "requeued"]
    assert requeued and requeued[0]["details"]["excluded"] == "n2", events
    listed = json.loads((run.dir / f"primus-{run.job}" / "excluded-nodes.json").read_text())
    assert [e["node"] for e in listed["excluded"]] == ["n2"], listed
    status = json.loads((run.dir / f"primus-{run.job}" / "status.json").read_text())
    assert status["excluded_nodes"] == [{"node": "n2", "reason": "ranks 0 and 2 failed there"}]
    shown = testbed.user_cmd([str(prefix / "bin" / "primus-launch"), "status",
                              str(run.dir / f"primus-{run.job}")]).stdout
    assert "EXCLUDED" in shown and "n2           ranks 0 and 2 failed there" in shown, shown
    assert not job_processes(run.job)
