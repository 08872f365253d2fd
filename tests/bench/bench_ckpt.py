#!/usr/bin/env python3
"""Checkpoint speed against its baselines, measured in one run on one file system.

One writer process, SIZE_MIB (default 1024) MiB of float32 tensors in 16 tensors:
  save    primus.checkpoint.save (fsync and commit included) vs raw write()+fsync() of the same
          bytes vs torch.save()+fsync()
  load    primus.checkpoint.load (every tensor read and CRC-checked) vs a raw read of the same
          bytes, with a cold page cache (drop_caches before each, as root) and warm
  async   how long save(blocking=False) blocks the caller, against a synchronous save
Each figure is the median of ROUNDS (default 5) interleaved rounds; the three savers take turns
going first, and so do the two readers. Goals (ratios of medians):
  save >= 0.9 x raw write()+fsync() and >= 1.0 x torch.save()+fsync();
  cold load >= 0.9 x a cold raw read; async save blocks the caller <= 0.10 of a synchronous save.
"Cold" is measured only when the page cache was dropped and mincore() shows the files to be read
no longer resident (at most 1% of their pages); otherwise no cold figure is printed. Exits 1 when
a goal is missed or a side is missing (cold not measured, torch not importable), naming it and by
how much. Usage: bench_ckpt.py [DIR] (default: a new directory under /var/tmp)
Environment: PRIMUS_BENCH_CKPT_MIB, PRIMUS_BENCH_CKPT_ROUNDS."""

import ctypes
import ctypes.util
import mmap
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

from primus import checkpoint

TENSORS = 16
DROP_CACHES = "/proc/sys/vm/drop_caches"
RESIDENT_LIMIT = 0.01  # of a file's pages still in the page cache after a drop: then not cold
# goal name: (measured key, baseline key, goal); the ratio is baseline time / measured time.
GOALS = {
    "primus save vs raw write()+fsync()": ("save", "raw_save", 0.9),
    "primus save vs torch.save()+fsync()": ("save", "torch_save", 1.0),
    "primus load vs raw read, cold": ("load_cold", "raw_load_cold", 0.9),
}
ASYNC_BLOCK_GOAL = 0.10  # async save: caller blocked, as a share of a synchronous save

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]


