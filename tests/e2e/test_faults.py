"""The fault campaign's fixed set on the testbed (docs/reliability.md; one machine's trials are
tests/faults/campaign.py): the CNN example under primus.train as a batch job of 4 nodes x 2
ranks under `exec primus-launch --primus-max-restarts=1 --primus-hang-timeout=20`, one fault at
an instant of its life, then the contract: the job ends COMPLETED with the uninterrupted run's
bits and every record once per epoch (after the requeue the fault calls for, started again at
once), never COMPLETED without finishing, never a second requeue or restart for the fault, no
process left on a node (Launch.wait_ended checks that).

Instants: `imports` (a second after primus-launch started the step: the ranks import torch),
`rendezvous` (70 % of the way to every rank's ready, as the reference run's ranks-ready event
measured it), `first-step`, `save` (a checkpoint started)."""

import os
import signal

import pytest

from cnn_jobs import CnnJob, dataset, reference  # noqa: F401 (fixtures)
from fault_trials import (LAUNCH, ended, events_of, flip_a_bit, launcher_pid, rank_pid,
                          requeued, requeued_once_and_finished, wait_instant)
from slurm_jobs import INIT, preempt, start_again

@pytest.mark.parametrize("instant", ["rendezvous", "save"])
def test_a_preemption_at_any_instant_is_requeued_once_and_ends_bitwise_equal(
        testbed, prefix, dataset, reference, instant):
    # Steps of 0.3 s: the job (48 steps) must still run when the preemption lands, a second or
    # so after the high job is submitted (seen in CI: without it, the job finished in the 1 s
    # after its first checkpoint started, before the preemption came, and was never requeued).
    run = CnnJob(testbed, prefix, f"fault-preempt-{instant}", dataset)
    run.submit(sbatch="-p low --requeue", launch=LAUNCH, env="STEP_SLEEP=0.3")
    try:
        wait_instant(testbed, run, instant)
        preempt(testbed, run)
        start_again(testbed, run)
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(run.job)
    assert testbed.job(run.job).get("Restarts") == "1", testbed.job(run.job)
    assert [e["event"] for e in run.events()].count("requeued") == 1, run.events()
    assert run.final() == reference.final()
    run.exactly_once()


def test_the_time_limits_warning_while_the_ranks_import_requeues_the_job(
        testbed, prefix, dataset, reference):
    """`--signal=B:USR2@T`'s signal (scancel --batch --signal) while the ranks import torch: a
    stop before they are ready, under the time-limit rule: requeued, then finished."""
    run = CnnJob(testbed, prefix, "fault-usr2-imports", dataset)
    run.submit(sbatch="--requeue", launch=LAUNCH)
    try:
        wait_instant(testbed, run, "imports")
        testbed.root_cmd(["scancel", "--batch", "--signal=USR2", run.job])
        requeued_once_and_finished(testbed, run, reference)
    finally:
        testbed.cancel(run.job)
    assert "time-limit" in run.milestones(), run.events()
    assert "stop came while the ranks were starting" in run.output(), run.output()[-3000:]


def test_a_rank_killed_after_its_first_step_restarts_once_and_ends_bitwise_equal(
        testbed, prefix, dataset, reference):
    run = CnnJob(testbed, prefix, "fault-sigkill-first-step", dataset)
    run.submit(launch=LAUNCH)
    try:
        wait_instant(testbed, run, "first-step")
        os.kill(rank_pid(run, 5), signal.SIGKILL)
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(run.job)
    assert run.final() == reference.final()
    run.exactly_once()
    names = run.milestones()
    assert names.count("restarted") == 1 and "rank-failed" in names, run.events()


def test_a_rank_stopped_in_the_rendezvous_is_named_and_the_job_fails_never_completes(
        testbed, prefix, dataset, reference):
    """SIGSTOP of rank 5 while the ranks start. The others wait for it in the rendezvous and
    make no progress either, but send heartbeats: the hang timeout names rank 5, which sends
    nothing. A hang excludes its node at once, and without a spare node the ranks cannot start
    again: the job fails with the hung rank's status (issue 39: it ended COMPLETED, exit 0,
    the refused restart's status)."""
    run = CnnJob(testbed, prefix, "fault-sigstop-rendezvous", dataset)
    run.submit(launch=LAUNCH)
    try:
        wait_instant(testbed, run, "rendezvous")
        testbed.wait_for(lambda: rank_pid(run, 5) is not None, 60, "rank 5's process")
        os.kill(rank_pid(run, 5), signal.SIGSTOP)
        assert run.wait_ended() == "FAILED", run.output()[-4000:]
    finally:
        testbed.cancel(run.job)
    assert run.exit_code() not in ("0:0", None), testbed.job(run.job)
    assert [e["rank"] for e in run.events() if e["event"] == "hang"] == [5], run.events()
    assert "restarted" not in run.milestones(), run.events()
    assert "rank 5 on n" in run.output() and "hung" in run.output(), run.output()[-3000:]
    assert not run.out.exists()


