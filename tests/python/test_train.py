"""primus.train and the CNN example, with real PyTorch and real processes: a map-style dataset's
global order and split, the TFRecord writer, training in a world of one and under
primus-launch --nproc, an exact resume after stops (one while a checkpoint is being written),
every record exactly once per epoch relative to the final model, workers=N, and bad arguments."""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import train_oracle
from job_env import job_environment

torch = pytest.importorskip("torch", reason="torch is not installed for this Python")

import primus.data  # noqa: E402

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parents[1] / "examples" / "cnn"
HARNESS = HERE / "train_cnn.py"
LAUNCHER = os.environ.get("PRIMUS_LAUNCH", os.path.abspath("primus-launch"))
RECORDS, GLOBAL_BATCH, EPOCHS = 512, 64, 3
STEPS_PER_EPOCH = RECORDS // GLOBAL_BATCH


environment = job_environment


def python(code, cwd, **extra):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300, cwd=cwd, env=environment(**extra))


def needs_launcher():
    if not os.access(LAUNCHER, os.X_OK):
        pytest.fail(f"{LAUNCHER} is not built (run from the build directory)")


@pytest.fixture(scope="module")
def cnn_data(tmp_path_factory):
    where = tmp_path_factory.mktemp("cnn-data")
    result = subprocess.run([sys.executable, str(EXAMPLE / "make_data.py"), str(where),
                             "--records", str(RECORDS), "--files", "3"],
                            capture_output=True, text=True, timeout=120, env=environment())
    assert result.returncode == 0, result.stderr
    return where


def launch(workdir, data, run, nproc=2, **extra):
    # should_stop() agrees at every step (PRIMUS_STOP_INTERVAL=0): the tests name the step a
    # stop lands on, and these runs are too short for an agreement every half second.
    env = environment(PRIMUS_DATA=f"{data}/*.tfrecord", EPOCHS=EPOCHS, OUT=workdir / "final.json",
                      TRACE=workdir / "trace", TRACE_RUN=run, PRIMUS_STOP_INTERVAL=0, **extra)
    (workdir / "trace").mkdir(parents=True, exist_ok=True)
    return subprocess.run([LAUNCHER, "--nproc", str(nproc), "--", sys.executable, str(HARNESS)],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=300)


def test_a_map_style_dataset_gets_the_global_order_split_and_cursor_at_any_world_size(
        monkeypatch):
    samples = [(torch.tensor([float(i)]), torch.tensor(i % 3)) for i in range(50)]

    def epoch_ids(world, epoch_count=2, start=None):
        got = []
        cursor = None
        for rank in range(world):
            monkeypatch.setenv("RANK", str(rank))
            monkeypatch.setenv("WORLD_SIZE", str(world))
            ds = primus.data.Dataset(samples, global_batch_size=8, seed=3)
            if start is not None:
                ds.load_state_dict(start)
            shares = []
            for epoch in ds.epochs(epoch_count):
                shares.append([[int(x) for x, _ in batch] for batch in epoch])
            got.append(shares)
            cursor = ds.state_dict()
        # global batch k of epoch e: the ranks' shares in rank order
        return [[sum((got[r][e][k] for r in range(world)), []) for k in range(len(got[0][e]))]
                for e in range(len(got[0]))], cursor

    one, _ = epoch_ids(1)
    assert [len(b) for b in one[0]] == [8] * 6 + [2]  # drop_last is off by default here
    for epoch in one:
        assert sorted(sum(epoch, [])) == list(range(50))
    assert one[0] != one[1], "every epoch has its own order"
    for world in (2, 3):
        assert epoch_ids(world)[0] == one, f"world size {world}"
    # A cursor taken after the first epoch continues with the same second epoch at 3 ranks.
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    ds = primus.data.Dataset(samples, global_batch_size=8, seed=3)
    for epoch in ds.epochs(1):
        for _ in epoch:
            pass
    rest, _ = epoch_ids(3, start=ds.state_dict())
    assert rest == one[1:]
    with pytest.raises(ValueError, match="fingerprint|dataset"):
        primus.data.Dataset(samples[:40], global_batch_size=8, seed=3).load_state_dict(
            ds.state_dict())
    with pytest.raises(ValueError, match="static split only"):
        primus.data.Dataset(samples, global_batch_size=8, mode="dynamic")


