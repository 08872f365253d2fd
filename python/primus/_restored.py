"""A committed checkpoint read back for one rank: the Restored that primus.checkpoint.load()
returns, and read(), which builds it from the checkpoint's files (or from tensors already restored
from memory at a rejoin, primus._memory_copy)."""

import concurrent.futures
import json

import numpy as np

from . import _control, _rng
from ._ckpt import CorruptCheckpoint
from ._tree import STORAGE, unflatten

TREE = "primus.tree"
META = "primus.meta"


class Restored:
    """A loaded checkpoint: .step, .epoch, .data_cursor, .metadata, .state (the saved tree, with
    numpy arrays and torch tensors as saved), .path, .saved_world_size, .skipped (the newer
    checkpoints that did not verify, and why)."""

    def __init__(self, checkpoint, state, meta, rng_values, skipped):
        self.step = checkpoint.step
        self.path = checkpoint.dir
        self.saved_world_size = checkpoint.world_size
        self.state = state
        self.epoch = meta.get("epoch")
        self.data_cursor = meta.get("data_cursor")
        self.metadata = meta.get("metadata")
        self.skipped = skipped
        self._rng = rng_values

    def restore_rng(self):
        """Puts Python's, numpy's and torch's generators back as this rank saved them."""
        _rng.restore(self._rng)

    def __repr__(self):
        return f"Restored(step={self.step}, path={self.path!r})"


def read(checkpoint, skipped, rank, world_size, restore_rng, filled=None):
    """The Restored of `checkpoint` for this rank; `filled`: {name: array} of whole tensors
    already restored and verified (primus._memory_copy), read from the files otherwise."""
    # A rank beyond the saved world takes rank 0's tree and state (data-parallel replicas).
    source_rank = rank if rank < checkpoint.world_size else 0
    values = checkpoint.state(source_rank)
    tensors = checkpoint.tensors

    def read(node, name, mode, where):
        if mode == "per_rank" and name not in tensors and rank >= checkpoint.world_size:
            return None  # a rank the saved job did not have
        if name not in tensors:
            raise CorruptCheckpoint(f"{checkpoint.dir}: tensor {name!r} is missing (saved by "
                                    f"{checkpoint.world_size} ranks, loading rank {rank})")
        dtype, global_shape = tensors[name]
        out = filled.pop(name, None) if filled and mode != "rows" else None
        if out is not None:
            return out.view(np.bool_) if dtype == "bool" else out
        if mode == "rows":
            this_rank, world = where
            rows = global_shape[0] if global_shape else 0
            begin, end = rows * this_rank // world, rows * (this_rank + 1) // world
            offset = [begin] + [0] * (len(global_shape) - 1)
            shape = [end - begin] + list(global_shape[1:])
        else:
            offset, shape = [], []
        out = np.empty(shape if mode == "rows" else global_shape, dtype=STORAGE[dtype])
        if not global_shape:
            # A 0-d tensor may become a numpy scalar at once (a copy of its value): read it now.
            checkpoint.read_into(name, offset, shape, out)
        elif mode != "rows":
            # Whole tensors are read once the tree is built, all in one call: each rank file in
            # one pass, in its order, where a call per tensor let the reads stop at every
            # tensor's end (Checkpoint::read_whole). np.empty touches no page meanwhile.
            whole.append((name, out))
        else:
            # Filled in the background, in order, by one thread (the extension releases the GIL
            # and computes each piece's checksum on a second thread while it reads the next).
            reads.append(pool.submit(checkpoint.read_into, name, offset, shape, out))
        if dtype == "bool":
            out = out.view(np.bool_)
        return out

    tree_text = values.get(TREE)
    if tree_text is None:
        raise CorruptCheckpoint(f"{checkpoint.dir}: rank {source_rank} saved no state tree")
    reads, whole = [], []
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        try:
            state = unflatten(json.loads(tree_text), read, rank, world_size)
            if whole:
                reads.append(pool.submit(checkpoint.read_whole, whole))
        finally:
            concurrent.futures.wait(reads)
            # `read` stays in a reference cycle (unflatten's recursive builder) until the next
            # collection: it must not keep the arrays alive with it (a warm load of 1 GiB after
            # another's arrays were dropped took 1.0 s instead of 0.2: the new arrays could not
            # take the pages the old ones held, and came from memory the VM gave back).
            whole.clear()
            checkpoint.close()
    for future in reads:
        future.result()  # raises the first failed read (a CorruptCheckpoint names the dataset)
    meta = json.loads(values.get(META, "{}"))
    rng_values = {k: v for k, v in values.items() if k.startswith(_rng.PREFIX)}
    restored = Restored(checkpoint, state, meta, rng_values, list(skipped))
    if restore_rng:
        restored.restore_rng()
    _control.resumed_at(restored.step)
    return restored
