#!/usr/bin/env python3
"""Checkpoint speed against its baselines, measured in one run on one file system.

One writer process, SIZE_MIB (default 1024) MiB of float32 tensors in 16 tensors:
  save    primus.checkpoint.save (fsync and commit included) vs raw write()+fsync() of the same
          bytes vs torch.save()+fsync()
  load    primus.checkpoint.load (every tensor read and CRC-checked) vs a raw read of the same
          bytes, with a cold page cache (drop_caches before each, as root) and warm
  async   how long save(blocking=False) blocks the caller, against a synchronous save and
          against its floor: the same bytes copied into mapped host memory on as many threads
  tmpfs   primus save vs raw write()+fsync() on /dev/shm, where no disk hides a save's CPU
Each figure is the median of ROUNDS (default 7) interleaved rounds, printed with its spread
(fastest-slowest): the same 1 GiB write to this VM's disk took 0.63 to 3.5 s within a minute
(2026-12-06), so more rounds than elsewhere keep the medians to the disk's usual speed. The
three savers take turns going first, and so do the two readers. Each goal is judged on the
median over the rounds of the ratio within a round (the two sides of a round run back to back,
so that the machine's drift over minutes cancels; the ratio of the medians is printed beside):
  save >= 0.9 x raw write()+fsync() (on disk and on tmpfs) and >= 1.0 x torch.save()+fsync();
  cold load >= 0.9 x a cold raw read; async save blocks the caller <= 0.10 of a synchronous save
  or <= 1.2 x its floor (which alone takes more than 0.10 of a save where the disk is fast).
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

from disk_counters import DiskCounters
from primus import checkpoint

TENSORS = 16
DROP_CACHES = "/proc/sys/vm/drop_caches"
RESIDENT_LIMIT = 0.01  # of a file's pages still in the page cache after a drop: then not cold
# goal name: (measured key, baseline key, goal); the ratio is baseline time / measured time.
GOALS = {
    "primus save vs raw write()+fsync()": ("save", "raw_save", 0.9),
    "primus save vs torch.save()+fsync()": ("save", "torch_save", 1.0),
    "primus load vs raw read, cold": ("load_cold", "raw_load_cold", 0.9),
    "primus save vs raw write()+fsync(), tmpfs": ("tmpfs_save", "tmpfs_raw_save", 0.9),
}
ASYNC_BLOCK_GOAL = 0.10  # async save: caller blocked, as a share of a synchronous save
ASYNC_FLOOR_GOAL = 1.2  # ... or as a multiple of the copy's floor

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


def raw_save_file(path, arrays):
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


def floor_copier(arrays, threads):
    """The floor of an asynchronous save's blocking time: the state's bytes copied into host
    buffers whose pages are already mapped, in pieces on `threads` threads (numpy releases the
    GIL while it copies), written here without Primus's code. Returns the copy function."""
    import concurrent.futures

    buffers = {k: np.empty_like(v) for k, v in arrays.items()}
    pieces = []
    for name, source in arrays.items():
        flat_in, flat_out = source.reshape(-1), buffers[name].reshape(-1)
        step = max(1, (16 << 20) // source.itemsize)
        pieces += [(flat_out[i:i + step], flat_in[i:i + step]) for i in range(0, flat_in.size, step)]
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads)

    def copy():
        for future in [pool.submit(np.copyto, d, s) for d, s in pieces]:
            future.result()

    copy()  # maps every page of the buffers
    return copy


def measure(base, arrays, tensors, rounds, disk):
    """Every figure on `base`'s file system, interleaved over `rounds` rounds: {key: [seconds]}
    and why the cold loads were not measured (None when they were); the device's counters over
    each cold load go to `disk`."""
    ckpt_dir = os.path.join(base, "ckpt")
    raw_path = os.path.join(base, "raw.bin")
    torch_path = os.path.join(base, "torch.pt")
    times = {k: [] for k in ("save", "raw_save", "torch_save", "load_cold", "raw_load_cold",
                             "load_warm", "raw_load_warm", "async_block", "async_total",
                             "copy_floor")}
    not_cold = None  # why the cold loads were not measured
    floor = floor_copier(arrays, checkpoint_io_threads())

    def save_primus():
        fresh(ckpt_dir)
        times["save"].append(timed(lambda: checkpoint.save(arrays, 10 * r + 1, dir=ckpt_dir,
                                                           rng=False))[0])

    def save_torch():
        fresh(torch_path)
        times["torch_save"].append(timed(lambda: torch_save(torch_path, tensors))[0])

    def load_primus_timed():
        """The time checkpoint.load takes; what it loaded is checked outside the timing."""
        t, restored = timed(lambda: checkpoint.load(ckpt_dir))
        assert restored.step == 10 * r + 1 and np.array_equal(restored.state["layer3.weight"],
                                                              arrays["layer3.weight"])
        return t

    def load_cold(key, path, load):
        nonlocal not_cold
        not_cold = not_cold or drop_caches(path)
        if not not_cold:
            times[key].append(disk.measure(key, load))

    savers = [lambda: save_raw(times, raw_path, arrays), save_primus] + \
        ([save_torch] if tensors is not None else [])
    for r in range(rounds):
        # Take turns going first: this VM's disk is noisy and order-dependent.
        for step in savers[r % len(savers):] + savers[:r % len(savers)]:
            step()
        cold = (lambda: load_cold("raw_load_cold", raw_path,
                                  lambda: timed(lambda: raw_load(raw_path, arrays))[0]),
                lambda: load_cold("load_cold", ckpt_dir, load_primus_timed))
        warm = (lambda: times["raw_load_warm"].append(warm_time(lambda: raw_load(raw_path,
                                                                                 arrays))),
                lambda: times["load_warm"].append(warm_time(lambda: checkpoint.load(ckpt_dir))))
        for pair in (cold, warm):
            for step in (pair if r % 2 == 0 else pair[::-1]):
                step()
        fresh(ckpt_dir)
        # The floor just before or just after the save (in turn), in the same conditions.
        if r % 2 == 0:
            times["copy_floor"].append(timed(floor)[0])
        start = time.perf_counter()
        # A run's steps go forward (checkpoint.save refuses a step at or below its last).
        pending = checkpoint.save(arrays, 10 * r + 5, dir=ckpt_dir, rng=False, blocking=False)
        times["async_block"].append(time.perf_counter() - start)
        pending.wait()
        times["async_total"].append(time.perf_counter() - start)
        if r % 2 == 1:
            times["copy_floor"].append(timed(floor)[0])
    fresh(ckpt_dir, raw_path, torch_path)
    return times, not_cold


