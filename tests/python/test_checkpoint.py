"""primus.checkpoint with real HDF5 files: numpy and torch state, RNG, sharded tensors into
another world size, asynchronous saves, fallback past a corrupt checkpoint, and h5py/h5dump
reading what Primus wrote."""

import os
import random
import shutil
import subprocess

import numpy as np
import pytest

from primus import checkpoint

DTYPES = ["float64", "float32", "float16", "int8", "int16", "int32", "int64", "uint8", "bool"]


def sample_state(seed):
    rng = np.random.default_rng(seed)
    arrays = {d: (rng.random((5, 3)) * 100).astype(d) for d in DTYPES}
    return {
        "arrays": arrays,
        "odd": {"scalar": np.float32(2.5), "empty": np.zeros((0, 4), np.int32),
                "zero_d": np.array(7, np.int64), "noncontig": np.arange(12.0).reshape(3, 4)[:, 1]},
        "plain": {"lr": 0.1, "name": "run-1", "none": None, "flag": True, "big": 2 ** 70,
                  "nested": [1, (2, 3), {"k": [4]}]},
        7: "an int key",
    }


def assert_same(a, b, where="state"):
    assert type(a) is type(b) or (isinstance(a, np.generic) and isinstance(b, np.generic)), where
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}/{i}")
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and np.shape(a) == np.shape(b), where
        assert np.array_equal(a, b), where
    else:
        assert a == b, where


def test_numpy_state_round_trips_exactly(tmp_path):
    state = sample_state(1)
    path = checkpoint.save(state, 10, dir=tmp_path, epoch=2, data_cursor={"epoch": 2, "seen": 640},
                           metadata={"lr": 0.1})
    assert path == str(tmp_path / "step-000000000010")
    restored = checkpoint.load(tmp_path, full_verify=True)
    assert restored.step == 10 and restored.epoch == 2 and restored.skipped == []
    assert restored.data_cursor == {"epoch": 2, "seen": 640}
    assert restored.metadata == {"lr": 0.1}
    expected = dict(state)
    expected["odd"] = dict(state["odd"], noncontig=np.ascontiguousarray(state["odd"]["noncontig"]))
    assert_same(expected, restored.state)
    assert checkpoint.latest_step(tmp_path) == 10


def test_load_without_a_checkpoint_is_none_and_the_directory_comes_from_the_environment(
        tmp_path, monkeypatch):
    monkeypatch.setenv("PRIMUS_CKPT_DIR", str(tmp_path))
    assert checkpoint.load() is None
    checkpoint.save({"w": np.ones(3)}, 1)
    assert checkpoint.load().step == 1
    monkeypatch.delenv("PRIMUS_CKPT_DIR")
    with pytest.raises(ValueError, match="PRIMUS_CKPT_DIR"):
        checkpoint.load()


def test_bad_input_is_refused_and_nothing_is_committed(tmp_path):
    with pytest.raises(TypeError, match="arrays/c: dtype uint16 cannot be checkpointed"):
        checkpoint.save({"arrays": {"c": np.zeros(3, np.uint16)}}, 1, dir=tmp_path)
    with pytest.raises(TypeError, match="cannot checkpoint a set"):
        checkpoint.save({"s": {1, 2}}, 1, dir=tmp_path)
    with pytest.raises(ValueError, match="step: expected a non-negative integer"):
        checkpoint.save({}, -1, dir=tmp_path)
    with pytest.raises(checkpoint.CheckpointError, match="needs agree="):
        checkpoint.save({}, 1, dir=tmp_path, rank=0, world_size=2)
    assert checkpoint.load(tmp_path) is None
    assert not list(tmp_path.glob("step-*"))


def test_rng_state_restores_the_same_draws(tmp_path):
    random.seed(5)
    np.random.seed(6)
    checkpoint.save({}, 3, dir=tmp_path)
    first = (random.random(), np.random.rand())
    random.seed(99)
    np.random.seed(99)
    checkpoint.load(tmp_path, restore_rng=True)
    assert (random.random(), np.random.rand()) == first


