"""primus.train end to end on the testbed: the CNN example (examples/cnn/train.py: batch norm,
dropout, Adam, a learning-rate schedule, asynchronous checkpoints every 10 steps) as a batch job
of 4 nodes x 2 ranks under `exec primus-launch`, from the installed module, interrupted as
users' jobs are: preempted while the ranks start, preempted while a checkpoint is being written,
preempted with ranks that ignore the signal until Slurm kills them after GraceTime, preempted at
a step that is no checkpoint step, a rank that crashes, and a requeued job given fewer nodes. Every run must end with the
parameters, buffers and optimizer state of the uninterrupted run, bit for bit (the fewer-nodes
run excepted: another world size sums the gradients in another order), and the steps the final
model descends from must have read every record exactly once per epoch (train_oracle.py, from
the record numbers each rank logged at every step of every run)."""

import sys
import time
from pathlib import Path

from cnn_jobs import (EPOCHS, STEPS_PER_EPOCH, CnnJob, dataset,  # noqa: F401 (fixtures)
                      reference)
from slurm_jobs import job_processes, preempt, start_again

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
import train_oracle  # noqa: E402


def test_the_uninterrupted_cnn_job_reads_every_record_once_per_epoch(reference):
    assert reference.exit_code() == "0:0"
    chain = reference.exactly_once()
    assert {len(entry["ranks"]) for entry in chain.values()} == {8}
    final = reference.final()
    assert any(k.endswith("running_var") for k in final) and \
        any(k.endswith("exp_avg") for k in final), sorted(final)[:10]
    names = [e["event"] for e in reference.events()]
    assert names.count("checkpoint-committed") == 5, reference.events()  # 10..40 and 48
    out = reference.output()
    assert f"finished: {EPOCHS * STEPS_PER_EPOCH} steps, {EPOCHS} epochs" in out, out[-3000:]


def test_preempted_while_a_checkpoint_is_written_it_resumes_bitwise_equal(
        testbed, prefix, dataset, reference):
    """The step-10 checkpoint takes 4 s longer to write (in the background), and rank 0 waits
    in step 11 for the stop signal: the preemption comes while that write is in flight. Step
    11's should_stop() agrees on the stop (PRIMUS_STOP_INTERVAL=0: the ranks agree at every
    step, so that the test knows the step), which commits step 10 first, then saves step 11,
    within GraceTime."""
    run = CnnJob(testbed, prefix, "cnn-preempt-writing", dataset)
    run.submit(sbatch="-p low --requeue", env="SLOW_WRITE=4 PAUSE_AT=11 PRIMUS_STOP_INTERVAL=0")
    try:
        run.wait_step(11)
        assert run.checkpoint_started(10)
        preempt(testbed, run)
        start_again(testbed, run)
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(run.job)
    assert run.final() == reference.final()
    assert run.stopped_at() == [11], run.output()[-3000:]
    events = run.events()
    order = [(e["event"], e["details"].get("step")) for e in events if e["allocation"] == 0
             and e["event"] in ("checkpoint-started", "checkpoint-committed", "stop-requested")]
    assert order == [("checkpoint-started", "10"), ("stop-requested", None),
                     ("checkpoint-committed", "10"), ("checkpoint-started", "11"),
                     ("checkpoint-committed", "11")], order
    resuming = [e["details"]["step"] for e in events if e["event"] == "resuming"]
    assert resuming == ["11"], events
    chain = run.exactly_once()
    assert chain[11]["run"] != chain[12]["run"], "step 12 is the resumed run's"


