"""primus.data: every record exactly once per epoch at 1 to 8 ranks in every format, shuffle and
drop_last; the same global batches at every world size; resume from a cursor on the same, fewer
and more ranks; cursors of another run refused; bad inputs named; the DataLoader paths; and a
preemption under primus-launch with DataLoader workers, read exactly once."""

import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import primus
import primus.data
from primus.data import DataError, Dataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data_oracle import kept_records  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHER = os.environ.get("PRIMUS_LAUNCH", os.path.abspath("primus-launch"))
RECORDS = 200_000
# Files of uneven sizes: empty ones, one much larger than the others.
FILE_SIZES = [0, 1, 17, 4000, 0, 150_000, 3, 45_979, 0]
FIXED = 12


def crc32c(data, _table=[]):
    """CRC-32C written here from its definition (reflected polynomial 0x82F63B78), to check the
    framing against an implementation that is not the one under test."""
    if not _table:
        for n in range(256):
            c = n
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            _table.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = _table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(data):
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", masked(crc32c(length))) + data +
            struct.pack("<I", masked(crc32c(data))))


def record(i, fmt):
    if fmt == "lines":
        return b"%d\n" % i
    if fmt == "fixed":
        return b"%011d\n" % i
    return b"%d" % i


def write_numbered(directory, fmt, sizes=FILE_SIZES):
    """Files part-00.. of numbered records; TFRecord framing from the Python CRC (slow), so the
    large tfrecord dataset reuses one frame template per length."""
    directory.mkdir(parents=True, exist_ok=True)
    i = 0
    for f, size in enumerate(sizes):
        with open(directory / f"part-{f:02d}", "wb") as out:
            chunks = []
            for _ in range(size):
                data = record(i, fmt)
                chunks.append(_fast_tfrecord(data) if fmt == "tfrecord" else data)
                i += 1
            out.write(b"".join(chunks))
    return i


_crc_cache = {}


def _fast_tfrecord(data):
    # The data CRC over the Python table for every record of 200,000 is slow; records are
    # short, so compute it with a table-driven loop in bulk only once per distinct record.
    length = struct.pack("<Q", len(data))
    head = _crc_cache.get(len(data))
    if head is None:
        head = _crc_cache[len(data)] = length + struct.pack("<I", masked(crc32c(length)))
    return head + data + struct.pack("<I", masked(crc32c(data)))


def as_ids(batch):
    if isinstance(batch, np.ndarray):
        return [int(bytes(row)) for row in batch]
    return [int(r) for r in batch]


def set_rank(monkeypatch, rank, world):
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", str(world))


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    base = tmp_path_factory.mktemp("datasets")
    made = {}
    for fmt in ("lines", "fixed", "tfrecord"):
        assert write_numbered(base / fmt, fmt) == RECORDS
        made[fmt] = (str(base / fmt), f"fixed:{FIXED}" if fmt == "fixed" else fmt)
    return made


def read_epoch(spec, fmt, world, monkeypatch, **settings):
    """{rank: [batch ids, ...]} of one epoch, each rank's Dataset opened as that rank."""
    shares = {}
    for rank in range(world):
        set_rank(monkeypatch, rank, world)
        ds = Dataset(spec, format=fmt, **settings)
        epoch = next(iter(ds.epochs(1)))
        steps = len(epoch)
        shares[rank] = [as_ids(batch) for batch in epoch]
        assert len(shares[rank]) == steps
    return shares


@pytest.mark.parametrize("fmt", ["lines", "fixed", "tfrecord"])
def test_every_record_exactly_once_at_one_to_eight_ranks(datasets, fmt, monkeypatch):
    spec, form = datasets[fmt]
    for shuffle in ("none", "records", "blocks"):
        for drop_last in (False, True):
            settings = dict(global_batch_size=1000 + 24, shuffle=shuffle, shuffle_block=100,
                            seed=7, drop_last=drop_last)
            reference = None
            for world in (1, 2, 3, 5, 8):
                shares = read_epoch(spec, form, world, monkeypatch, **settings)
                steps = {len(s) for s in shares.values()}
                assert len(steps) == 1, f"ranks took different numbers of steps: {steps}"
                batches = [sum((shares[r][k] for r in range(world)), [])
                           for k in range(steps.pop())]
                seen = [i for b in batches for i in b]
                assert len(seen) == len(set(seen)), (fmt, shuffle, drop_last, world)
                expected = RECORDS - (RECORDS % 1024 if drop_last else 0)
                assert len(seen) == expected, (fmt, shuffle, drop_last, world)
                if reference is None:
                    reference = batches
                    dropped = set(range(RECORDS)) - set(seen)
                    assert len(dropped) == RECORDS - expected
                else:
                    # Global batch k: the same records in the same order at every world size.
                    assert batches == reference, (fmt, shuffle, drop_last, world)
            if shuffle == "none":
                assert reference[0] == list(range(1024))


