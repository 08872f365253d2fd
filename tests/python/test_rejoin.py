"""--primus-recover=rejoin under primus-launch --nproc, with the CNN example (primus.train), real
PyTorch and real processes: a rank that fails mid-run is replaced while the others stay alive,
and the run ends bitwise equal to an uninterrupted one, every record read exactly once per
epoch relative to the final model; where no checkpoint exists yet, the restart is made
instead (docs/architecture.md, "Recovery without a restart")."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import train_oracle
from job_env import job_environment

torch = pytest.importorskip("torch", reason="torch is not installed for this Python")

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parents[1] / "examples" / "cnn"
HARNESS = HERE / "train_cnn.py"
LAUNCHER = os.environ.get("PRIMUS_LAUNCH", os.path.abspath("primus-launch"))
RECORDS, GLOBAL_BATCH, EPOCHS, NPROC = 512, 64, 3, 4
STEPS_PER_EPOCH = RECORDS // GLOBAL_BATCH


@pytest.fixture(scope="module")
def cnn_data(tmp_path_factory):
    where = tmp_path_factory.mktemp("cnn-data")
    result = subprocess.run([sys.executable, str(EXAMPLE / "make_data.py"), str(where),
                             "--records", str(RECORDS), "--files", "3"],
                            capture_output=True, text=True, timeout=120, env=job_environment())
    assert result.returncode == 0, result.stderr
    return where


@pytest.fixture(scope="module")
def reference(tmp_path_factory, cnn_data):
    """The uninterrupted run's final state."""
    whole = tmp_path_factory.mktemp("whole")
    result = launch(whole, cnn_data, "whole")
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((whole / "final.json").read_text())


def launch(workdir, data, run, *options, **extra):
    if not os.access(LAUNCHER, os.X_OK):
        pytest.fail(f"{LAUNCHER} is not built (run from the build directory)")
    env = job_environment(PRIMUS_DATA=f"{data}/*.tfrecord", EPOCHS=EPOCHS,
                          OUT=workdir / "final.json", TRACE=workdir / "trace", TRACE_RUN=run,
                          PRIMUS_STOP_INTERVAL=0, **extra)
    (workdir / "trace").mkdir(parents=True, exist_ok=True)
    return subprocess.run([LAUNCHER, "--nproc", str(NPROC), *options, "--", sys.executable,
                           str(HARNESS)], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=300)


def events_of(workdir):
    return [json.loads(line) for line in
            (workdir / "primus-local" / "events.jsonl").read_text().splitlines()]


