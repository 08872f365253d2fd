"""The committed step in memory (issue 43; docs/architecture.md, "The committed step in memory").

With --primus-recover=rejoin every rank keeps the host copy of its newest committed checkpoint:
what its last asynchronous save copied to write in the background (the tensors it wrote) and
copies of the replicated tensors that their owner wrote. A copy is held from the moment its
step's commit is known on this rank until the next save's commit replaces it; the save in
between copies into a second set of buffers, so that the copy held is never written over. The
two sets are bounded by PRIMUS_REJOIN_MEMORY (--primus-rejoin-memory, MiB per rank): a state
whose two copies would not fit turns the copy off for the process, with a warning.

At a rejoin every rank loads the new generation's resume point at once (restore()):
1. Each rank that holds a copy of that very step checks its copy of every replicated tensor
   against the CRC-32C its owner computed (the manifest's).
2. One allreduce of a table (rank x tensor: no copy, fails, verifies) tells every rank, for
   each tensor, the lowest rank whose copy verifies: the source. The source sends the tensor
   (primus.comm's point-to-point messages, which a peer's failure aborts) to the ranks whose
   copy did not verify, or broadcasts it where they are most of the ranks; each of them checks
   what it got against the same CRC-32C, and a tensor that fails is read from the file instead.
   A rank whose copy verified restores from it where it lies. A copy that fails is named in a
   warning where no lower rank's verified (a rank's BatchNorm statistics are its own: only the
   owner's were saved, so another rank's copy of them never verifies).
3. A rank's own tensors (PerRank) come from its own copy where that verifies.
The rest comes from the checkpoint's files, verified as always: the replacement's RNG state and
data cursor (small), the tensors no copy of which verifies, and everything when no rank holds
a copy. Only the checkpoint every rank resumes from (the launcher's choice: committed, and
verified) is restored, and a copy is used only for that step and only where its bytes are the
bytes saved."""

import os
import time
import warnings

import numpy as np

from . import _env
from ._tree import STORAGE

_MIB = 1 << 20
_MAX_MIB = 1 << 20  # 1 TiB, the option's own bound


class _Copy:
    """One save's host copy: its checkpoint root and step, the arrays by tensor name, the set of
    buffers they live in, and their bytes."""

    __slots__ = ("root", "step", "arrays", "buffers", "bytes")

    def __init__(self, root, step, arrays, buffers):
        self.root, self.step, self.arrays, self.buffers = root, step, arrays, buffers
        self.bytes = sum(int(a.nbytes) for a in arrays.values())


_buffers = [{}, {}]  # two sets of reusable buffers (flatten's staging), by tensor path
_held = None  # the copy of the newest committed step
_writing = None  # the copy of the save in flight
_off = None  # why the copy is off in this process (said once), or None
_wanted = False  # a loop that can rejoin runs in this process (want())
last_restore = None  # what the last restore() did (for the "rejoinable" event)


def limit_bytes():
    """PRIMUS_REJOIN_MEMORY in bytes (0: off); ValueError naming it when it is not a count."""
    value = _env.text("PRIMUS_REJOIN_MEMORY")
    try:
        mib = int(value)
    except (TypeError, ValueError):
        mib = -1
    if not 0 <= mib <= _MAX_MIB:
        raise ValueError(f"PRIMUS_REJOIN_MEMORY (--primus-rejoin-memory): expected MiB from 0 "
                         f"(off) to {_MAX_MIB}, got {value!r}")
    return mib * _MIB


def _rejoin_mode():
    return (_env.text("PRIMUS_RECOVER") or "restart").lower() == "rejoin"


def want():
    """This process runs a loop that can rejoin (primus.train under --primus-recover=rejoin):
    its saves keep their copy from now on."""
    global _wanted
    _wanted = True


def active(world_size):
    """Whether this process keeps a copy of its saves: a loop that can rejoin asked for it
    (want()), above one rank, and the copy is not off."""
    return _wanted and world_size > 1 and _off is None and limit_bytes() > 0


def restore_applies(world_size):
    """Whether a load of the resume point exchanges copies: in a generation after the first
    (a rejoin), the same answer on every rank (it depends on the job's environment alone)."""
    from . import _rejoin

    return world_size > 1 and _rejoin_mode() and limit_bytes() > 0 and _rejoin.generation() > 0


def staging():
    """The set of buffers the next save copies into: never the one the held copy lives in."""
    taken = _held.buffers if _held is not None else None
    return _buffers[1] if _buffers[0] is taken else _buffers[0]


def saving(root, step, leaves, kept, buffers):
    """A save copied `leaves` (what it writes) and `kept` (the replicated tensors it does not
    write) into `buffers`: its copy, held once the step commits. Turns the copy off when two of
    them would not fit under the limit."""
    global _writing, _off, _held
    arrays = {leaf.name: leaf.array for leaf in list(leaves) + list(kept)
              if leaf.global_shape is None}  # a Shard's rows are read from the file
    copy = _Copy(os.path.realpath(root), step, arrays, buffers)
    limit = limit_bytes()
    if 2 * copy.bytes > limit:
        _off = (f"two copies of the state ({2 * copy.bytes / _MIB:.0f} MiB) are over "
                f"--primus-rejoin-memory ({limit // _MIB} MiB)")
        warnings.warn(f"primus.checkpoint: the committed step is not kept in memory: {_off}; a "
                      "rejoin reads the checkpoint's files", RuntimeWarning, stacklevel=3)
        release()
        return
    _writing = copy


def committed(root, step):
    """The save of `step` under `root` committed: its copy is the one held from now on."""
    global _writing, _held
    if _writing is not None and _writing.step == step and \
            _writing.root == os.path.realpath(root):
        _held, _writing = _writing, None