def test_epochs_differ_and_global_batches_do_not_depend_on_world_size(datasets, monkeypatch):
    spec, fmt = datasets["tfrecord"]
    set_rank(monkeypatch, 0, 1)
    ds = Dataset(spec, format=fmt, global_batch_size=5000)
    orders = [[i for b in epoch for i in as_ids(b)] for epoch in ds.epochs(2)]
    assert sorted(orders[0]) == sorted(orders[1]) == list(range(RECORDS))
    assert orders[0] != orders[1]


def test_what_a_loop_keeps_never_changes_while_later_batches_are_read(datasets, monkeypatch):
    """The reader writes a batch into the bytes objects of a batch from two steps before when
    nothing else holds them any more (a malloc and a free saved per record): a batch or a record
    that the loop keeps must never change, and a rewritten object must not keep its old hash."""
    set_rank(monkeypatch, 0, 1)
    spec, fmt = datasets["tfrecord"]
    ds = Dataset(spec, format=fmt, global_batch_size=3000, shuffle="records", seed=5)
    epoch = next(iter(ds.epochs(1)))
    kept_batches, kept_records, order = [], [], []
    for step, batch in enumerate(epoch):
        order.extend(as_ids(batch))
        # Every record hashed as it comes: an object written again with a stale cached hash
        # would hash differently from a fresh copy of its bytes.
        for r in batch:
            assert hash(r) == hash(bytes(bytearray(r))), (step, r)
        if step % 5 == 0:
            kept_batches.append((batch, [bytes(bytearray(r)) for r in batch]))
        elif step % 5 == 1:
            kept_records.append((batch[7], bytes(bytearray(batch[7]))))
    assert sorted(order) == list(range(RECORDS))
    assert len(kept_batches) > 5 and len(kept_records) > 5
    for batch, copy in kept_batches:
        assert batch == copy
    for record, copy in kept_records:
        assert record == copy


def stop_and_resume(spec, fmt, before, after, stop, monkeypatch, **settings):
    """Ranks of `before` read `stop` global batches of epoch 0 and save their cursors; ranks of
    `after` load rank 0's cursor and read the rest of epochs 0 and 1. Returns the global
    batches in order."""
    batches = []
    cursor = None
    for rank in range(before):
        set_rank(monkeypatch, rank, before)
        ds = Dataset(spec, format=fmt, **settings)
        epoch = next(iter(ds.epochs(2)))
        mine = [as_ids(next(epoch)) for _ in range(stop)]
        for k, ids in enumerate(mine):
            if rank == 0:
                batches.append(list(ids))
            else:
                batches[k].extend(ids)
        if rank == 0:
            cursor = ds.state_dict()
    rest = {}
    for rank in range(after):
        set_rank(monkeypatch, rank, after)
        ds = Dataset(spec, format=fmt, **settings)
        ds.load_state_dict(dict(cursor))
        rest[rank] = [as_ids(b) for epoch in ds.epochs(2) for b in epoch]
    for k in range(len(rest[0])):
        batches.append(sum((rest[r][k] for r in range(after)), []))
    return batches


def test_a_cursor_resumes_the_same_order_on_the_same_fewer_and_more_ranks(datasets, monkeypatch):
    spec, fmt = datasets["lines"]
    settings = dict(global_batch_size=7000, shuffle="records", seed=3)
    whole = stop_and_resume(spec, fmt, 1, 1, 0, monkeypatch, **settings)
    per_epoch = len(whole) // 2
    for before, after, stop in ((2, 2, 5), (4, 2, 11), (2, 5, 1), (3, 8, per_epoch - 1)):
        resumed = stop_and_resume(spec, fmt, before, after, stop, monkeypatch, **settings)
        assert resumed == whole, (before, after, stop)
        for e in range(2):
            ids = [i for b in resumed[e * per_epoch:(e + 1) * per_epoch] for i in b]
            assert sorted(ids) == list(range(RECORDS))