def test_ranks_that_ignore_the_signal_are_killed_after_gracetime_and_resume_bitwise_equal(
        testbed, prefix, dataset, reference):
    """The ranks ignore SIGTERM and would train on past the partition's GraceTime (10 s). Slurm
    would then kill the job and end it TIMEOUT, never requeued (seen here): primus-launch
    requeues it itself 3 s before its end time, and it resumes from the last periodic
    checkpoint; the records of the steps after it were read twice, and only the resumed run's
    reading counts."""
    run = CnnJob(testbed, prefix, "cnn-preempt-killed", dataset)
    run.submit(sbatch="-p low --requeue", env="IGNORE_STOP=1 STEP_SLEEP=0.6")
    try:
        run.wait_step(16)
        preempted_at = time.monotonic()
        preempt(testbed, run)
        assert time.monotonic() - preempted_at >= 5, "requeued long before GraceTime ended"
        start_again(testbed, run)
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(run.job)
    assert run.final() == reference.final()
    assert run.stopped_at() == [], run.output()[-3000:]
    requeued = [e["details"] for e in run.events() if e["event"] == "requeued"]
    assert requeued == [{"job": run.job,
                         "reason": "the ranks did not stop before the job's end time"}], \
        run.events()[-12:] + [run.output()[-3000:]]
    assert testbed.job(run.job).get("Restarts") == "1"
    resumed = [int(e["details"]["step"]) for e in run.events() if e["event"] == "resuming"]
    assert len(resumed) == 1 and resumed[0] % 10 == 0 and resumed[0] >= 10, run.events()
    trace = train_oracle.read_trace(run.trace)
    first = min(trace, key=lambda e: e["time"])["run"]
    assert max(e["step"] for e in trace if e["run"] == first) > resumed[0], \
        "the killed run took no step after its checkpoint"
    run.exactly_once()


def test_preempted_while_the_ranks_start_it_is_requeued_and_ends_bitwise_equal(
        testbed, prefix, dataset, reference):
    """The preemption comes a second after primus-launch started the step, while the ranks
    import torch (issue 39: the job ended COMPLETED with no training done, since ranks killed
    by SIGTERM before primus.init() were neither failed nor stopped). A rank stopped before it
    was ready stopped while starting: the job is requeued once and resumes from the start."""
    run = CnnJob(testbed, prefix, "cnn-preempt-starting", dataset)
    run.submit(sbatch="-p low --requeue")

    def launched():
        try:
            return any(e["event"] == "launched" for e in run.events())
        except (OSError, ValueError):
            return False

    try:
        testbed.wait_for(launched, 60, lambda: f"job {run.job} to start: {run.output()[-2000:]}")
        time.sleep(1)
        assert run.step() == 0
        preempt(testbed, run)
        start_again(testbed, run)
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(run.job)
    names = [e["event"] for e in run.events() if e["allocation"] == 0]
    assert "preempted" in names and names.count("requeued") == 1, run.events()
    assert "stop came while the ranks were starting" in run.output(), run.output()[-3000:]
    assert testbed.job(run.job).get("Restarts") == "1"
    assert [e["details"]["step"] for e in run.events() if e["event"] == "resuming"] == []
    assert run.final() == reference.final()
    run.exactly_once()


def test_preempted_at_a_step_that_is_no_checkpoint_step_it_saves_there(
        testbed, prefix, dataset, reference):
    run = CnnJob(testbed, prefix, "cnn-preempt-between", dataset)
    run.submit(sbatch="-p low --requeue", env="PAUSE_AT=17 PRIMUS_STOP_INTERVAL=0")
    try:
        run.wait_step(17)
        preempt(testbed, run)
        start_again(testbed, run)
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(run.job)
    # Preempted in step 17, whose should_stop() agrees on the stop (at every step here).
    assert run.stopped_at() == [17], run.output()[-3000:]
    assert run.final() == reference.final()
    assert [e["details"]["step"] for e in run.events() if e["event"] == "resuming"] == ["17"]
    run.exactly_once()


def test_a_rank_that_crashes_restarts_from_the_checkpoint_and_ends_bitwise_equal(
        testbed, prefix, dataset, reference):
    run = CnnJob(testbed, prefix, "cnn-crash", dataset)
    run.submit(launch="--primus-max-restarts=1",
               env=f"FAIL_AT=27 FAIL_RANK=5 FAIL_MARKER={run.dir}/failed")
    assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    assert run.final() == reference.final()
    assert run.milestones() == ["launched", "dataset-checked", "rank-failed", "restarted",
                                "resuming", "finished"], run.events()
    assert [e["details"]["step"] for e in run.events() if e["event"] == "resuming"] == ["20"]
    run.exactly_once()


