"""primus._memory_copy, the committed step kept in memory for a rejoin, in one process: what a
save keeps (the replicated tensors a rank does not write included), when a copy is held, the
second set of buffers that keeps the held copy from being written over, the bound, and the
check of a copy against the CRC-32C its owner wrote (real HDF5 files). The restore's exchange
between real ranks is tested end to end in test_rejoin.py."""

import numpy as np
import pytest

from primus import _ckpt, _memory_copy, checkpoint
from primus._tree import flatten


@pytest.fixture(autouse=True)
def fresh_copy(monkeypatch):
    """Each test starts with no copy, wanted, and the default bound."""
    _memory_copy.release()
    monkeypatch.setattr(_memory_copy, "_off", None)
    monkeypatch.setattr(_memory_copy, "_wanted", True)
    monkeypatch.delenv("PRIMUS_REJOIN_MEMORY", raising=False)
    yield
    _memory_copy.release()


def state(value):
    return {"model": {"w": np.full((64, 64), value, dtype=np.float32),
                      "b": np.arange(8, dtype=np.int64) + int(value)}}


def save_copy(root, step, value, rank=1):
    """What checkpoint.save does for rank `rank` (owner 0): the copy, kept with its step."""
    buffers = _memory_copy.staging()
    kept = []
    _, leaves = flatten(state(value), rank, 0, copy=True, staging=buffers, kept=kept)
    _memory_copy.saving(str(root), step, leaves, kept, buffers)
    return leaves, kept


def test_a_rank_keeps_the_replicated_tensors_it_does_not_write(tmp_path):
    source = state(3.0)
    kept = []
    _, leaves = flatten(source, 1, 0, copy=True, staging={}, kept=kept)
    assert leaves == []  # rank 1 writes none of them: rank 0 owns them
    assert sorted(leaf.name for leaf in kept) == ["model/b", "model/w"]
    by_name = {leaf.name: leaf.array for leaf in kept}
    assert np.array_equal(by_name["model/w"], source["model"]["w"])
    assert not np.shares_memory(by_name["model/w"], source["model"]["w"])
    # The owner writes them and keeps nothing more.
    kept = []
    _, leaves = flatten(source, 0, 0, copy=True, staging={}, kept=kept)
    assert kept == [] and sorted(leaf.name for leaf in leaves) == ["model/b", "model/w"]


def test_a_copy_is_held_from_its_commit_and_the_next_save_copies_into_the_other_set(tmp_path):
    save_copy(tmp_path, 10, 1.0)
    assert _memory_copy.held_bytes() == 0, "not held before its commit"
    _memory_copy.committed(str(tmp_path), 9)  # another step's commit
    assert _memory_copy.held_bytes() == 0
    _memory_copy.committed(str(tmp_path), 10)
    held = _memory_copy._held
    assert held.step == 10 and held.bytes == 64 * 64 * 4 + 8 * 8
    # The next save (step 20) copies into the other set: the held copy stays as it was.
    _, kept = save_copy(tmp_path, 20, 2.0)
    assert all(not np.shares_memory(leaf.array, held.arrays[leaf.name]) for leaf in kept)
    assert np.all(held.arrays["model/w"] == 1.0)
    _memory_copy.committed(str(tmp_path), 20)
    assert _memory_copy._held.step == 20
    # Step 30 goes back into the first set, which step 10 no longer holds.
    assert _memory_copy.staging() is held.buffers
    save_copy(tmp_path, 30, 3.0)
    _memory_copy.discarded()  # a rejoin: step 30 will never commit
    _memory_copy.committed(str(tmp_path), 30)
    assert _memory_copy._held.step == 20 and np.all(_memory_copy._held.arrays["model/w"] == 2.0)


def test_two_copies_over_the_bound_are_not_kept_and_a_warning_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIMUS_REJOIN_MEMORY", "1")  # MiB, under two copies of 4 MiB
    big = {"w": np.zeros((1024, 1024), dtype=np.float32)}
    buffers = _memory_copy.staging()
    kept = []
    _, leaves = flatten(big, 1, 0, copy=True, staging=buffers, kept=kept)
    with pytest.warns(RuntimeWarning, match="not kept in memory.*--primus-rejoin-memory"):
        _memory_copy.saving(str(tmp_path), 5, leaves, kept, buffers)
    _memory_copy.committed(str(tmp_path), 5)
    assert _memory_copy.held_bytes() == 0 and not _memory_copy.active(2)
    assert all(not b for b in _memory_copy._buffers)


def test_the_copy_is_kept_only_where_a_rejoin_can_use_it(monkeypatch):
    assert _memory_copy.active(2) and not _memory_copy.active(1)
    monkeypatch.setenv("PRIMUS_REJOIN_MEMORY", "0")
    assert not _memory_copy.active(2)
    monkeypatch.setenv("PRIMUS_REJOIN_MEMORY", "64")
    monkeypatch.setattr(_memory_copy, "_wanted", False)  # no loop that can rejoin
    assert not _memory_copy.active(2)


@pytest.mark.parametrize("bad", ["-1", "lots", "1.5", str((1 << 20) + 1)])
def test_a_bad_bound_is_refused_naming_the_option(monkeypatch, bad):
    monkeypatch.setenv("PRIMUS_REJOIN_MEMORY", bad)
    with pytest.raises(ValueError, match=r"PRIMUS_REJOIN_MEMORY \(--primus-rejoin-memory\)"):
        _memory_copy.active(2)


def test_a_copy_is_the_saved_tensor_only_with_the_owners_crc(tmp_path):
    saved = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "s": np.float64(2.5),
             "flags": np.array([True, False, True]),
             "mine": checkpoint.PerRank(np.array([7, 8], dtype=np.int64))}
    checkpoint.save(saved, 4, dir=tmp_path, rank=0, world_size=1)
    ckpt, _ = _ckpt.load_latest(str(tmp_path))
    assert ckpt.whole_tensors == ["flags", "mine@rank0", "s", "w"]
    w = saved["w"].copy()
    assert ckpt.is_saved_copy("w", [], [], w)
    assert ckpt.is_saved_copy("s", [], [], np.array(2.5))
    assert ckpt.is_saved_copy("flags", [], [], saved["flags"].copy())
    assert ckpt.is_saved_copy("mine@rank0", [], [], np.array([7, 8], dtype=np.int64))
    w.reshape(-1).view(np.uint8)[17] ^= 0x04  # one bit
    assert not ckpt.is_saved_copy("w", [], [], w)
    assert not ckpt.is_saved_copy("w", [], [], saved["w"][:2].copy())  # too short
    assert not ckpt.is_saved_copy("absent", [], [], saved["w"])
    with pytest.raises(ValueError, match="items of 8 bytes"):
        ckpt.is_saved_copy("w", [], [], saved["w"].astype(np.float64))