def measure_tmpfs_saves(arrays, rounds):
    """primus save against raw write()+fsync() on a tmpfs (/dev/shm), where no disk hides the
    CPU a save costs: {key: [seconds]}, or None (and why) when there is no room there."""
    shm = "/dev/shm"
    total = sum(a.nbytes for a in arrays.values())
    try:
        room = os.statvfs(shm)
    except OSError as e:
        return None, f"{shm}: {e.strerror}"
    if room.f_bavail * room.f_frsize < 2.5 * total:
        return None, f"{shm} has less than 2.5 x {total >> 20} MiB free"
    base = tempfile.mkdtemp(prefix="primus-bench-", dir=shm)
    times = {"tmpfs_save": [], "tmpfs_raw_save": []}
    ckpt_dir, raw_path = os.path.join(base, "ckpt"), os.path.join(base, "raw.bin")
    try:
        for r in range(rounds):
            def primus_save():
                fresh(ckpt_dir)
                times["tmpfs_save"].append(timed(lambda: checkpoint.save(
                    arrays, 10 * r + 1, dir=ckpt_dir, rng=False))[0])

            def raw():
                fresh(raw_path)
                times["tmpfs_raw_save"].append(timed(lambda: raw_save_file(raw_path, arrays))[0])

            for step in ((raw, primus_save) if r % 2 == 0 else (primus_save, raw)):
                step()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return times, None


def checkpoint_io_threads():
    from primus import _tree

    return _tree.io_threads()


def fresh(*paths):
    """Every writer starts from nothing: removing the previous output is not timed."""
    for path in paths:
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.unlink(path)
    os.sync()


def save_raw(times, raw_path, arrays):
    fresh(raw_path)
    times["raw_save"].append(timed(lambda: raw_save_file(raw_path, arrays))[0])


def warm_time(load):
    load()  # into the page cache
    return timed(load)[0]


SPREAD = {}  # key: (fastest, slowest) of its rounds
PAIRED = {}  # goal name: the median over the rounds of base time / measured time in each round


def paired_ratios(times):
    """{goal name: the median of the rounds' own ratios} where both sides ran in every round."""
    out = {}
    for name, (key, base_key, _) in GOALS.items():
        sides, bases = times.get(key, []), times.get(base_key, [])
        if sides and len(sides) == len(bases) and min(sides) > 0:
            out[name] = statistics.median(b / t for b, t in zip(bases, sides))
    return out


def row(m, gib, failures, label, key, base_key=None, goal_name=None):
    """Prints a median, its ratio to base_key's (base time / this time) and, with goal_name,
    the verdict against that goal (a miss goes into failures)."""
    if goal_name:
        base_key, goal = GOALS[goal_name][1:]
    if key not in m:
        print(f"  {label:<40} not measured")
        return
    line = f"  {label:<40} {m[key]:8.3f} s  {gib / m[key]:7.2f} GiB/s"
    if key in SPREAD:
        line += f"  ({SPREAD[key][0]:.3f}-{SPREAD[key][1]:.3f} s)"
    if base_key in m:
        ratio = of_medians = m[base_key] / m[key]
        if goal_name in PAIRED:
            ratio = PAIRED[goal_name]
            line += f"  ratio {ratio:5.2f} (rounds' median; {of_medians:.2f} of the medians)"
        else:
            line += f"  ratio {ratio:5.2f}"
        if goal_name and ratio >= goal:
            line += f" (goal >= {goal}) goal met"
        elif goal_name:
            line += f" (goal >= {goal}) GOAL NOT MET"
            failures.append(f"{goal_name}: {ratio:.2f} x (goal >= {goal}), the median of the "
                            f"rounds' ratios; medians {m[key]:.3f} s against {m[base_key]:.3f} s")
    print(line)