def test_shards_load_into_another_world_size(tmp_path, ranks):
    rows = np.arange(7 * 2, dtype=np.float32).reshape(7, 2)

    def save(rank, agree):
        begin, end = 7 * rank // 2, 7 * (rank + 1) // 2
        state = {"emb": checkpoint.Shard(rows[begin:end], rows.shape, [begin, 0]),
                 "bias": np.full(3, 5.0), "mine": checkpoint.PerRank(np.array([rank]))}
        return checkpoint.save(state, 4, dir=tmp_path, rank=rank, world_size=2, agree=agree)

    ranks(2, save)
    for world in (1, 3, 4):
        for rank in range(world):
            restored = checkpoint.load(tmp_path, rank=rank, world_size=world)
            begin, end = 7 * rank // world, 7 * (rank + 1) // world
            assert np.array_equal(restored.state["emb"], rows[begin:end])
            assert np.array_equal(restored.state["bias"], np.full(3, 5.0))
    assert checkpoint.load(tmp_path, rank=1, world_size=2).state["mine"][0] == 1
    assert checkpoint.load(tmp_path, rank=3, world_size=4).state["mine"] is None
    # The replicated bias was written once, by rank 0.
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "step-000000000004" / "rank-00001.h5", "r") as f:
        assert "bias" not in f["tensors"] and "emb" in f["tensors"]


def test_a_rank_that_fails_makes_every_rank_fail_and_nothing_is_committed(tmp_path, ranks):
    def save(rank, agree):
        value = np.zeros(2, np.uint16) if rank == 1 else np.zeros(2)
        try:
            checkpoint.save({"x": value}, 8, dir=tmp_path, rank=rank, world_size=2, agree=agree)
        except (TypeError, checkpoint.CheckpointError) as error:
            return str(error)
        return "saved"

    messages = ranks(2, save)
    assert "another rank failed" in messages[0]
    assert "dtype uint16" in messages[1]
    assert not (tmp_path / "step-000000000008").exists()


def test_async_save_copies_first_and_commits_at_wait(tmp_path):
    weights = np.arange(1000, dtype=np.float64)
    pending = checkpoint.save({"w": weights}, 1, dir=tmp_path, blocking=False)
    weights[:] = -1  # the training step goes on; the checkpoint keeps the values of step 1
    path = pending.wait()
    assert path == str(tmp_path / "step-000000000001")
    assert np.array_equal(checkpoint.load(tmp_path).state["w"], np.arange(1000.0))
    # A second asynchronous save waits for none in flight; save() waits for the previous one.
    p2 = checkpoint.save({"w": weights}, 2, dir=tmp_path, blocking=False)
    checkpoint.save({"w": weights}, 3, dir=tmp_path)
    assert p2.done() and checkpoint.latest_step(tmp_path) == 3
    assert p2.wait() == str(tmp_path / "step-000000000002")


def test_a_corrupt_newest_checkpoint_is_skipped_with_a_warning(tmp_path):
    checkpoint.save({"w": np.arange(4.0)}, 1, dir=tmp_path)
    checkpoint.save({"w": np.arange(4.0) + 10}, 2, dir=tmp_path)
    rank_file = tmp_path / "step-000000000002" / "rank-00000.h5"
    data = bytearray(rank_file.read_bytes())
    at = data.find(np.array([10.0, 11.0]).tobytes())
    data[at + 3] ^= 0xFF
    rank_file.write_bytes(bytes(data))
    assert checkpoint.verify(tmp_path / "step-000000000002")
    with pytest.warns(RuntimeWarning, match="checksum mismatch"):
        restored = checkpoint.load(tmp_path, full_verify=True)
    assert restored.step == 1 and len(restored.skipped) == 1
    assert np.array_equal(restored.state["w"], np.arange(4.0))


