"""A checkpoint's state as a tree: nested dicts, lists and tuples whose leaves are tensors
(numpy arrays, torch tensors) or plain values. flatten() turns it into named tensors plus a JSON
description of the structure; unflatten() builds it back."""

import os
import sys

import numpy as np

_NUMPY_DTYPES = {
    np.dtype(np.float64): "float64",
    np.dtype(np.float32): "float32",
    np.dtype(np.float16): "float16",
    np.dtype(np.int8): "int8",
    np.dtype(np.int16): "int16",
    np.dtype(np.int32): "int32",
    np.dtype(np.int64): "int64",
    np.dtype(np.uint8): "uint8",
    np.dtype(np.bool_): "bool",
}
# numpy's dtype for each stored dtype (bfloat16 travels as its raw bits).
STORAGE = {name: dtype for dtype, name in _NUMPY_DTYPES.items()}
STORAGE["bfloat16"] = np.dtype(np.int16)


class Shard:
    """A leaf: this rank's part of a tensor sharded along its first dimension (or any box).

    `global_shape` is the whole tensor's shape and `offset` where this part starts. On load
    each rank gets rows [rows * rank // world, rows * (rank + 1) // world) of the whole tensor,
    for the world size it then runs with."""

    def __init__(self, tensor, global_shape, offset):
        self.tensor = tensor
        self.global_shape = [int(d) for d in global_shape]
        self.offset = [int(d) for d in offset]


class PerRank:
    """A leaf that differs between ranks (each rank saves and loads its own; a rank beyond the
    saved world size gets None)."""

    def __init__(self, tensor):
        self.tensor = tensor


class Leaf:
    __slots__ = ("name", "array", "dtype", "global_shape", "offset")

    def __init__(self, name, array, dtype, global_shape=None, offset=None):
        self.name, self.array, self.dtype = name, array, dtype
        self.global_shape, self.offset = global_shape, offset


def _torch():
    return sys.modules.get("torch")


def _is_torch_tensor(value):
    torch = _torch()
    return torch is not None and isinstance(value, torch.Tensor)


# Host copies of big tensors run on a few threads (numpy releases the GIL while it copies): one
# core's memcpy does not reach the memory bandwidth of a node. Pieces below _POOL_MIN_BYTES are
# copied on the caller's thread: handing one to a thread costs more than copying it (a small
# model's 46 tensors took 5-8 ms through the pool, under 1 ms inline).
_COPY_PIECE_BYTES = 16 << 20
_POOL_MIN_BYTES = 1 << 20
_copy_pool = None