def async_verdict(m, failures):
    """The async save's blocking time against its goal: at most ASYNC_BLOCK_GOAL of a
    synchronous save, or within ASYNC_FLOOR_GOAL of its floor (copying the state to memory,
    measured beside it), which bounds it where the disk writes faster than 10 x the copy."""
    share, floor_share = m["async_block"] / m["save"], m["copy_floor"] / m["save"]
    of_floor = m["async_block"] / m["copy_floor"]
    met = share <= ASYNC_BLOCK_GOAL or of_floor <= ASYNC_FLOOR_GOAL
    goal = f"goal <= {ASYNC_BLOCK_GOAL:.2f} of a save or <= {ASYNC_FLOOR_GOAL} x the floor"
    print(f"  {'async save: caller blocked':<40} {m['async_block']:8.3f} s  {share:5.2f} of a "
          f"synchronous save, {of_floor:.2f} x the floor ({goal}){' goal met' if met else ' GOAL NOT MET'}")
    print(f"  {'  floor: the copy to warm host memory':<40} {m['copy_floor']:8.3f} s  "
          f"{floor_share:5.2f} of a synchronous save ({checkpoint_io_threads()} threads)")
    if not met:
        failures.append(f"async save blocked the caller {m['async_block']:.3f} s, {share:.2f} of "
                        f"a synchronous save's {m['save']:.3f} s and {of_floor:.2f} x the copy's "
                        f"{m['copy_floor']:.3f} s ({goal})")


def report(m, total, rounds, base, not_cold, tmpfs_why, missing, disk):
    """Prints every figure and verdict; returns the exit status."""
    gib = total / (1 << 30)
    failures = []
    cache = "NOT dropped: no cold figures" if not_cold else \
        "dropped and checked with mincore() before every cold load"
    print(f"checkpoint benchmark: {total / (1 << 20):.0f} MiB float32 in {TENSORS} tensors, "
          f"{rounds} rounds (median), {base}; page cache {cache}")
    row(m, gib, failures, "raw write()+fsync()", "raw_save")
    row(m, gib, failures, "torch.save()+fsync()", "torch_save")
    row(m, gib, failures, "primus save (vs raw)", "save", goal_name="primus save vs raw write()+fsync()")
    row(m, gib, failures, "primus save (vs torch.save)", "save",
        goal_name="primus save vs torch.save()+fsync()")
    if not_cold:
        print(f"  {'cold loads':<40} not measured: {not_cold}")
    else:
        row(m, gib, failures, "raw read, cold", "raw_load_cold")
        row(m, gib, failures, "primus load, cold (vs raw)", "load_cold",
            goal_name="primus load vs raw read, cold")
        for label, key in (("raw", "raw_load_cold"), ("primus", "load_cold")):
            line = disk.summary(key, m.get(key))
            if line:
                print(f"    {disk.name}, {label}'s cold read (medians): {line}")
    row(m, gib, failures, "raw read, warm", "raw_load_warm")
    row(m, gib, failures, "primus load, warm (vs raw)", "load_warm", "raw_load_warm")
    async_verdict(m, failures)
    print(f"  {'async save: until committed':<40} {m['async_total']:8.3f} s")
    if tmpfs_why:
        print(f"  {'on tmpfs':<40} not measured: {tmpfs_why}")
    else:
        row(m, gib, failures, "raw write()+fsync(), tmpfs", "tmpfs_raw_save")
        row(m, gib, failures, "primus save, tmpfs (vs raw)", "tmpfs_save",
            goal_name="primus save vs raw write()+fsync(), tmpfs")
    for name, (key, base_key, _) in GOALS.items():
        if (key not in m or base_key not in m) and not (not_cold and "cold" in key) and \
                not ("torch" in base_key and "torch_save" not in m) and \
                not (tmpfs_why and "tmpfs" in key):
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
    disk = DiskCounters(base)
    times, not_cold = measure(base, arrays, tensors, rounds, disk)
    if not_cold:
        missing.append(f"cold loads (primus and raw) not measured: {not_cold}")
    tmpfs, tmpfs_why = measure_tmpfs_saves(arrays, rounds)
    if tmpfs_why:
        missing.append(f"the saves on tmpfs not measured: {tmpfs_why}")
    times.update(tmpfs or {})
    m = {k: statistics.median(v) for k, v in times.items() if v}
    SPREAD.update({k: (min(v), max(v)) for k, v in times.items() if v})
    PAIRED.update(paired_ratios(times))
    return report(m, total, rounds, base, not_cold, tmpfs_why, missing, disk)


def main():
    size_mib = int(os.environ.get("PRIMUS_BENCH_CKPT_MIB", "1024"))
    rounds = int(os.environ.get("PRIMUS_BENCH_CKPT_ROUNDS", "7"))
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