def test_a_cursor_at_an_epochs_end_continues_in_the_next(datasets, monkeypatch):
    spec, fmt = datasets["lines"]
    set_rank(monkeypatch, 0, 1)
    ds = Dataset(spec, format=fmt, global_batch_size=50_000)
    epochs = ds.epochs(3)
    first = next(epochs)
    assert len(first) == 4
    for _ in first:
        pass
    state = ds.state_dict()
    assert (state["epoch"], state["consumed"]) == (1, 0)
    again = Dataset(spec, format=fmt, global_batch_size=50_000)
    again.load_state_dict(state)
    assert [e.epoch for e in again.epochs(3) if list(e) is not None] == [1, 2]


def test_a_cursor_of_another_run_is_refused_naming_the_difference(datasets, tmp_path,
                                                                 monkeypatch):
    spec, fmt = datasets["lines"]
    set_rank(monkeypatch, 0, 1)
    ds = Dataset(spec, format=fmt, global_batch_size=64)
    next(next(iter(ds.epochs(1))))
    state = ds.state_dict()
    with pytest.raises(ValueError, match=r"global batch size \(--primus-global-batch-size\): "
                                         r"the cursor was saved with 64, this run has 32"):
        Dataset(spec, format=fmt, global_batch_size=32).load_state_dict(state)
    with pytest.raises(ValueError, match=r"--primus-seed"):
        Dataset(spec, format=fmt, global_batch_size=64, seed=9).load_state_dict(state)
    other = tmp_path / "other"
    write_numbered(other, "lines", sizes=[10, 20])
    with pytest.raises(ValueError, match=r"the dataset \(--primus-data\)"):
        Dataset(str(other), format="lines", global_batch_size=64).load_state_dict(state)
    inside = dict(state, consumed=state["consumed"] + 1)
    with pytest.raises(DataError, match="not the end of a global batch"):
        Dataset(spec, format=fmt, global_batch_size=64).load_state_dict(inside)


def test_settings_come_from_the_primus_variables_and_bad_ones_are_named(datasets, monkeypatch):
    spec, fmt = datasets["fixed"]
    set_rank(monkeypatch, 0, 1)
    monkeypatch.setenv("PRIMUS_DATA", spec)
    monkeypatch.setenv("PRIMUS_DATA_FORMAT", fmt)
    monkeypatch.setenv("PRIMUS_GLOBAL_BATCH_SIZE", "10")
    monkeypatch.setenv("PRIMUS_SHUFFLE", "none")
    monkeypatch.setenv("PRIMUS_DROP_LAST", "yes")
    ds = Dataset()
    assert (ds.global_batch_size, ds.shuffle, ds.drop_last, ds.format) == (10, "none", True, fmt)
    batch = next(next(iter(ds.epochs(1))))
    assert isinstance(batch, np.ndarray) and batch.shape == (10, FIXED) and batch.dtype == np.uint8
    assert as_ids(batch) == list(range(10))
    monkeypatch.setenv("PRIMUS_SHUFFLE", "sometimes")
    with pytest.raises(ValueError, match="PRIMUS_SHUFFLE: expected one of none, records, blocks"):
        Dataset()
    monkeypatch.setenv("PRIMUS_SHUFFLE", "none")
    monkeypatch.setenv("PRIMUS_GLOBAL_BATCH_SIZE", "0")
    with pytest.raises(ValueError, match="PRIMUS_GLOBAL_BATCH_SIZE: expected an integer from 1"):
        Dataset()
    monkeypatch.delenv("PRIMUS_GLOBAL_BATCH_SIZE")
    with pytest.raises(ValueError, match="no global batch size"):
        Dataset()
    with pytest.raises(DataError, match="format: expected lines, fixed:N"):
        Dataset(format="csv", global_batch_size=1)