def test_primus_launch_stop_while_the_ranks_start_ends_completed_not_finished(
        testbed, prefix, dataset, reference):
    run = CnnJob(testbed, prefix, "fault-stop-imports", dataset)
    run.submit(sbatch="--requeue", launch=LAUNCH)
    try:
        wait_instant(testbed, run, "imports")
        module = f". {INIT}; module use {prefix}/share/modulefiles; module load primus; "
        testbed.user_cmd(["bash", "-c", module + f"primus-launch stop {run.job}"], cwd=run.dir)
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(run.job)
    assert testbed.job(run.job).get("Restarts") == "0"
    assert not run.out.exists(), "the job trained to the end?"
    assert "stop came while the ranks were starting" in run.output(), run.output()[-3000:]
    names = run.milestones()
    assert "finished" in names and "requeued" not in names, run.events()


def test_a_bit_flipped_in_the_newest_checkpoint_is_skipped_on_every_rank(
        testbed, prefix, dataset, reference):
    """Preempted after step 11 (saved), and while the job waits, one bit of rank 1's file of
    step 11 is flipped in place: the next allocation resumes from step 10, never from 11."""
    run = CnnJob(testbed, prefix, "fault-flip", dataset)
    run.submit(sbatch="-p low --requeue", launch=LAUNCH,
               env="PAUSE_AT=11 PRIMUS_STOP_INTERVAL=0")
    try:
        run.wait_step(11)
        preempt(testbed, run)
        newest = run.dir / f"primus-{run.job}" / "ckpt" / "step-000000000011" / "rank-00001.h5"
        assert newest.exists(), run.output()[-3000:]
        flip_a_bit(newest)
        start_again(testbed, run)
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(run.job)
    assert [e["details"]["step"] for e in run.events() if e["event"] == "resuming"] == ["10"]
    assert "not resuming from" in run.output() and "step-000000000011" in run.output()
    assert run.final() == reference.final()
    run.exactly_once()


def test_scancel_signal_to_the_steps_mid_training_requeues_the_job_and_ends_bitwise_equal(
        testbed, prefix, dataset, reference):
    """`scancel --signal=USR2 JOB` signals the job's steps, not the batch shell: the ranks get
    the signal and primus-launch hears of it only from them (their heartbeats say which signal
    they caught). A stop under the time-limit rule: they save, the job is requeued once, and
    ends bitwise equal."""
    run = CnnJob(testbed, prefix, "fault-scancel-signal-mid", dataset)
    run.submit(sbatch="--requeue", launch=LAUNCH, env="STEP_SLEEP=0.3")
    try:
        run.wait_step(14)
        testbed.root_cmd(["scancel", "--signal=USR2", run.job])
        requeued_once_and_finished(testbed, run, reference)
    finally:
        testbed.cancel(run.job)
    assert "time-limit" in run.milestones(), run.events()


def test_a_rank_sent_sigterm_mid_training_stops_the_job_and_it_ends_bitwise_equal(
        testbed, prefix, dataset, reference):
    """SIGTERM to rank 5 alone (by hand, or a node's agent): the rank asks for a stop at the next
    agreement, every rank saves, and the job goes on from that checkpoint (requeued once, or
    restarted once in the allocation) to the uninterrupted run's bits."""
    run = CnnJob(testbed, prefix, "fault-sigterm-rank-mid", dataset)
    run.submit(sbatch="--requeue", launch=LAUNCH, env="STEP_SLEEP=0.3")
    try:
        run.wait_step(14)
        os.kill(rank_pid(run, 5), signal.SIGTERM)
        testbed.wait_for(lambda: requeued(testbed, run) or ended(testbed, run), 120,
                         lambda: f"job {run.job} to be requeued or end: {testbed.job(run.job)}")
        if requeued(testbed, run):
            start_again(testbed, run)
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(run.job)
    names = run.milestones()
    assert names.count("requeued") + names.count("restarted") <= 1, run.events()
    assert run.final() == reference.final()
    run.exactly_once()


def test_primus_launch_killed_fails_the_job_leaves_nothing_and_the_same_script_resumes(
        testbed, prefix, dataset, reference):
    """SIGKILL of primus-launch mid-training: nothing can save, so the job ends FAILED (never
    COMPLETED) with no process left on any node (wait_ended checks), and the same script
    submitted again resumes from the newest checkpoint and ends bitwise equal."""
    run = CnnJob(testbed, prefix, "fault-sigkill-launcher-mid", dataset)
    launch = f"{LAUNCH} --primus-job-dir={run.dir}/primus-kept"
    run.primus_id = "kept"
    run.submit(launch=launch, env="STEP_SLEEP=0.3")
    try:
        run.wait_step(14)
        testbed.wait_for(lambda: any(e["event"] == "checkpoint-committed"
                                     for e in events_of(run)), 60, "a committed checkpoint")
        os.kill(launcher_pid(run), signal.SIGKILL)
        assert run.wait_ended() == "FAILED", run.output()[-4000:]
        first = run.job
        run.submit(launch=launch, env=f"TRACE_RUN={run.name}-again")  # another run, traced
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(run.job)
    assert run.job != first
    resumed = [e["details"]["step"] for e in run.events() if e["event"] == "resuming"]
    assert resumed and int(resumed[-1]) >= 10, run.events()
    assert run.final() == reference.final()
    run.exactly_once()