def test_write_tfrecord_writes_frames_primus_data_reads_and_nothing_on_a_bad_record(tmp_path):
    path = tmp_path / "a.tfrecord"
    assert primus.data.write_tfrecord(path, [b"one", b"", b"three" * 100]) == 3
    ds = primus.data.Dataset(str(path), global_batch_size=3, shuffle="none")
    assert [list(batch) for batch in next(ds.epochs(1))] == [[b"one", b"", b"three" * 100]]
    with pytest.raises(TypeError, match="record 1: expected bytes, got str"):
        primus.data.write_tfrecord(tmp_path / "b.tfrecord", [b"x", "y"])
    assert not list(tmp_path.glob("b.tfrecord*"))


SEPARABLE = """
    import torch, primus
    torch.manual_seed(0)
    points = torch.randn(256, 2)
    data = [(p, torch.tensor(int(p[0] + p[1] > 0))) for p in points]
    model = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    result = primus.train(model, data, epochs=EPOCHS, global_batch_size=32, checkpoint_every=5,
                          optimizer=lambda p: torch.optim.Adam(p, lr=0.02), log_every=2)
    with torch.no_grad():
        accuracy = (model(points).argmax(1) == torch.tensor([y for _, y in data])).float().mean()
    print(result.steps, result.epochs, result.resumed_from, f"{float(accuracy):.2f}",
          result.checkpoint.rsplit("/", 1)[-1], result.final_loss)
"""