def test_a_rank_that_crashes_is_replaced_in_its_task_while_the_others_stay(
        testbed, prefix, dataset, reference):
    """--primus-recover=rejoin under srun: rank 5 of 8 exits 3 after step 27 (checkpoint 20
    committed) once its node's standby is done importing; its task wrapper reports the end and
    waits, the seven others stay alive in the same step, and on the launcher's notice the wrapper
    has the node's standby make rank 5 again in its own task, in generation 1 on the generation's
    ports; every rank goes on from step 20 and the run ends bitwise equal, every record once per
    epoch, in one attempt and one srun step."""
    run = CnnJob(testbed, prefix, "cnn-rejoin", dataset)
    run.submit(launch="--primus-recover=rejoin --primus-max-restarts=1",
               env=f"FAIL_AT=27 FAIL_RANK=5 FAIL_MARKER={run.dir}/failed AFTER_COMMIT=1 "
                   "STANDBY=wait")
    assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    assert (run.dir / "failed").exists()
    assert run.final() == reference.final()
    assert run.milestones() == ["launched", "dataset-checked", "rank-failed", "rejoin",
                                "resuming", "rejoined", "rejoin-first-step", "finished"], \
        run.events()
    events = run.events()
    assert [e["details"]["step"] for e in events if e["event"] == "resuming"] == ["20"]
    rejoined = next(e for e in events if e["event"] == "rejoined")
    assert (rejoined["rank"], rejoined["details"]["generation"],
            rejoined["details"]["replacement"]) == (5, "1", "standby"), rejoined
    assert {e["attempt"] for e in events} == {0}, "one attempt: nobody was restarted"
    logs = run.dir / f"primus-{run.job}" / "logs" / "alloc-0" / "attempt-0"
    names = sorted(p.name for p in logs.iterdir())
    assert names == sorted([f"rank-{r}.log" for r in range(8)] + ["rank-5.gen-1.log"] +
                           [f"standby-n{n}.log" for n in range(1, 5)]), names
    rank5_node = next(e["node"] for e in events if e["event"] == "rank-failed")
    assert "becomes rank 5" in (logs / f"standby-{rank5_node}.log").read_text()
    assert f"finished at step {EPOCHS * STEPS_PER_EPOCH}" in (logs / "rank-5.gen-1.log").read_text()
    chain = run.exactly_once()
    assert {step: entry["run"] for step, entry in chain.items()} == {
        step: "cnn-rejoin/-/0" if step <= 20 else "cnn-rejoin/-/0/1" for step in chain}, \
        chain


def test_a_rank_that_hangs_is_killed_by_its_task_wrapper_and_replaced(
        testbed, prefix, dataset, reference):
    """--primus-recover=rejoin under srun, rank 2 stopping itself (SIGSTOP) after step 27:
    --primus-hang-timeout finds it, the launcher tells its task wrapper to kill it, and the
    wrapper, after reporting the end, starts rank 2 again in its task; the others stay, and the
    run ends bitwise equal, every record once per epoch."""
    run = CnnJob(testbed, prefix, "cnn-rejoin-hang", dataset)
    run.submit(launch="--primus-recover=rejoin --primus-max-restarts=1 "
                      "--primus-hang-timeout=4 --primus-heartbeat-interval=1",
               env=f"HANG_AT=27 FAIL_RANK=2 FAIL_MARKER={run.dir}/hung AFTER_COMMIT=1")
    assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    assert (run.dir / "hung").exists()
    assert run.final() == reference.final()
    assert run.milestones() == ["launched", "dataset-checked", "hang", "rejoin", "resuming",
                                "rejoined", "rejoin-first-step", "finished"], run.events()
    rejoined = next(e for e in run.events() if e["event"] == "rejoined")
    assert (rejoined["rank"], rejoined["details"]["generation"]) == (2, "1"), rejoined
    logs = run.dir / f"primus-{run.job}" / "logs" / "alloc-0" / "attempt-0"
    assert (logs / "rank-2.gen-1.log").exists(), sorted(p.name for p in logs.iterdir())
    chain = run.exactly_once()
    assert {entry["run"] for step, entry in chain.items() if step > 20} == \
        {"cnn-rejoin-hang/-/0/1"}, chain