def test_a_failed_rank_is_replaced_while_the_others_stay_and_the_run_ends_bitwise_equal(
        tmp_path, cnn_data, reference):
    """Rank 2 of 4 exits 3 after step 13 (checkpoints every 10), once primus-launch's standby
    exists: ranks 0, 1 and 3 stay alive, the standby becomes rank 2, and every rank goes on from
    step 10 in generation 1 of the same attempt."""
    result = launch(tmp_path, cnn_data, "r", "--primus-recover=rejoin", "--primus-max-restarts=1",
                    FAIL_AT=13, FAIL_RANK=2, FAIL_MARKER=tmp_path / "failed", STANDBY="wait",
                    AFTER_COMMIT=1)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "failed").exists()
    assert json.loads((tmp_path / "final.json").read_text()) == reference
    events = events_of(tmp_path)
    kinds = [e["event"] for e in events]
    assert "restarted" not in kinds and "rejoin-failed" not in kinds, kinds
    rejoin = next(e for e in events if e["event"] == "rejoin")
    rejoined = next(e for e in events if e["event"] == "rejoined")
    assert rejoin["rank"] == 2 and rejoined["rank"] == 2, (rejoin, rejoined)
    assert rejoined["details"]["generation"] == "1", rejoined
    assert rejoined["details"]["replacement"] == "standby", rejoined
    assert float(rejoined["details"]["seconds"]) > 0, rejoined
    # Every survivor's copy of step 10 in memory verified (ranks 1 and 3 took the BatchNorm
    # statistics, which only rank 0's matches, from rank 0); rank 0 sent the new rank 2 its copy.
    assert rejoined["details"]["restore_sources"] == "memory 3, peer 1", rejoined
    assert 0 < float(rejoined["details"]["restore_seconds"]) < float(
        rejoined["details"]["seconds"]), rejoined
    first = [e for e in events if e["event"] == "rejoin-first-step"]
    assert len(first) == 1 and first[0]["details"]["generation"] == "1", first
    assert float(first[0]["details"]["after_failure_seconds"]) >= \
        float(rejoined["details"]["seconds"]) + float(first[0]["details"]["after_rejoin_seconds"]) \
        - 0.002, (rejoined, first)
    assert {e["attempt"] for e in events} == {0}, "one attempt: nobody was restarted"
    # status.json keeps the rejoin with the phases of its events.
    recovery = json.loads((tmp_path / "primus-local" / "status.json").read_text())["recovery"]
    assert (recovery["path"], recovery["state"], recovery["phase"], recovery["rank"],
            recovery["generation"], recovery["replacement"]) == (
                "rejoin", "done", "", 2, 1, "standby"), recovery
    for field, event, detail in (("rejoin_seconds", rejoined, "seconds"),
                                 ("regroup_seconds", rejoined, "regroup_seconds"),
                                 ("recovery_seconds", first[0], "after_failure_seconds")):
        assert abs(recovery[field] - float(event["details"][detail])) < 0.0015, (recovery, event)
    assert recovery["failure_time"] > 1.7e9, recovery
    logs = tmp_path / "primus-local" / "logs" / "alloc-0" / "attempt-0"
    # No second standby: the one rejoin --primus-max-restarts=1 allows is spent.
    assert sorted(p.name for p in logs.iterdir()) == [
        "rank-0.log", "rank-1.log", "rank-2.gen-1.log", "rank-2.log", "rank-3.log",
        "standby-1.log"]
    assert "finished at step" in (logs / "rank-2.gen-1.log").read_text()
    # Each survivor's one process trained through both generations: it says finished once.
    for rank in (0, 1, 3):
        text = (logs / f"rank-{rank}.log").read_text()
        assert text.count(f"rank {rank}: finished at step {EPOCHS * STEPS_PER_EPOCH}") == 1, text
    chain = train_oracle.check_exactly_once(train_oracle.read_trace(tmp_path / "trace"), RECORDS,
                                            EPOCHS, STEPS_PER_EPOCH)
    assert {step: entry["run"] for step, entry in chain.items()} == {
        **{s: "r/-/0" for s in range(1, 11)},
        **{s: "r/-/0/1" for s in range(11, EPOCHS * STEPS_PER_EPOCH + 1)}}


def test_a_copy_in_memory_with_a_flipped_bit_gives_way_to_the_next_one(tmp_path, cnn_data,
                                                                          reference):
    """Every tensor of rank 0's copy of the committed step in memory has a bit flipped: each
    fails its CRC-32C, rank 0 says so, rank 1's copy is sent to the ranks that lack one instead
    (but for the BatchNorm statistics, whose saved values are rank 0's alone: those come from
    the file), and the run ends bitwise equal."""
    result = launch(tmp_path, cnn_data, "f", "--primus-recover=rejoin", "--primus-max-restarts=1",
                    FAIL_AT=13, FAIL_RANK=2, FAIL_MARKER=tmp_path / "failed", AFTER_COMMIT=1,
                    FLIP_COPY="0")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((tmp_path / "final.json").read_text()) == reference
    rejoined = next(e for e in events_of(tmp_path) if e["event"] == "rejoined")
    # Rank 1 sent ranks 0 and 2 what they lacked; rank 3's own copy verified.
    assert rejoined["details"]["restore_sources"] == "memory 2, peer 2", rejoined
    log = (tmp_path / "primus-local" / "logs" / "alloc-0" / "attempt-0" / "rank-0.log").read_text()
    assert "rank 0's copy in memory of step" in log and "does not verify" in log, log[-3000:]
    train_oracle.check_exactly_once(train_oracle.read_trace(tmp_path / "trace"), RECORDS, EPOCHS,
                                    STEPS_PER_EPOCH)