def io_threads():
    """How many threads copy or read tensors at once: the CPUs this process may run on, up to 4."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))


def _run_copies(copies):
    """Copies each (destination, source) pair of equal-shaped C-contiguous arrays."""
    global _copy_pool
    pieces = []
    for destination, source in copies:
        flat_out, flat_in = destination.reshape(-1), source.reshape(-1)
        step = max(1, _COPY_PIECE_BYTES // max(1, source.itemsize))
        for start in range(0, flat_in.size, step):
            pieces.append((flat_out[start:start + step], flat_in[start:start + step]))
    big = [(d, s) for d, s in pieces if s.nbytes >= _POOL_MIN_BYTES]
    threads = io_threads()
    if threads == 1 or len(big) < 2:
        big = []
    if big and _copy_pool is None:
        import concurrent.futures

        _copy_pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads,
                                                           thread_name_prefix="primus-copy")
    futures = [_copy_pool.submit(np.copyto, d, s) for d, s in big]
    for destination, source in pieces:
        if source.nbytes < _POOL_MIN_BYTES or not futures:
            np.copyto(destination, source)
    for future in futures:
        future.result()


def _copy(array, path, staging, copies):
    """A copy of array, into staging[path] when it has the same shape and dtype (a buffer whose
    pages are already mapped copies about twice as fast as a new one). The copy itself is added
    to `copies`, for _run_copies()."""
    if staging is None:
        buffer = np.empty_like(array)
    else:
        buffer = staging.get(path)
        if buffer is None or buffer.shape != array.shape or buffer.dtype != array.dtype:
            buffer = np.empty_like(array)
            staging[path] = buffer
    copies.append((buffer, array))
    return buffer


def _as_array(value, path):
    """(C-contiguous numpy array on the host, stored dtype name, source kind, torch dtype, whether
    the array is already a private copy)."""
    copied = False
    if _is_torch_tensor(value):
        torch = _torch()
        tensor = value.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()  # a copy already
            copied = True
        tensor = tensor.contiguous()
        torch_dtype = str(tensor.dtype).replace("torch.", "")
        if tensor.dtype == torch.bfloat16:
            array, dtype = tensor.view(torch.int16).numpy(), "bfloat16"
        else:
            array = tensor.numpy()
            dtype = _NUMPY_DTYPES.get(array.dtype)
        kind = "torch"
    else:
        array = np.asarray(value)
        dtype = _NUMPY_DTYPES.get(array.dtype)
        torch_dtype = None
        kind = "numpy" if isinstance(value, np.ndarray) else "scalar"
    if dtype is None:
        raise TypeError(f"{path}: dtype {array.dtype} cannot be checkpointed (expected one of "
                        f"{', '.join(sorted(STORAGE))})")
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)  # (never for 0-d arrays: it would make them 1-d)
        copied = True
    return array, dtype, kind, torch_dtype, copied


_TORCH_DTYPES = {}  # torch dtype -> (stored dtype name, torch dtype name)


def _torch_dtype_names(tensor, path):
    """What the tree records of a torch tensor's dtype, without converting the tensor (for the
    replicated tensors a rank other than their owner does not write)."""
    names = _TORCH_DTYPES.get(tensor.dtype)
    if names is None:
        _, dtype, _, torch_dtype, _ = _as_array(_torch().empty(0, dtype=tensor.dtype), path)
        names = _TORCH_DTYPES[tensor.dtype] = (dtype, torch_dtype)
    return names


def flatten(state, rank, owner, copy=False, staging=None, kept=None):
    """(tree, leaves): the JSON-able structure and the tensors this rank writes. With copy, the
    tensors are copied (into the reusable buffers of `staging`, a dict, when given). With a list
    `kept` (and copy), the replicated tensors that the owner writes, not this rank, are copied
    too and appended to it (the committed step in memory, primus._memory_copy)."""
    leaves = []
    names = set()
    copies = []

    def add_leaf(leaf, where, copied):
        if copy and not copied:
            leaf.array = _copy(leaf.array, where, staging, copies)
        leaves.append(leaf)

    def keep_leaf(name, value, where):
        array, dtype, _, _, copied = _as_array(value, where)
        if not copied:
            array = _copy(array, where, staging, copies)
        kept.append(Leaf(name, array, dtype))

    def name_of(path):
        name = "/".join(path)
        if not path or name in names:
            raise ValueError(f"{name or '<root>'}: two entries of the state map to the same "
                             "tensor name (a key and its string form?)")
        names.add(name)
        return name

    torch = _torch()
    tensor_types = (torch.Tensor,) if torch is not None else ()

    def walk(value, path):
        # The walk runs at every checkpoint over every entry of the state (an optimizer's
        # included): the checks are ordered by how common they are, and `where` is only
        # spelled out where it is used.
        if isinstance(value, dict):
            items = []
            for key, child in value.items():
                if isinstance(key, str):
                    items.append(["s", key, walk(child, [*path, key])])
                elif isinstance(key, int) and not isinstance(key, bool):
                    items.append(["i", key, walk(child, [*path, str(key)])])
                else:
                    raise TypeError(f"{'/'.join(path) or '<root>'}: dict keys must be str or "
                                    f"int, got {key!r}")
            return {"t": "dict", "items": items}
        if isinstance(value, tensor_types):
            if rank != owner:  # replicated, written by the owner
                dtype, torch_dtype = _torch_dtype_names(value, "/".join(path) or "<root>")
                node = {"t": "tensor", "kind": "torch", "dtype": dtype,
                        "torch_dtype": torch_dtype, "layout": "replicated",
                        "name": name_of(path)}
                if copy and kept is not None:
                    keep_leaf(node["name"], value, "/".join(path) or "<root>")
                return node
        elif value is None or (isinstance(value, (bool, int, float, str))
                               and not isinstance(value, np.generic)):  # np.float64 is a float
            return {"t": "value", "v": value}
        elif isinstance(value, (list, tuple)):
            kind = "list" if isinstance(value, list) else "tuple"
            return {"t": kind, "items": [walk(v, [*path, str(i)]) for i, v in enumerate(value)]}
        where = "/".join(path) or "<root>"
        if isinstance(value, (Shard, PerRank, np.ndarray, np.generic, *tensor_types)):
            inner = value.tensor if isinstance(value, (Shard, PerRank)) else value
            array, dtype, kind, torch_dtype, copied = _as_array(inner, where)
            node = {"t": "tensor", "kind": kind, "dtype": dtype, "torch_dtype": torch_dtype}
            if isinstance(value, Shard):
                node["layout"] = "shard"
                node["name"] = name_of(path)
                if len(value.global_shape) != array.ndim or len(value.offset) != array.ndim:
                    raise ValueError(f"{where}: Shard needs global_shape and offset of "
                                     f"{array.ndim} dimensions")
                add_leaf(Leaf(node["name"], array, dtype, value.global_shape, value.offset), where,
                         copied)
            elif isinstance(value, PerRank):
                node["layout"] = "per_rank"
                node["name"] = name_of(path)
                add_leaf(Leaf(f"{node['name']}@rank{rank}", array, dtype), where, copied)
            else:
                node["layout"] = "replicated"
                node["name"] = name_of(path)
                if rank == owner:
                    add_leaf(Leaf(node["name"], array, dtype), where, copied)
                elif copy and kept is not None:
                    keep_leaf(node["name"], inner, where)
            return node
        raise TypeError(f"{where}: cannot checkpoint a {type(value).__name__} (expected dicts, "
                        "lists, tuples, numpy arrays, torch tensors, numbers, strings, None)")

    tree = walk(state, [])
    _run_copies(copies)
    return tree, leaves


def unflatten(tree, read, rank, world_size):
    """Builds the state back; read(node, name, offset, shape) returns the numpy array."""

    def build(node, path):
        kind = node.get("t")
        if kind == "dict":
            return {(int(key) if key_type == "i" else key): build(child, path + [str(key)])
                    for key_type, key, child in node["items"]}
        if kind in ("list", "tuple"):
            items = [build(child, path + [str(i)]) for i, child in enumerate(node["items"])]
            return items if kind == "list" else tuple(items)
        if kind == "value":
            return node["v"]
        if kind == "tensor":
            name = node["name"]
            if node["layout"] == "per_rank":
                array = read(node, f"{name}@rank{rank}", "per_rank", None)
                if array is None:
                    return None
            elif node["layout"] == "shard":
                array = read(node, name, "rows", (rank, world_size))
            else:
                array = read(node, name, None, None)
            return _restore_kind(node, array)
        raise ValueError(f"{'/'.join(path)}: unknown node in the checkpoint's tree")

    return build(tree, [])


def _restore_kind(node, array):
    if node["kind"] == "torch":
        torch = _torch()
        if torch is None:
            import torch  # noqa: F401  (the state held torch tensors: give them back as such)
            torch = sys.modules["torch"]
        tensor = torch.from_numpy(array)
        if node["dtype"] == "bfloat16":
            tensor = tensor.view(torch.bfloat16)
        return tensor
    if node["kind"] == "scalar":
        return array[()] if array.ndim == 0 else array
    return array
