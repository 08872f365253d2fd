"""Collectives between the ranks of a Primus job (libprimus-coll, TCP for CPUs).

    from primus import comm
    c = comm.connect()                 # from the environment srun --primus / primus-launch set
    grads = c.allreduce(grads)         # numpy array or torch CPU tensor, in place, summed
    c.broadcast(weights, root=0)
    stop = c.allreduce(np.array([flag]), op="max")[0]

Results are bitwise identical on every rank and from run to run for the same inputs and rank
count. Every connection proves the job secret (PRIMUS_JOB_SECRET, which the first connect() takes
out of the environment, so that programs this rank starts do not inherit it) without sending
it, bound to the job, step and world size. Every call
ends within the timeout (PRIMUS_COLL_TIMEOUT, default 300 s): a dead or hung peer raises
PeerFailure naming it. After the handshake the data travels as sent, unauthenticated, unless
PRIMUS_COLL_INTEGRITY=1 (--primus-coll-integrity): then every 64 KiB carries a tag under a key
of its connection, and data altered on the way raises PeerFailure instead of being used. It is
never encrypted. Communicator.abort(), from any thread, ends a call that a silent peer holds.
"""

import sys

import numpy as np

from . import _coll, _env

__all__ = ["connect", "Communicator", "CollectiveError", "PeerFailure"]

CollectiveError = _coll.CollectiveError
PeerFailure = _coll.PeerFailure

_DTYPES = {
    np.dtype(np.float64): "float64",
    np.dtype(np.float32): "float32",
    np.dtype(np.float16): "float16",
    np.dtype(np.int32): "int32",
    np.dtype(np.int64): "int64",
    np.dtype(np.uint8): "uint8",
}
_OPS = ("sum", "max", "min", "prod")


def _as_buffer(value, what):
    """(numpy view sharing value's memory, dtype name): numpy arrays and torch CPU tensors,
    C-contiguous."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.device.type != "cpu":
            raise TypeError(f"{what}: a {value.device.type} tensor; primus.comm works on CPU "
                            "tensors (use NCCL through torch.distributed for GPU tensors)")
        if not value.is_contiguous():
            raise ValueError(f"{what}: the tensor is not contiguous")
        if value.dtype == torch.bfloat16:
            return value.view(torch.int16).numpy(), "bfloat16"
        array = value.numpy()
    elif isinstance(value, np.ndarray):
        array = value
    else:
        raise TypeError(f"{what}: expected a numpy array or a torch CPU tensor, got "
                        f"{type(value).__name__}")
    name = _DTYPES.get(array.dtype)
    if name is None:
        raise TypeError(f"{what}: dtype {array.dtype} is not supported (expected one of "
                        f"{', '.join(sorted(_DTYPES.values()))}, bfloat16)")
    if not array.flags.c_contiguous:
        raise ValueError(f"{what}: the array is not C-contiguous")
    return array, name


def _check_op(op):
    if op not in _OPS:
        raise ValueError(f"op: expected one of {', '.join(_OPS)}, got {op!r}")
    return op


class Communicator:
    """The ranks of this job. Every rank calls each collective in the same order."""

    def __init__(self, native):
        self._native = native

    @property
    def rank(self):
        return self._native.rank

    @property
    def size(self):
        return self._native.size

    @property
    def integrity(self):
        """Whether every message is authenticated (PRIMUS_COLL_INTEGRITY=1)."""
        return self._native.integrity

    def allreduce(self, data, op="sum"):
        """Reduces `data` over every rank, in place; returns it."""
        op = _check_op(op)
        array, dtype = _as_buffer(data, "allreduce")
        if not array.flags.writeable:
            raise ValueError("allreduce: the array is read-only")
        self._native.allreduce(array, dtype, op)
        return data

    def broadcast(self, data, root=0):
        """Replaces `data` with root's, in place; returns it."""
        array, dtype = _as_buffer(data, "broadcast")
        self._native.broadcast(array, dtype, int(root))
        return data

    def send(self, data, peer):
        """Sends `data` to rank `peer`, which receives it with recv(buffer, this rank): for one
        rank's data to a few others, where a broadcast would reach every rank."""
        array, dtype = _as_buffer(data, "send")
        self._native.send(array, dtype, int(peer))

    def recv(self, data, peer):
        """Fills `data` (of the size sent) with what rank `peer` sends; returns it."""
        array, dtype = _as_buffer(data, "recv")
        if not array.flags.writeable:
            raise ValueError("recv: the array is read-only")
        self._native.recv(array, dtype, int(peer))
        return data

    def allgather(self, data):
        """A new array of shape (size, *data.shape): every rank's `data` in rank order."""
        array, dtype = _as_buffer(data, "allgather")
        out = np.empty((self.size,) + array.shape, dtype=array.dtype)
        self._native.allgather(array, out, dtype)
        return out

    def reduce_scatter(self, data, op="sum"):
        """`data` has shape (size, ...): returns the reduction over ranks of data[rank]."""
        op = _check_op(op)
        array, dtype = _as_buffer(data, "reduce_scatter")
        if array.ndim == 0 or array.shape[0] != self.size:
            raise ValueError(f"reduce_scatter: expected a first dimension of {self.size} (the "
                             f"number of ranks), got shape {array.shape}")
        out = np.empty(array.shape[1:], dtype=array.dtype)
        self._native.reduce_scatter(array, out, dtype, op)
        return out

    def barrier(self):
        self._native.barrier()

    def abort(self, reason=""):
        """Ends this communicator, from any thread: a collective waiting in it on another thread
        raises PeerFailure ("communicator aborted: REASON") within milliseconds, and so does
        every later call; the other ranks see this one leave at once. For a rank told from
        outside (the launcher) that a peer failed, which would otherwise hold the call for the
        whole timeout. Never blocks; a second abort keeps the first reason. Make a new
        communicator to go on."""
        self._native.abort(str(reason))

    @property
    def aborted(self):
        """Whether abort() was called."""
        return self._native.aborted


def connect(timeout=None):
    """A communicator from the environment: PRIMUS_BOOTSTRAP (pmix or tcp; tcp reads RANK,
    WORLD_SIZE, MASTER_ADDR and PRIMUS_PORT), PRIMUS_JOB_SECRET. `timeout` (seconds) overrides
    PRIMUS_COLL_TIMEOUT."""
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout: expected a positive number of seconds, got {timeout!r}")
    return Communicator(_coll.connect(float(timeout or 0), _env.job_secret()))