def test_train_in_a_world_of_one_learns_checkpoints_and_a_second_run_resumes_at_the_end(
        tmp_path):
    first = python(SEPARABLE.replace("EPOCHS", "6"), tmp_path)
    assert first.returncode == 0, first.stderr
    steps, epochs, resumed, accuracy, last, loss = first.stdout.split()
    assert (steps, epochs, resumed, last) == ("48", "6", "None", "step-000000000048")
    assert float(accuracy) >= 0.9, first.stdout
    ckpts = sorted(p.name for p in (tmp_path / "primus-local" / "ckpt").glob("step-*"))
    assert ckpts == ["step-000000000040", "step-000000000045", "step-000000000048"]
    metrics = [json.loads(line) for line in
               (tmp_path / "primus-local" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(2, 49, 2))
    assert all(set(m["values"]) == {"loss", "samples_per_second"} for m in metrics)
    # Rank 0 says where it is at every epoch's end (issue 41: it said nothing until the end).
    lines = [line for line in first.stderr.splitlines() if line.startswith("primus.train: epoch")]
    assert [line.split(",")[0] for line in lines] == [
        f"primus.train: epoch {e}/6: step {8 * e}/48" for e in range(1, 7)], first.stderr
    assert all(re.search(r", loss \d+\.\d{4}, [\d,]+ samples/s, (\d+m)?\d+s left$", line)
               for line in lines), lines
    assert lines[-1].endswith(" 0s left"), lines
    again = python(SEPARABLE.replace("EPOCHS", "6"), tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split()[:3] == ["48", "6", "48"], again.stdout
    # Resumed at the end, no step ran: the final loss is the one the last checkpoint recorded
    # (issue 39: it was None, and the CNN example's print of it failed the rerun of a finished
    # job, or of one stopped at its last step, in every attempt).
    assert again.stdout.split()[5] == loss != "None", (first.stdout, again.stdout)
    # More epochs later: the same job continues from its last checkpoint.
    more = python(SEPARABLE.replace("EPOCHS", "7"), tmp_path)
    assert more.returncode == 0, more.stderr
    assert more.stdout.split()[:3] == ["56", "7", "48"], more.stdout
    assert "primus.train: epoch 7/7: step 56/56, loss " in more.stderr, more.stderr
    assert "primus.train: epoch" not in again.stderr, again.stderr


def test_a_checkpoint_of_another_model_or_dataset_is_refused_before_training(tmp_path):
    first = python(SEPARABLE.replace("EPOCHS", "1"), tmp_path)
    assert first.returncode == 0, first.stderr
    ckpt = tmp_path / "primus-local" / "ckpt"
    before = sorted(p.name for p in ckpt.iterdir())
    other = SEPARABLE.replace("EPOCHS", "2").replace("Linear(2, 16), torch.nn.ReLU(), "
                                                     "torch.nn.Linear(16, 2)",
                                                     "Linear(2, 8), torch.nn.ReLU(), "
                                                     "torch.nn.Linear(8, 2)")
    refused = python(other, tmp_path)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    message = refused.stderr[refused.stderr.index("primus.train: cannot resume"):]
    assert message.startswith(f"primus.train: cannot resume from {ckpt}/step-000000000008: it "
                              "was saved by another job\n  model: 0.bias is [16] there, [8] "
                              "here; 0.weight is [16, 2] there, [8, 2] here; 2.weight is "
                              "[2, 16] there, [2, 8] here\n"), message
    assert "  it was saved by: -c\n" in message, message
    assert "Start afresh with --primus-fresh" in message and "--primus-job-dir" in message
    assert "Missing key" not in refused.stderr and "size mismatch" not in refused.stderr
    assert sorted(p.name for p in ckpt.iterdir()) == before  # nothing written
    # Another dataset, and another optimizer: named as such.
    data = SEPARABLE.replace("EPOCHS", "2").replace("randn(256, 2)", "randn(320, 2)").replace(
        "torch.optim.Adam(p, lr=0.02)", "torch.optim.SGD(p, lr=0.02)")
    refused = python(data, tmp_path)
    assert refused.returncode == 1
    assert "  optimizer: Adam there, SGD here\n" in refused.stderr, refused.stderr
    assert "  data: another dataset (its files, their sizes or record counts: 256 records " \
           "there, 320 here)\n" in refused.stderr, refused.stderr
    assert sorted(p.name for p in ckpt.iterdir()) == before


def test_epochs_0_trains_and_commits_nothing(tmp_path):
    code = SEPARABLE.replace("EPOCHS", "0").replace(
        'result.checkpoint.rsplit("/", 1)[-1]', "result.checkpoint")
    done = python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:3] == ["0", "0", "None"], done.stdout
    assert done.stdout.split()[4:] == ["None", "None"], done.stdout
    assert not list((tmp_path / "primus-local").glob("ckpt/step-*"))
    # So a later run starts from step 0, not from a checkpoint of an untrained model.
    later = python(SEPARABLE.replace("EPOCHS", "1"), tmp_path)
    assert later.returncode == 0, later.stderr
    assert later.stdout.split()[:3] == ["8", "1", "None"], later.stdout


def test_a_stop_saves_and_exits_75_or_returns_with_exit_on_stop_false(tmp_path):
    code = """
        import os, signal, sys, torch, primus
        data = [(torch.randn(3), torch.tensor(i % 2)) for i in range(64)]
        model = torch.nn.Linear(3, 2)
        def stop(info):
            if info.step == 3:
                os.kill(os.getpid(), signal.SIGTERM)
        result = primus.train(model, data, epochs=2, global_batch_size=8, on_step=stop,
                              exit_on_stop=EXIT)
        print("returned", result.stopped, result.steps, result.checkpoint.rsplit("/", 1)[-1])
    """
    (tmp_path / "a").mkdir()
    stopped = python(code.replace("EXIT", "False"), tmp_path / "a")
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.split() == ["returned", "True", "3", "step-000000000003"]
    (tmp_path / "b").mkdir()
    exits = python(code.replace("EXIT", "True"), tmp_path / "b")
    assert exits.returncode == 75, exits.stdout + exits.stderr
    assert "returned" not in exits.stdout
    assert "primus.train: stopped at step 3" in exits.stderr
    assert (tmp_path / "b" / "primus-local" / "ckpt" / "step-000000000003").is_dir()


@pytest.mark.parametrize("call, message", [
    ("primus.train(model, data, epochs=-1)", "primus.train: epochs: expected an integer >= 0"),
    ("primus.train(model, 42, epochs=1)",
     "dataset: expected a primus.data.Dataset or a map-style dataset"),
    ("primus.train(model, [torch.randn(3)] * 8, epochs=1, global_batch_size=4)",
     "every sample must be (input, target); got Tensor"),
    ("primus.train(model, data, epochs=1, global_batch_size=2, workers=3)",
     "workers=3, but this job has 2 ranks"),
    ("primus.train(model, data, epochs=1, global_batch_size=1)",
     "global batch size 1 is below the number of ranks (2)"),
    ("primus.train(model, data, epochs=1, scheduler_interval='batch')",
     "scheduler_interval: expected 'step' or 'epoch'"),
    ("primus.train('model', data, epochs=1)", "model: expected a torch.nn.Module, got str"),
])
def test_bad_arguments_are_errors_that_name_them(tmp_path, call, message):
    needs_launcher()
    script = tmp_path / "bad.py"
    script.write_text("import torch, primus\n"
                      "model = torch.nn.Linear(3, 2)\n"
                      "data = [(torch.randn(3), torch.tensor(1))] * 16\n"
                      f"{call}\n")
    result = subprocess.run([LAUNCHER, "--nproc", "2", "--", sys.executable, str(script)],
                            cwd=tmp_path, env=environment(), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode != 0
    # primus-launch names the rank that failed first and shows its last lines; the other rank
    # may have been stopped before it got as far (the launcher ends the attempt at once).
    assert "failed first" in result.stderr and message in result.stderr, result.stderr
    logs = list((tmp_path / "primus-local" / "logs").rglob("rank-*.log"))
    assert any(message in log.read_text() for log in logs), result.stderr
    assert not (tmp_path / "primus-local" / "ckpt").exists() or not list(
        (tmp_path / "primus-local" / "ckpt").glob("step-*"))


def test_a_global_batch_size_other_than_the_datasets_is_refused(tmp_path, cnn_data):
    result = python(f"""
        import torch, primus, primus.data
        ds = primus.data.Dataset("{cnn_data}/*.tfrecord", global_batch_size=64)
        primus.train(torch.nn.Linear(3, 2), ds, epochs=1, global_batch_size=32)
    """, tmp_path)
    assert result.returncode != 0
    assert "global_batch_size=32, but the dataset's is 64" in result.stderr, result.stderr


def test_workers_in_a_plain_script_runs_it_again_as_that_many_ranks(tmp_path):
    needs_launcher()
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import torch, primus
        data = [(torch.randn(3), torch.tensor(i % 2)) for i in range(32)]
        result = primus.train(torch.nn.Linear(3, 2), data, epochs=1, workers=2,
                              global_batch_size=8)
        job = primus.init()
        print(f"rank {job.rank} of {job.world_size}: {result.steps} steps", flush=True)
    """))
    env = environment(PRIMUS_LAUNCH=LAUNCHER)
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "running the script again as 2 ranks" in result.stderr
    logs = sorted((tmp_path / "primus-local" / "logs").rglob("rank-*.log"))
    assert [log.read_text().strip().splitlines()[-1] for log in logs] == \
        ["rank 0 of 2: 4 steps", "rank 1 of 2: 4 steps"]


def test_a_jobs_defaults_are_the_same_under_primus_launch_as_in_a_plain_script(tmp_path):
    """Issue 39: the rank environment exported every option's default (PRIMUS_DROP_LAST=0),
    which primus.data counted as chosen; primus.train then kept drop_last off under
    primus-launch and turned it on in a plain script, and a cursor saved one way was refused
    the other. Now only a chosen setting is in the environment."""
    needs_launcher()
    script = tmp_path / "probe.py"
    script.write_text(textwrap.dedent("""
        import os, torch, primus.data
        samples = [(torch.tensor([float(i)]), torch.tensor(0)) for i in range(8)]
        ds = primus.data.Dataset(samples, global_batch_size=4)
        chosen = sorted(k for k in os.environ if k in ("PRIMUS_DROP_LAST", "PRIMUS_SEED",
                                                       "PRIMUS_SHUFFLE", "PRIMUS_MAX_RESTARTS"))
        print("probe", ds.drop_last_chosen, ",".join(chosen) or "-", flush=True)
    """))
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=environment(),
                           capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    launched = subprocess.run([LAUNCHER, "--nproc", "1", "--", sys.executable, str(script)],
                              cwd=tmp_path, env=environment(), capture_output=True, text=True,
                              timeout=120)
    assert launched.returncode == 0, launched.stderr
    assert "probe False -" in plain.stdout, plain.stdout
    assert "probe False -" in launched.stdout, launched.stdout + launched.stderr
    # A setting the user chose is there, and counts as chosen.
    chosen = subprocess.run([LAUNCHER, "--nproc", "1", "--primus-max-restarts=1", "--",
                             sys.executable, str(script)], cwd=tmp_path,
                            env=environment(PRIMUS_DROP_LAST="1"), capture_output=True, text=True,
                            timeout=120)
    assert chosen.returncode == 0, chosen.stderr
    assert "probe True PRIMUS_DROP_LAST,PRIMUS_MAX_RESTARTS" in chosen.stdout, chosen.stdout


def test_the_cnn_example_stopped_twice_ends_bitwise_equal_and_reads_every_record_once(
        tmp_path, cnn_data):
    """Uninterrupted against: a stop signal in step 13 (checkpoints every 10), which stops the
    ranks after step 13, then one in step 21, which stops them after step 21 while the step-20
    checkpoint is still being written (slow writes), then the rest."""
    needs_launcher()
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    first = launch(whole, cnn_data, "whole")
    assert first.returncode == 0, first.stderr[-3000:]
    reference = json.loads((whole / "final.json").read_text())
    assert any(k.endswith("running_mean") for k in reference) and \
        any(k.endswith("exp_avg_sq") for k in reference)
    train_oracle.check_exactly_once(train_oracle.read_trace(whole / "trace"), RECORDS, EPOCHS,
                                    STEPS_PER_EPOCH)

    one = launch(stopped, cnn_data, "a", STOP_AT=13)
    assert one.returncode == 75, one.stderr[-3000:]
    two = launch(stopped, cnn_data, "b", STOP_AT=21, SLOW_WRITE=1, STEP_SLEEP=0.05,
                 CKPT_EVENTS=stopped / "ckpt-events")
    assert two.returncode == 75, two.stderr[-3000:]
    # The signal in step 13 is agreed on at that step's should_stop(): the stop saves 13.
    assert "resumed at step 13" in two.stdout + two.stderr
    events = [json.loads(line) for line in
              (stopped / "primus-local" / "events.jsonl").read_text().splitlines()]
    second = [(e["event"], e["details"]["step"]) for e in events
              if e["allocation"] == 1 and e["event"].startswith("checkpoint-")]
    # The stop at 21 came while step 20 was being written: 20 commits, then 21 is saved.
    assert second == [("checkpoint-started", "20"), ("checkpoint-committed", "20"),
                      ("checkpoint-started", "21"), ("checkpoint-committed", "21")], second
    assert not (stopped / "final.json").exists()
    three = launch(stopped, cnn_data, "c")
    assert three.returncode == 0, three.stderr[-3000:]
    assert "resumed at step 21" in three.stdout + three.stderr
    assert json.loads((stopped / "final.json").read_text()) == reference
    chain = train_oracle.check_exactly_once(train_oracle.read_trace(stopped / "trace"), RECORDS,
                                            EPOCHS, STEPS_PER_EPOCH)
    # The final model descends from a's steps 1-13, b's 14-21 and c's from 22 on.
    assert {step: entry["run"].split("/")[0] for step, entry in chain.items()} == {
        **{s: "a" for s in range(1, 14)}, **{s: "b" for s in range(14, 22)},
        **{s: "c" for s in range(22, EPOCHS * STEPS_PER_EPOCH + 1)}}


def test_the_oracle_catches_a_record_read_twice_and_a_step_taken_from_a_dead_run():
    def entry(run, t, resume, step, ids, rank=0):
        return {"run": run, "time": t, "resume": resume, "rank": rank, "step": step,
                "epoch": (step - 1) // 2, "ids": ids}

    good = [entry("a", 1, None, 1, [0, 1]), entry("a", 2, None, 2, [2, 3]),
            entry("a", 3, None, 3, [9, 9]),  # after a's last checkpoint (2): b redoes step 3
            entry("b", 4, 2, 3, [1, 0]), entry("b", 5, 2, 4, [3, 2])]
    chain = train_oracle.check_exactly_once(good, 4, 2, 2)
    assert chain[3]["run"] == "b"
    bad = good[:-1] + [entry("b", 5, 2, 4, [3, 3])]
    with pytest.raises(AssertionError, match=r"epoch 1: records read more than once \[3\]"):
        train_oracle.check_exactly_once(bad, 4, 2, 2)
    with pytest.raises(AssertionError, match="missing"):
        train_oracle.check_exactly_once(good[:-1], 4, 2, 2)


def test_the_cnn_example_run_twice_resumes_at_its_end_and_says_so(tmp_path, cnn_data):
    """The installed example as a user runs it, twice in one directory: the second run resumes
    at the end, trains nothing, and prints the same final line (issue 41: it crashed on a
    final_loss of None)."""
    def run():
        return subprocess.run([sys.executable, str(EXAMPLE / "train.py")], cwd=tmp_path,
                              env=environment(PRIMUS_DATA=f"{cnn_data}/*.tfrecord", EPOCHS=1),
                              capture_output=True, text=True, timeout=300)
    first = run()
    assert first.returncode == 0, first.stderr
    assert re.search(r"^finished: 8 steps, 1 epochs, final loss \d+\.\d{4}, \d+ samples/s$",
                     first.stdout, re.M), first.stdout
    assert "primus.train: epoch 1/1: step 8/8, loss " in first.stderr, first.stderr
    again = run()
    assert again.returncode == 0, again.stderr
    assert "primus.train: resumed at step 8" in again.stderr, again.stderr
    final = [line for line in again.stdout.splitlines() if line.startswith("finished:")]
    assert final and final[0].split(" samples/s")[0].rsplit(",", 1)[0] == \
        [line for line in first.stdout.splitlines() if line.startswith("finished:")][0].split(
            " samples/s")[0].rsplit(",", 1)[0], (first.stdout, again.stdout)
    assert "primus.train: epoch" not in again.stderr