def test_bad_data_is_named_with_the_file_and_byte_offset(tmp_path, monkeypatch):
    set_rank(monkeypatch, 0, 1)
    good = tfrecord(b"alpha") + tfrecord(b"beta")
    (tmp_path / "a.tfrecord").write_bytes(good)
    (tmp_path / "b.tfrecord").write_bytes(good[:-3])
    with pytest.raises(DataError, match=r"b\.tfrecord: byte offset 21: truncated record"):
        Dataset(str(tmp_path / "*.tfrecord"), format="tfrecord", global_batch_size=2)
    damaged = bytearray(good)
    damaged[-6] ^= 1
    (tmp_path / "b.tfrecord").write_bytes(bytes(damaged))
    with pytest.raises(DataError, match=r"b\.tfrecord: byte offset 21: wrong CRC-32C of the "
                                        r"record's data"):
        Dataset(str(tmp_path / "*.tfrecord"), format="tfrecord", global_batch_size=2)
    with pytest.raises(DataError, match=r"spec: the glob '.*\*\.csv' matches no file"):
        Dataset(str(tmp_path / "*.csv"), format="tfrecord", global_batch_size=2)
    (tmp_path / "sub").mkdir()
    (tmp_path / "list").write_text("a.tfrecord\nsub\n")
    with pytest.raises(DataError, match=r"list:2: 'sub' is a directory"):
        Dataset("@" + str(tmp_path / "list"), format="tfrecord", global_batch_size=2)
    (tmp_path / "b.tfrecord").write_bytes(good)
    ds = Dataset("@" + str(tmp_path / "list").replace("list", "list2") if False else
                 str(tmp_path / "*.tfrecord"), format="tfrecord", global_batch_size=4,
                 shuffle="none")
    assert next(next(iter(ds.epochs(1)))) == [b"alpha", b"beta", b"alpha", b"beta"]


def test_a_dataloader_reads_the_same_batches_with_and_without_workers(datasets, monkeypatch):
    torch = pytest.importorskip("torch", reason="torch is not installed for this Python")
    spec, fmt = datasets["tfrecord"]
    set_rank(monkeypatch, 1, 3)
    settings = dict(format=fmt, global_batch_size=30_000, seed=5)
    plain = [as_ids(b) for b in next(iter(Dataset(spec, **settings).epochs(1)))]
    ds = Dataset(spec, **settings)
    assert [as_ids(b) for b in torch.utils.data.DataLoader(ds, batch_size=None)] == plain
    # Two workers: every batch once, in order; the cursor counts what the loop received.
    ds = Dataset(spec, decode=int, **settings)
    received = []
    for batch in ds.loader(num_workers=2):
        received.append(batch)
        if len(received) == 3:
            break
    state = ds.state_dict()
    assert (state["epoch"], state["consumed"]) == (0, 90_000)
    resumed = Dataset(spec, decode=int, **settings)
    resumed.load_state_dict(state)
    received += list(resumed.loader(num_workers=3))
    assert received == plain
    assert resumed.state_dict()["epoch"] == 1
    with pytest.raises(Exception, match=r"use ds\.loader\(num_workers=N\)"):
        list(torch.utils.data.DataLoader(Dataset(spec, **settings), batch_size=None,
                                         num_workers=1))


def samples_counted():
    from primus import _control

    return _control.heartbeat_message()["samples"]


def test_every_batch_counts_its_records_once_in_the_heartbeats(datasets, monkeypatch):
    """The heartbeats' samples grow by the records of each batch the loop receives, once,
    however the epoch is iterated: directly, through a DataLoader, or through ds.loader() with
    and without workers (whose reads happen in _WorkerView, in this process when there are
    none)."""
    torch = pytest.importorskip("torch", reason="torch is not installed for this Python")
    spec, fmt = datasets["lines"]
    set_rank(monkeypatch, 2, 3)
    settings = dict(format=fmt, global_batch_size=30_000, seed=5)
    share = sum(len(b) for b in next(iter(Dataset(spec, **settings).epochs(1))))
    assert 0 < share < RECORDS
    ways = {
        "epochs": lambda ds: next(iter(ds.epochs(1))),
        "DataLoader": lambda ds: torch.utils.data.DataLoader(ds, batch_size=None),
        "loader(0)": lambda ds: ds.loader(num_workers=0),
        "loader(2)": lambda ds: ds.loader(num_workers=2),
    }
    for way, batches in ways.items():
        before = samples_counted()
        received = sum(len(b) for b in batches(Dataset(spec, **settings)))
        assert received == share, way
        assert samples_counted() - before == share, way
    # Three batches taken, then the rest after a resume: every record counted once.
    ds = Dataset(spec, **settings)
    before = samples_counted()
    taken = 0
    for batch in ds.loader(num_workers=2):
        taken += len(batch)
        if taken >= 3 * 10_000:
            break
    assert samples_counted() - before == taken
    resumed = Dataset(spec, **settings)
    resumed.load_state_dict(ds.state_dict())
    assert sum(len(b) for b in resumed.loader(num_workers=0)) == share - taken
    assert samples_counted() - before == share