def test_a_root_that_others_can_write_is_refused_unless_trusted(tmp_path, monkeypatch):
    """A checkpoint is input as trusted as code: one in a directory that anyone can write may
    have been put there by someone else. The load says so, loudly (it does not quietly start
    from scratch), and --primus-ckpt-trust-shared (PRIMUS_CKPT_TRUST_SHARED=1) loads it."""
    root = tmp_path / "shared"
    checkpoint.save({"w": np.arange(3.0)}, 1, dir=root)
    assert (root.stat().st_mode & 0o777) == 0o700, "a new root is the user's alone"
    os.chmod(root, 0o777)
    monkeypatch.delenv("PRIMUS_CKPT_TRUST_SHARED", raising=False)
    with pytest.raises(RuntimeError, match=r"anyone can write it \(mode 0777\).*trust-shared"):
        checkpoint.load(root)
    monkeypatch.setenv("PRIMUS_CKPT_TRUST_SHARED", "1")
    assert np.array_equal(checkpoint.load(root).state["w"], np.arange(3.0))


def test_retention_keeps_the_newest(tmp_path):
    for step in (1, 2, 3, 4):
        checkpoint.save({"w": np.ones(2)}, step, dir=tmp_path, keep_last=2)
    assert sorted(p.name for p in tmp_path.glob("step-*")) == [
        "step-000000000003", "step-000000000004"]


def test_h5py_and_h5dump_read_what_primus_wrote(tmp_path):
    h5py = pytest.importorskip("h5py")
    values = np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)
    checkpoint.save({"model": {"layer/weight": values}}, 5, dir=tmp_path)
    path = tmp_path / "step-000000000005" / "rank-00000.h5"
    with h5py.File(path, "r") as f:
        dataset = f["tensors"]["model%2Flayer%2Fweight"]
        assert np.array_equal(dataset[()], values)
        assert dataset.attrs["dtype"] == b"float32" or dataset.attrs["dtype"] == "float32"
        assert list(dataset.attrs["global_shape"]) == [3, 4]
    if shutil.which("h5dump"):
        out = subprocess.run(["h5dump", "-H", str(path)], capture_output=True, text=True)
        assert out.returncode == 0 and "model%2Flayer%2Fweight" in out.stdout


@pytest.mark.parametrize("level", [1, 3])
def test_compressed_checkpoints_shrink_and_any_hdf5_reader_inflates_them(tmp_path, level):
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(level)
    smooth = np.repeat(np.arange(1 << 16, dtype=np.float32), 16).reshape(-1, 256)  # 4 MiB
    # Random bits do not shrink: stored as they are (two whole chunks, no zero-padded edge).
    noise = rng.integers(-2 ** 31, 2 ** 31, size=(2048, 256), dtype=np.int32)
    state = {"smooth": smooth, "noise": noise, "edge": smooth[:1001, :3].copy()}
    checkpoint.save(state, 1, dir=tmp_path, compress=level, chunk_bytes=1 << 20)
    path = tmp_path / "step-000000000001" / "rank-00000.h5"
    assert path.stat().st_size < (smooth.nbytes + noise.nbytes) / 2
    with h5py.File(path, "r") as f:  # h5py inflates with zlib what igzip wrote
        assert f["tensors"]["smooth"].compression == "gzip"
        for name, array in state.items():
            assert np.array_equal(f["tensors"][name][()], array), name
        # Chunk by chunk: the smooth tensor's are stored deflated (filter mask bit 0 clear,
        # smaller than a raw chunk), the noise's as they are (bit 0 set: the filter skipped).
        for name, deflated in (("smooth", True), ("noise", False)):
            dataset = f["tensors"][name]
            raw = int(np.prod(dataset.chunks)) * dataset.dtype.itemsize
            chunks = [dataset.id.get_chunk_info(i) for i in range(dataset.id.get_num_chunks())]
            assert len(chunks) > 1, name
            for chunk in chunks:
                if deflated:
                    assert chunk.filter_mask & 1 == 0 and chunk.size < raw / 4, (name, chunk)
                else:
                    assert chunk.filter_mask & 1 == 1 and chunk.size == raw, (name, chunk)
    restored = checkpoint.load(tmp_path, full_verify=True)
    for name, array in state.items():
        assert np.array_equal(restored.state[name], array), name
    with pytest.raises(checkpoint.CheckpointError, match="compression level 4: expected 0"):
        checkpoint.save(state, 2, dir=tmp_path, compress=4)
    assert checkpoint.latest_step(tmp_path) == 1