def resident_pages(path):
    """(resident, total) pages of path in the page cache, by mincore() over a mapping of it (a
    mapping alone reads nothing)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0, 0
    page = os.sysconf("SC_PAGE_SIZE")
    pages = (size + page - 1) // page
    fd = os.open(path, os.O_RDONLY)
    try:
        address = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap {path}: {os.strerror(ctypes.get_errno())}")
        try:
            vector = (ctypes.c_ubyte * pages)()
            if _libc.mincore(address, size, vector) != 0:
                raise OSError(ctypes.get_errno(),
                              f"mincore {path}: {os.strerror(ctypes.get_errno())}")
            return sum(v & 1 for v in vector), pages
        finally:
            _libc.munmap(address, size)
    finally:
        os.close(fd)


def files_under(*paths):
    for path in paths:
        if os.path.isdir(path):
            for root, _, names in os.walk(path):
                yield from (os.path.join(root, name) for name in names)
        elif os.path.exists(path):
            yield path


def drop_caches(*paths):
    """Drops the page cache (root only) and checks that none of the files under paths is still
    in it. Returns None when they are cold, else why not."""
    os.sync()
    try:
        with open(DROP_CACHES, "w") as f:
            f.write("3\n")
    except OSError as e:
        return f"cannot drop the page cache ({DROP_CACHES}: {e.strerror}; run as root with a " \
            "writable /proc/sys)"
    resident = total = 0
    try:
        for path in files_under(*paths):
            r, t = resident_pages(path)
            resident, total = resident + r, total + t
    except OSError as e:
        return f"cannot check what is in the page cache: {e}"
    if total and resident > RESIDENT_LIMIT * total:
        return f"the page cache was dropped but {resident} of {total} pages " \
            f"({100 * resident / total:.0f}%) of {' and '.join(paths)} stayed resident (at " \
            f"most {100 * RESIDENT_LIMIT:.0f}% allowed; a tmpfs keeps them all)"
    return None


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def raw_save(path, arrays):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for a in arrays.values():
            view = memoryview(a).cast("B")
            done = 0
            while done < len(view):
                done += os.write(fd, view[done:])
        os.fsync(fd)
    finally:
        os.close(fd)


def raw_load(path, arrays):
    out = {}
    with open(path, "rb", buffering=0) as f:
        for name, a in arrays.items():
            buffer = np.empty_like(a)
            view = memoryview(buffer).cast("B")
            done = 0
            while done < len(view):
                done += f.readinto(view[done:])
            out[name] = buffer
    return out


def torch_save(path, tensors):
    import torch

    with open(path, "wb") as f:
        torch.save(tensors, f)
        f.flush()
        os.fsync(f.fileno())


def bench(base, size_mib, rounds):
    """Measures, prints, and returns the exit status."""
    per_tensor = size_mib * (1 << 20) // TENSORS // 4
    rng = np.random.default_rng(0)
    arrays = {f"layer{i}.weight": rng.random(per_tensor, dtype=np.float32).reshape(-1, 1024)
              for i in range(TENSORS)}
    total = sum(a.nbytes for a in arrays.values())
    missing = []
    try:
        import torch

        tensors = {k: torch.from_numpy(v) for k, v in arrays.items()}
    except ImportError as e:
        tensors = None
        missing.append(f"torch.save baseline: torch cannot be imported ({e})")

    ckpt_dir = os.path.join(base, "ckpt")
    raw_path = os.path.join(base, "raw.bin")
    torch_path = os.path.join(base, "torch.pt")
    times = {k: [] for k in ("save", "raw_save", "torch_save", "load_cold", "raw_load_cold",
                             "load_warm", "raw_load_warm", "async_block", "async_total")}
    not_cold = None  # why the cold loads were not measured

    def fresh(*paths):
        # Every writer starts from nothing: removing the previous output is not timed.
        for path in paths:
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.unlink(path)
        os.sync()

    def save_raw():
        fresh(raw_path)
        times["raw_save"].append(timed(lambda: raw_save(raw_path, arrays))[0])

    def save_primus():
        fresh(ckpt_dir)
        times["save"].append(timed(lambda: checkpoint.save(arrays, r, dir=ckpt_dir, rng=False))[0])

    def save_torch():
        fresh(torch_path)
        times["torch_save"].append(timed(lambda: torch_save(torch_path, tensors))[0])

    def load_primus_timed():
        """The time checkpoint.load takes; what it loaded is checked outside the timing."""
        t, restored = timed(lambda: checkpoint.load(ckpt_dir))
        assert restored.step == r and np.array_equal(restored.state["layer3.weight"],
                                                     arrays["layer3.weight"])
        return t

    def load_raw_cold():
        nonlocal not_cold
        not_cold = not_cold or drop_caches(raw_path)
        if not not_cold:
            times["raw_load_cold"].append(timed(lambda: raw_load(raw_path, arrays))[0])

    def load_primus_cold():
        nonlocal not_cold
        not_cold = not_cold or drop_caches(ckpt_dir)
        if not not_cold:
            times["load_cold"].append(load_primus_timed())

    def load_raw_warm():
        raw_load(raw_path, arrays)  # into the page cache
        times["raw_load_warm"].append(timed(lambda: raw_load(raw_path, arrays))[0])

    def load_primus_warm():
        checkpoint.load(ckpt_dir)  # into the page cache
        times["load_warm"].append(load_primus_timed())

    savers = [save_raw, save_primus] + ([save_torch] if tensors is not None else [])
    for r in range(rounds):
        # Take turns going first: this VM's disk is noisy and order-dependent.
        for step in savers[r % len(savers):] + savers[:r % len(savers)]:
            step()
        for pair in ((load_raw_cold, load_primus_cold), (load_raw_warm, load_primus_warm)):
            for step in (pair if r % 2 == 0 else pair[::-1]):
                step()
        fresh(ckpt_dir)
        start = time.perf_counter()
        pending = checkpoint.save(arrays, 100 + r, dir=ckpt_dir, rng=False, blocking=False)
        times["async_block"].append(time.perf_counter() - start)
        pending.wait()
        times["async_total"].append(time.perf_counter() - start)
    fresh(ckpt_dir, raw_path, torch_path)

    m = {k: statistics.median(v) for k, v in times.items() if v}
    gib = total / (1 << 30)
    failures = []

    def row(label, key, base_key=None, goal_name=None):
        """Prints a median, its ratio to base_key's (base time / this time) and, with goal_name,
        the verdict against that goal."""
        if goal_name:
            base_key, goal = GOALS[goal_name][1:]
        if key not in m:
            print(f"  {label:<40} not measured")
            return
        line = f"  {label:<40} {m[key]:8.3f} s  {gib / m[key]:7.2f} GiB/s"
        if base_key in m:
            ratio = m[base_key] / m[key]
            line += f"  ratio {ratio:5.2f}"
            if goal_name and ratio >= goal:
                line += f" (goal >= {goal}) goal met"
            elif goal_name:
                line += f" (goal >= {goal}) GOAL NOT MET"
                failures.append(f"{goal_name}: {ratio:.2f} x (goal >= {goal}): {m[key]:.3f} s "
                                f"against {m[base_key]:.3f} s, "
                                f"{m[key] - m[base_key] / goal:.3f} s too slow")
        print(line)

    cache = "NOT dropped: no cold figures" if not_cold else \
        "dropped and checked with mincore() before every cold load"
    print(f"checkpoint benchmark: {total / (1 << 20):.0f} MiB float32 in {TENSORS} tensors, "
          f"{rounds} rounds (median), {base}; page cache {cache}")
    row("raw write()+fsync()", "raw_save")
    row("torch.save()+fsync()", "torch_save")
    row("primus save (vs raw)", "save", goal_name="primus save vs raw write()+fsync()")
    row("primus save (vs torch.save)", "save", goal_name="primus save vs torch.save()+fsync()")
    if not_cold:
        print(f"  {'cold loads':<40} not measured: {not_cold}")
    else:
        row("raw read, cold", "raw_load_cold")
        row("primus load, cold (vs raw)", "load_cold", goal_name="primus load vs raw read, cold")
    row("raw read, warm", "raw_load_warm")
    row("primus load, warm (vs raw)", "load_warm", "raw_load_warm")
    share = m["async_block"] / m["save"]
    met = share <= ASYNC_BLOCK_GOAL
    print(f"  {'async save: caller blocked':<40} {m['async_block']:8.3f} s  "
          f"{share:5.2f} of a synchronous save (goal <= {ASYNC_BLOCK_GOAL:.2f})"
          f"{' goal met' if met else ' GOAL NOT MET'}")
    if not met:
        failures.append(f"async save blocked the caller {m['async_block']:.3f} s, {share:.2f} of "
                        f"a synchronous save's {m['save']:.3f} s (goal <= {ASYNC_BLOCK_GOAL:.2f}, "
                        f"{m['async_block'] - ASYNC_BLOCK_GOAL * m['save']:.3f} s too long)")
    print(f"  {'async save: until committed':<40} {m['async_total']:8.3f} s")
    if not_cold:
        missing.append(f"cold loads (primus and raw) not measured: {not_cold}")
    for name, (key, base_key, _) in GOALS.items():
        if (key not in m or base_key not in m) and not (not_cold and "cold" in key) and \
                not (tensors is None and base_key == "torch_save"):
            missing.append(f"{name}: no figure for {key if key not in m else base_key}")
    for failure in failures:
        print(f"GOAL NOT MET: {failure}")
    for side in missing:
        print(f"MISSING: {side}")
    if failures or missing:
        print(f"{len(failures)} goals not met, {len(missing)} missing sides of the comparison")
        return 1
    print("all goals met")
    return 0


def main():
    size_mib = int(os.environ.get("PRIMUS_BENCH_CKPT_MIB", "1024"))
    rounds = int(os.environ.get("PRIMUS_BENCH_CKPT_ROUNDS", "5"))
    if size_mib < 1 or rounds < 1:
        print("bench_ckpt.py: PRIMUS_BENCH_CKPT_MIB and PRIMUS_BENCH_CKPT_ROUNDS must be >= 1",
              file=sys.stderr)
        return 2
    if len(sys.argv) > 1:
        os.makedirs(sys.argv[1], exist_ok=True)
        return bench(sys.argv[1], size_mib, rounds)
    base = tempfile.mkdtemp(prefix="primus-bench-", dir="/var/tmp")
    try:
        return bench(base, size_mib, rounds)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