def launch(workdir, nproc, run, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PRIMUS_", "RANK",
                                                                     "WORLD_SIZE"))}
    # should_stop() agrees at every step: the tests name the step a stop lands on.
    env["PRIMUS_STOP_INTERVAL"] = "0"
    env.update({k: str(v) for k, v in extra.items()})
    env["OUT"] = str(workdir)
    env["RUN"] = run
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    return subprocess.run([LAUNCHER, "--nproc", str(nproc), "--label", "--",
                           sys.executable, os.path.join(HERE, "read_data.py")],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=300)


def global_batches(workdir):
    """{(epoch, step): ids of the global batch in rank order}, keeping for each step the entry
    of the last run that logged it (what the final state descends from)."""
    entries = {}
    for name in sorted(os.listdir(workdir)):
        if not name.startswith("rank-"):
            continue
        rank = int(name[5:-6])
        for line in open(os.path.join(workdir, name)):
            entry = json.loads(line)
            entries.setdefault((entry["epoch"], entry["step"]), {})
            slot = entries[(entry["epoch"], entry["step"])]
            slot[(entry["run"], rank)] = entry
    batches = {}
    for key, by_run in entries.items():
        last_run = max(run for run, _ in by_run)
        ranks = sorted(rank for run, rank in by_run if run == last_run)
        batches[key] = sum((by_run[(last_run, r)]["ids"] for r in ranks), [])
    return dict(sorted(batches.items()))


def test_preempted_with_dataloader_workers_and_resumed_on_more_ranks_reads_exactly_once(
        datasets, tmp_path):
    pytest.importorskip("torch", reason="torch is not installed for this Python")
    if not os.access(LAUNCHER, os.X_OK):
        pytest.skip(f"{LAUNCHER} is not built")
    spec, fmt = datasets["lines"]
    settings = dict(PRIMUS_DATA=spec, PRIMUS_DATA_FORMAT=fmt, PRIMUS_GLOBAL_BATCH_SIZE=20_000,
                    PRIMUS_SEED=11, EPOCHS=2, SAVE_EVERY=4)
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    whole.mkdir()
    stopped.mkdir()
    first = launch(whole, 2, "a", **settings)
    assert first.returncode == 0, first.stdout + first.stderr
    # SIGTERM to rank 0's process group (its two DataLoader workers too) at step 7: the workers
    # ignore it, the ranks agree to stop, save the cursor at step 7 and exit 75.
    interrupted = launch(stopped, 2, "a", WORKERS=2, STOP_AT=7, **settings)
    assert interrupted.returncode == 75, interrupted.stdout + interrupted.stderr
    assert "0: rank 0: stopped at step 7" in interrupted.stdout, interrupted.stdout
    assert "DataLoader worker" not in interrupted.stderr, interrupted.stderr
    # Resumed on three ranks, with workers.
    resumed = launch(stopped, 3, "b", WORKERS=2, **settings)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "2: rank 2: finished at step 20" in resumed.stdout, resumed.stdout
    expected, got = global_batches(whole), global_batches(stopped)
    assert list(got) == list(expected)
    assert got == expected
    for epoch in (0, 1):
        ids = [i for (e, _), b in got.items() if e == epoch for i in b]
        assert sorted(ids) == list(range(RECORDS))