def discarded():
    """The save in flight will never commit (a rejoin): its copy is dropped."""
    global _writing
    _writing = None


def release():
    """Frees both sets of buffers and the copies in them."""
    global _held, _writing
    _held = _writing = None
    for buffers in _buffers:
        buffers.clear()


def held_bytes():
    """The bytes of the copy held now (0 when none)."""
    return _held.bytes if _held is not None else 0


def _per_rank(name):
    head, sep, tail = name.rpartition("@rank")
    return bool(head and sep and tail.isdigit())


def _verified(checkpoint, held, name, tensors):
    """The held array of `name` when it is there with the saved shape and its bytes match the
    CRC-32C saved for it, else None. Checked where it lies (no copy)."""
    array = held.arrays.get(name)
    dtype, shape = tensors[name]
    if array is None or list(array.shape) != list(shape) or \
            array.dtype.itemsize != STORAGE[dtype].itemsize:
        return None
    return array if checkpoint.is_saved_copy(name, [], [], array.view(STORAGE[dtype])) else None


def _empty(tensors, name):
    dtype, shape = tensors[name]
    return np.empty(shape, dtype=STORAGE[dtype])


def _flat_bytes(array):
    return array.reshape(-1).view(np.uint8)


_NONE, _FAILS, _VERIFIES = 0, 1, 2  # what a rank's copy of a tensor is, in the exchange


def restore(checkpoint, rank, world_size, comm):
    """Every rank at once, at a rejoin: {tensor name: array} of the resume point's whole tensors
    that this rank restores without its file (from its own copy or the source's), each verified
    against its saved CRC-32C. The rest is read from the file by the caller.

    Each rank that holds a copy of that very step checks its copy of every replicated tensor
    where it lies; one allreduce of a table (rank x tensor: none, fails, verifies) tells every
    rank, for each tensor, the lowest rank whose copy verifies: the source. The source sends the
    tensor to the ranks whose copy did not verify (the replacement, mostly), or broadcasts it
    where they are most of the ranks; the others restore from their own verified copy. A copy
    that differs is not always damage (a rank's BatchNorm statistics are its own, and only the
    owner's were saved), so a rank names its failed copies in a warning only where no lower
    rank had one that verified."""
    global last_restore
    started = time.perf_counter()
    root = os.path.realpath(os.path.dirname(os.path.normpath(checkpoint.dir)))
    held = _held if _held is not None and _held.step == checkpoint.step and \
        _held.root == root else None
    whole, tensors = checkpoint.whole_tensors, checkpoint.tensors
    replicated = [name for name in whole if not _per_rank(name)]
    mine = {}  # this rank's verified copies, by name
    table = np.zeros((world_size, max(1, len(replicated))), dtype=np.uint8)
    if held is not None:
        for i, name in enumerate(replicated):
            array = _verified(checkpoint, held, name, tensors)
            table[rank, i] = _FAILS if array is None else _VERIFIES
            if array is not None:
                mine[name] = array
    comm.allreduce(table, op="max")
    filled, received, rejected, in_line = {}, 0, [], []
    sources = set()
    for i, name in enumerate(replicated):
        column = table[:, i]
        verified = np.flatnonzero(column == _VERIFIES)
        if column[rank] == _FAILS and not (verified.size and verified[0] < rank):
            in_line.append(name)
        if not verified.size:
            continue  # read from the file
        source = int(verified[0])
        sources.add(source)
        needers = [r for r in range(world_size) if column[r] != _VERIFIES]
        if name in mine and rank not in needers:
            # Its own verified copy, as it lies: the restore hands it to load_state_dict, which
            # copies it (the held copy is checked again before any later use).
            ours = mine[name].view(STORAGE[tensors[name][0]])
            if 2 * len(needers) > world_size:  # most ranks need it: one broadcast
                # The source's buffer is only read; another rank's arrival goes elsewhere, so
                # that nothing but a save writes into a held copy.
                sent = ours if rank == source else _empty(tensors, name)
                comm.broadcast(_flat_bytes(sent), root=source)
            elif rank == source:
                for needer in needers:
                    comm.send(_flat_bytes(ours), needer)
            filled[name] = ours
            continue
        out = _empty(tensors, name)
        if out.nbytes and 2 * len(needers) > world_size:
            comm.broadcast(_flat_bytes(out), root=source)
        elif out.nbytes:
            comm.recv(_flat_bytes(out), source)
        if checkpoint.is_saved_copy(name, [], [], out):
            filled[name] = out
            received += out.nbytes
        else:
            rejected.append(name)
    if in_line:
        warnings.warn(f"primus.checkpoint: rank {rank}'s copy in memory of step "
                      f"{checkpoint.step} does not verify for {len(in_line)} tensor(s) (the "
                      f"first: {in_line[0]!r} differs from its saved CRC-32C): the next rank's "
                      "copy or the file is used", RuntimeWarning, stacklevel=2)
    if rejected:
        warnings.warn(f"primus.checkpoint: {len(rejected)} tensor(s) sent to rank {rank} do "
                      f"not verify (the first: {rejected[0]!r}): they are read from the file",
                      RuntimeWarning, stacklevel=2)
    from_memory = sum(out.nbytes for out in filled.values()) - received
    if held is not None:
        for name in whole:
            if _per_rank(name) and name.endswith(f"@rank{rank}"):
                array = _verified(checkpoint, held, name, tensors)
                if array is not None:
                    filled[name] = array.view(STORAGE[tensors[name][0]])
                    from_memory += array.nbytes
    last_restore = {"sources": sorted(sources), "memory_bytes": int(from_memory),
                    "peer_bytes": int(received), "failed_copies": len(in_line),
                    "seconds": time.perf_counter() - started}
    return filled