def test_when_no_copy_in_memory_verifies_every_rank_reads_the_file(tmp_path, cnn_data,
                                                                     reference):
    """Every survivor's copy has a bit flipped: each is skipped in turn, every rank restores from
    the checkpoint's files, and the run still ends bitwise equal."""
    result = launch(tmp_path, cnn_data, "g", "--primus-recover=rejoin", "--primus-max-restarts=1",
                    FAIL_AT=13, FAIL_RANK=2, FAIL_MARKER=tmp_path / "failed", AFTER_COMMIT=1,
                    FLIP_COPY="0,1,3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((tmp_path / "final.json").read_text()) == reference
    rejoined = next(e for e in events_of(tmp_path) if e["event"] == "rejoined")
    assert rejoined["details"]["restore_sources"] == "file 4", rejoined
    train_oracle.check_exactly_once(train_oracle.read_trace(tmp_path / "trace"), RECORDS, EPOCHS,
                                    STEPS_PER_EPOCH)


def test_a_standby_that_died_gives_way_to_a_replacement_started_afresh(tmp_path, cnn_data,
                                                                        reference):
    """The standby is killed just before rank 1 fails: primus-launch says so and starts the
    replacement afresh, and the run still ends bitwise equal, every record once per epoch."""
    result = launch(tmp_path, cnn_data, "k", "--primus-recover=rejoin", "--primus-max-restarts=1",
                    FAIL_AT=13, FAIL_RANK=1, FAIL_MARKER=tmp_path / "failed", STANDBY="kill",
                    AFTER_COMMIT=1)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "failed").exists()
    assert json.loads((tmp_path / "final.json").read_text()) == reference
    events = events_of(tmp_path)
    rejoined = next(e for e in events if e["event"] == "rejoined")
    assert rejoined["details"]["replacement"] == "started", rejoined
    assert "standby" in result.stderr and "ended before it was needed" in result.stderr, \
        result.stderr[-3000:]
    train_oracle.check_exactly_once(train_oracle.read_trace(tmp_path / "trace"), RECORDS, EPOCHS,
                                    STEPS_PER_EPOCH)


def test_a_failure_before_the_first_checkpoint_is_restarted_instead(tmp_path, cnn_data,
                                                                     reference):
    """Rank 1 fails after step 5, before any checkpoint: nothing to rejoin from, so primus-launch
    says why and restarts every rank, and the run still ends bitwise equal."""
    result = launch(tmp_path, cnn_data, "s", "--primus-recover=rejoin", "--primus-max-restarts=1",
                    FAIL_AT=5, FAIL_RANK=1, FAIL_MARKER=tmp_path / "failed")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "no rejoin: no checkpoint was committed yet to go on from" in result.stderr
    assert json.loads((tmp_path / "final.json").read_text()) == reference
    kinds = [e["event"] for e in events_of(tmp_path)]
    assert "rejoin" not in kinds and "restarted" in kinds, kinds
    train_oracle.check_exactly_once(train_oracle.read_trace(tmp_path / "trace"), RECORDS, EPOCHS,
                                    STEPS_PER_EPOCH)


def test_a_hung_rank_is_killed_and_replaced_while_the_others_stay(tmp_path, cnn_data, reference):
    """Rank 1 stops itself (SIGSTOP) after step 13: --primus-hang-timeout finds it, primus-launch
    kills it alone, and the others go on with a new rank 1, bitwise as before; with
    --primus-no-standby that rank is started afresh and no standby is ever started, and with
    --primus-rejoin-memory=0 no step is kept in memory: every rank reads the file."""
    result = launch(tmp_path, cnn_data, "h", "--primus-recover=rejoin", "--primus-max-restarts=1",
                    "--primus-hang-timeout=4", "--primus-heartbeat-interval=1",
                    "--primus-no-standby", "--primus-rejoin-memory=0",
                    HANG_AT=13, FAIL_RANK=1, FAIL_MARKER=tmp_path / "hung", AFTER_COMMIT=1)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "hung").exists()
    assert json.loads((tmp_path / "final.json").read_text()) == reference
    events = events_of(tmp_path)
    kinds = [e["event"] for e in events]
    assert "hang" in kinds and "rejoined" in kinds, kinds
    rejoined = next(e for e in events if e["event"] == "rejoined")
    assert rejoined["details"]["replacement"] == "started", rejoined
    assert rejoined["details"]["restore_sources"] == "file 4", rejoined
    logs = tmp_path / "primus-local" / "logs" / "alloc-0" / "attempt-0"
    assert not list(logs.glob("standby-*.log")), sorted(p.name for p in logs.iterdir())
    assert "restarted" not in kinds and "rejoin-failed" not in kinds, kinds
    train_oracle.check_exactly_once(train_oracle.read_trace(tmp_path / "trace"), RECORDS, EPOCHS,
                                    STEPS_PER_EPOCH)