def test_a_byte_flipped_in_the_second_direct_read_piece_fails_the_load(tmp_path):
    """24 MiB, unfiltered, in 4 MiB chunks laid back to back: the library reads it straight from
    the file in 8 MiB pieces. A byte flipped on disk in the second piece (its offset from HDF5's
    chunk index, as the reader finds it) fails the load and full verification."""
    h5py = pytest.importorskip("h5py")
    piece = 8 << 20  # ckpt/rank_file.cpp's kDirectPieceBytes
    big = np.arange(6 << 20, dtype=np.float32).reshape(6144, 1024)  # exact below 2**24
    checkpoint.save({"big": big, "small": np.arange(3.0)}, 1, dir=tmp_path)
    step = tmp_path / "step-000000000001"
    path = step / "rank-00000.h5"
    restored = checkpoint.load(tmp_path, full_verify=True)
    assert np.array_equal(restored.state["big"], big)

    target = piece + piece // 2 + 12345  # a byte of the array inside the second piece
    with h5py.File(path, "r") as f:
        dataset = f["tensors"]["big"]
        assert dataset.compression is None and dataset.chunks[1] == big.shape[1]
        chunk_bytes = dataset.chunks[0] * big.shape[1] * big.itemsize
        chunks = sorted((dataset.id.get_chunk_info(i) for i in range(dataset.id.get_num_chunks())),
                        key=lambda c: c.chunk_offset)
        # The reader preads the chunks under the first 16 MiB as one run only if they are back
        # to back in the file.
        for before, after in zip(chunks, chunks[1:]):
            if after.chunk_offset[0] * big.shape[1] * big.itemsize >= 2 * piece:
                break
            assert after.byte_offset == before.byte_offset + chunk_bytes, (before, after)
        holder = chunks[target // chunk_bytes]
        assert holder.chunk_offset[0] * big.shape[1] * big.itemsize == \
            target // chunk_bytes * chunk_bytes
        at = holder.byte_offset + target % chunk_bytes
    data = bytearray(path.read_bytes())
    assert data[at] == big.tobytes()[target]
    data[at] ^= 0x5A
    path.write_bytes(bytes(data))

    with pytest.raises(checkpoint.CorruptCheckpoint,
                       match="rank-00000.h5: /tensors/big: checksum mismatch"):
        checkpoint.load(tmp_path)
    problems = checkpoint.verify(step, full=True)
    assert len(problems) == 1 and "/tensors/big: checksum mismatch" in problems[0], problems
    with pytest.warns(RuntimeWarning, match="/tensors/big: checksum mismatch"):
        assert checkpoint.load(tmp_path, full_verify=True) is None


def test_torch_state_dicts_round_trip(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(5, 4)).sum().backward()
    optimizer.step()
    half = torch.randn(6, dtype=torch.bfloat16)
    checkpoint.save({"model": model.state_dict(), "optim": optimizer.state_dict(), "bf16": half},
                    7, dir=tmp_path)
    expected_draw = torch.rand(3)

    restored = checkpoint.load(tmp_path, restore_rng=True)
    assert torch.equal(torch.rand(3), expected_draw)  # torch's generator is back
    clone = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    clone.load_state_dict(restored.state["model"])
    for a, b in zip(model.state_dict().values(), clone.state_dict().values()):
        assert torch.equal(a, b)
    optimizer2 = torch.optim.Adam(clone.parameters(), lr=0.5)
    optimizer2.load_state_dict(restored.state["optim"])
    assert optimizer2.state_dict()["param_groups"][0]["lr"] == 0.01
    for key, state in optimizer.state_dict()["state"].items():
        for name, value in state.items():
            assert torch.equal(torch.as_tensor(value),
                               torch.as_tensor(optimizer2.state_dict()["state"][key][name]))
    bf16 = restored.state["bf16"]
    assert bf16.dtype == torch.bfloat16 and torch.equal(bf16.view(torch.int16),
                                                        half.view(torch.int16))


def test_numpy_scalars_come_back_as_saved_while_other_reads_are_in_flight(tmp_path):
    """A numpy scalar is made from its array at once, so its read must be over by then: it
    was submitted to the background reads like any tensor and copied before they filled it
    (the scalar came back as whatever np.empty held, 1e-45 in one run of this suite)."""
    state = {f"s{i}": np.float32(i + 0.5) for i in range(64)}
    state.update({f"big{i}": np.full((256, 1024), i, np.float32) for i in range(4)})
    checkpoint.save(state, 1, dir=tmp_path)
    for _ in range(5):
        restored = checkpoint.load(tmp_path)
        wrong = {k: v for k, v in restored.state.items()
                 if k.startswith("s") and v != state[k]}
        assert not wrong, f"scalars read back wrong: {wrong}"
        assert all(isinstance(restored.state[f"s{i}"], np.float32) for i in range(64))


def test_every_rank_records_the_same_tree_whether_or_not_it_writes_the_tensors():
    """A rank other than the owner describes a replicated torch tensor from its dtype alone,
    without converting it: its tree must still be the owner's, node for node (a loading rank
    reads its own file's tree), for every dtype, bfloat16 and non-contiguous tensors included;
    a dtype that cannot be checkpointed is refused on every rank."""
    torch = pytest.importorskip("torch")
    from primus import _tree

    state = {"w": torch.randn(3, 4).t(), "b": torch.zeros(2, dtype=torch.bfloat16),
             "n": torch.tensor(7), "mask": torch.ones(2, dtype=torch.bool),
             "h": torch.ones(1, dtype=torch.float16), "step": 3, "list": [torch.arange(3)]}
    owner_tree, owner_leaves = _tree.flatten(state, 0, 0)
    other_tree, other_leaves = _tree.flatten(state, 1, 0)
    assert other_tree == owner_tree
    assert len(owner_leaves) == 6 and other_leaves == []
    for rank in (0, 1):
        with pytest.raises(TypeError, match=r"z: dtype .*cannot be checkpointed"):
            _tree.flatten({"z": torch.zeros(2, dtype=torch.complex64)}, rank, 0)


def test_a_save_at_or_below_this_runs_own_last_step_is_refused(tmp_path):
    # Issue 41: save(step=1) after this process saved step 4 replaced the committed step 1.
    checkpoint.save({"w": np.arange(3.0)}, 1, dir=tmp_path)
    checkpoint.save({"w": np.arange(3.0) + 4}, 4, dir=tmp_path)
    for step in (1, 4):
        with pytest.raises(ValueError, match=f"step {step} is not above step 4, which this run "
                                             f"saved in {tmp_path}"):
            checkpoint.save({"w": np.zeros(3)}, step, dir=tmp_path)
    assert np.array_equal(checkpoint.load(tmp_path, step=1).state["w"], np.arange(3.0))
    assert np.array_equal(checkpoint.load(tmp_path, step=4).state["w"], np.arange(3.0) + 4)
    # Another root keeps its own count.
    checkpoint.save({"w": np.zeros(3)}, 1, dir=tmp_path / "other")
    # A run that resumed from step 4 saves above it; one that went back to step 1 (the newest
    # that verifies) saves from there on, replacing what it saved after.
    assert checkpoint.load(tmp_path).step == 4
    with pytest.raises(ValueError, match="step 3 is not above step 4, which this run resumed "
                                         "from"):
        checkpoint.save({"w": np.zeros(3)}, 3, dir=tmp_path)
    shutil.rmtree(tmp_path / "step-000000000004")
    (tmp_path / "LATEST").write_text("step-000000000001\n")
    assert checkpoint.load(tmp_path).step == 1
    checkpoint.save({"w": np.ones(3)}, 4, dir=tmp_path)
    assert np.array_equal(checkpoint.load(tmp_path).state["w"], np.ones(3))
    # A save that failed committed nothing and may be tried again.
    with pytest.raises(TypeError):
        checkpoint.save({"w": object()}, 5, dir=tmp_path)
    checkpoint.save({"w": np.ones(3)}, 5, dir=tmp_path)