def run_dynamic(workdir, nproc, run, *options, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PRIMUS_", "RANK",
                                                                     "WORLD_SIZE"))}
    env.update({k: str(v) for k, v in extra.items()})
    env.update(OUT=str(workdir), RUN=run, PRIMUS_DATA_MODE="dynamic",
               PYTHONPATH=os.pathsep.join(os.path.abspath(p) for p in sys.path if p))
    return subprocess.run([LAUNCHER, "--nproc", str(nproc), "--label", *options, "--",
                           sys.executable, os.path.join(HERE, "read_dynamic.py")],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=300)


def small_lines(directory, records):
    directory.mkdir()
    sizes = [records // 3, 0, records - records // 3 - 7, 7]
    i = 0
    for f, size in enumerate(sizes):
        (directory / f"part-{f}").write_text("".join(f"{i + k}\n" for k in range(size)))
        i += size
    return str(directory)


def test_dynamic_mode_faster_ranks_read_more_and_every_record_once(tmp_path):
    if not os.access(LAUNCHER, os.X_OK):
        pytest.skip(f"{LAUNCHER} is not built")
    records = 20000
    spec = small_lines(tmp_path / "data", records)
    work = tmp_path / "work"
    work.mkdir()
    done = run_dynamic(work, 3, "a", PRIMUS_DATA=spec, PRIMUS_DATA_FORMAT="lines",
                       PRIMUS_GLOBAL_BATCH_SIZE=60, SLOW_RANK=2, SLOW_SECONDS=0.02,
                       SLEEP_SECONDS=0.002)
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in range(3):
        assert f"{rank}: rank {rank}: finished" in done.stdout, done.stdout
    kept, by_rank = kept_records(work)
    for epoch in (0, 1):
        assert sorted(kept[epoch]) == list(range(records)), f"epoch {epoch}"
    slow = by_rank.get(2, 0)
    assert by_rank.get(0, 0) > 2 * slow and by_rank.get(1, 0) > 2 * slow, by_rank


def test_dynamic_mode_a_failed_rank_and_a_preemption_resume_every_split_exactly_once(tmp_path):
    if not os.access(LAUNCHER, os.X_OK):
        pytest.skip(f"{LAUNCHER} is not built")
    records = 4000
    spec = small_lines(tmp_path / "data", records)
    settings = dict(PRIMUS_DATA=spec, PRIMUS_DATA_FORMAT="lines", PRIMUS_GLOBAL_BATCH_SIZE=30,
                    CKPT_EVERY=5, SLOW_RANK=1, SLOW_SECONDS=0.01)
    # Rank 2 dies after its 12th batch, mid-split; the attempt ends and the next one resumes
    # every split from the last committed checkpoint.
    failed = tmp_path / "failed"
    failed.mkdir()
    result = run_dynamic(failed, 3, "a", "--primus-max-restarts", "1", FAIL_RANK=2, FAIL_AT=12,
                         **settings)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rank 2 on" in result.stderr and "exit status 3" in result.stderr, result.stderr
    kept, _ = kept_records(failed)
    for epoch in (0, 1):
        assert sorted(kept[epoch]) == list(range(records)), f"epoch {epoch}"

    # A stop: SIGTERM to rank 0's group; primus-launch orders a checkpoint of every rank, they
    # save it and exit 75; the rerun on two ranks resumes from it.
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    result = run_dynamic(stopped, 3, "a", STOP_AT=8, **settings)
    assert result.returncode == 75, result.stdout + result.stderr
    assert result.stdout.count("stopped after checkpoint") == 3, result.stdout
    result = run_dynamic(stopped, 2, "b", **settings)
    assert result.returncode == 0, result.stdout + result.stderr
    kept, _ = kept_records(stopped)
    for epoch in (0, 1):
        assert sorted(kept[epoch]) == list(range(records)), f"epoch {epoch}"


def test_dynamic_mode_without_primus_launch_or_with_ddp_is_an_error(tmp_path, monkeypatch):
    spec = small_lines(tmp_path / "data", 10)
    monkeypatch.delenv("PRIMUS_CONTROL", raising=False)
    with pytest.raises(ValueError, match="dynamic needs primus-launch"):
        Dataset(spec, format="lines", global_batch_size=2, mode="dynamic")
    monkeypatch.setenv("PRIMUS_DATA_MODE", "dynamic")
    with pytest.raises(RuntimeError, match="has no step that every rank takes together"):
        primus.ddp(object())