def test_a_node_standby_that_died_gives_way_to_a_replacement_started_afresh(
        testbed, prefix, dataset, reference):
    """--primus-recover=rejoin under srun, rank 5 killing its node's standby (SIGKILL) once it
    listens, then exiting 3 after step 27: its task wrapper finds no standby to ask, says so,
    and starts rank 5 afresh in its task; the run ends bitwise equal, every record once per
    epoch, in one attempt."""
    run = CnnJob(testbed, prefix, "cnn-standby-died", dataset)
    run.submit(launch="--primus-recover=rejoin --primus-max-restarts=1",
               env=f"FAIL_AT=27 FAIL_RANK=5 FAIL_MARKER={run.dir}/failed AFTER_COMMIT=1 "
                   "STANDBY=kill")
    assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    assert run.final() == reference.final()
    rejoined = next(e for e in run.events() if e["event"] == "rejoined")
    assert (rejoined["rank"], rejoined["details"]["replacement"]) == (5, "started"), rejoined
    assert {e["attempt"] for e in run.events()} == {0}, "one attempt: nobody was restarted"
    assert "rank 5: no standby listens on @primus-standby." in run.output(), run.output()[-3000:]
    run.exactly_once()


def test_a_rank_that_crashes_before_the_first_checkpoint_is_restarted_instead_of_replaced(
        testbed, prefix, dataset, reference):
    """--primus-recover=rejoin under srun, rank 3 failing after step 5, before any checkpoint:
    its task wrapper waits for a notice that does not come, the launcher says why there is no
    rejoin and ends the step (the waiting wrapper ends with it), and the restart begins again
    from the start, bitwise equal."""
    run = CnnJob(testbed, prefix, "cnn-no-rejoin", dataset)
    run.submit(launch="--primus-recover=rejoin --primus-max-restarts=1",
               env=f"FAIL_AT=5 FAIL_RANK=3 FAIL_MARKER={run.dir}/failed")
    assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    assert run.final() == reference.final()
    assert "no rejoin: no checkpoint was committed yet to go on from" in run.output()
    assert run.milestones() == ["launched", "dataset-checked", "rank-failed", "restarted",
                                "finished"], run.events()
    failed, restarted = (next(e for e in run.events() if e["event"] == name)
                         for name in ("rank-failed", "restarted"))
    assert (failed["rank"], failed["details"]["status"]) == (3, "exit status 3"), failed
    # The waiting wrapper ended with its step (tests/unit/launch_task_wrapper_test.cpp holds the
    # wait's end to the stop signal); the restart is the attempt after it.
    assert (failed["attempt"], restarted["attempt"]) == (0, 1), (failed, restarted)
    run.exactly_once()


def test_a_requeued_job_given_fewer_nodes_finishes_reading_every_record_once(
        testbed, prefix, dataset):
    """Preempted in step 14 (stopping after it: PRIMUS_STOP_INTERVAL=0), then, while pending,
    shrunk to 2 nodes and 4 ranks: the job
    resumes at 4 ranks from the 8-rank checkpoint and continues the same global order. Its bits
    differ from the 8-rank run's (the gradients of 8 shares are summed in another order than
    those of 4), so the check is the data: every record exactly once per epoch."""
    run = CnnJob(testbed, prefix, "cnn-fewer-nodes", dataset)
    run.submit(sbatch="-p low --requeue", env="PAUSE_AT=14 PRIMUS_STOP_INTERVAL=0")
    try:
        run.wait_step(14)
        preempt(testbed, run)
        testbed.root_cmd(["scontrol", "update", f"JobId={run.job}", "NumNodes=2",
                          "NumTasks=4"])
        start_again(testbed, run)
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(run.job)
    assert testbed.job(run.job).get("NumNodes") == "2", testbed.job(run.job)
    launched = [e["details"] for e in run.events() if e["event"] == "launched"]
    assert [d["ranks"] for d in launched] == ["8", "4"], launched
    chain = run.exactly_once()
    assert {len(chain[s]["ranks"]) for s in range(1, 15)} == {8}
    assert {len(chain[s]["ranks"]) for s in range(15, EPOCHS * STEPS_PER_EPOCH + 1)} == {4}
    assert not job_processes(run.job)
