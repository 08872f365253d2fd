#!/usr/bin/env python3
"""Checkpoint speed against its baselines, measured in one run on one file system.

One writer process, SIZE_MIB (default 1024) MiB of float32 tensors in 16 tensors:
  save    primus.checkpoint.save (fsync and commit included) vs raw write()+fsync() of the same
          bytes vs torch.save()+fsync()
  load    primus.checkpoint.load (every tensor read and CRC-checked) vs a raw read of the same
          bytes, with a cold page cache (drop_caches before each, as root) and warm
  async   how long save(blocking=False) blocks the caller, against a synchronous save
Each figure is the median of ROUNDS (default 5) interleaved rounds, alternating which side goes
first; ratios are printed with the
goals. Usage: bench_ckpt.py [DIR] (default: a new directory under /var/tmp)
Environment: PRIMUS_BENCH_CKPT_MIB, PRIMUS_BENCH_CKPT_ROUNDS."""

import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

from primus import checkpoint

TENSORS = 16


def drop_caches():
    """True when the page cache was dropped (root only)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


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


def main():
    size_mib = int(os.environ.get("PRIMUS_BENCH_CKPT_MIB", "1024"))
    rounds = int(os.environ.get("PRIMUS_BENCH_CKPT_ROUNDS", "5"))
    base = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="primus-bench-",
                                                                   dir="/var/tmp")
    os.makedirs(base, exist_ok=True)
    per_tensor = size_mib * (1 << 20) // TENSORS // 4
    rng = np.random.default_rng(0)
    arrays = {f"layer{i}.weight": rng.random(per_tensor, dtype=np.float32).reshape(-1, 1024)
              for i in range(TENSORS)}
    total = sum(a.nbytes for a in arrays.values())
    try:
        import torch

        tensors = {k: torch.from_numpy(v) for k, v in arrays.items()}
    except ImportError:
        tensors = None

    ckpt_dir = os.path.join(base, "ckpt")
    raw_path = os.path.join(base, "raw.bin")
    torch_path = os.path.join(base, "torch.pt")
    times = {k: [] for k in ("save", "raw_save", "torch_save", "load_cold", "raw_load_cold",
                             "load_warm", "raw_load_warm", "async_block", "async_total")}
    cold = True

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

    def load_raw():
        nonlocal cold
        cold = drop_caches() and cold
        times["raw_load_cold"].append(timed(lambda: raw_load(raw_path, arrays))[0])

    def load_primus():
        nonlocal cold
        cold = drop_caches() and cold
        t, restored = timed(lambda: checkpoint.load(ckpt_dir))
        times["load_cold"].append(t)
        assert restored.step == r and np.array_equal(restored.state["layer3.weight"],
                                                     arrays["layer3.weight"])

    for r in range(rounds):
        # Alternate which side goes first: this VM's disk is noisy and order-dependent.
        for step in ((save_raw, save_primus) if r % 2 == 0 else (save_primus, save_raw)):
            step()
        if tensors is not None:
            fresh(torch_path)
            times["torch_save"].append(timed(lambda: torch_save(torch_path, tensors))[0])
        for step in ((load_raw, load_primus) if r % 2 == 0 else (load_primus, load_raw)):
            step()
        raw_load(raw_path, arrays)  # into the page cache
        times["raw_load_warm"].append(timed(lambda: raw_load(raw_path, arrays))[0])
        times["load_warm"].append(timed(lambda: checkpoint.load(ckpt_dir))[0])
        fresh(ckpt_dir)
        start = time.perf_counter()
        pending = checkpoint.save(arrays, 100 + r, dir=ckpt_dir, rng=False, blocking=False)
        times["async_block"].append(time.perf_counter() - start)
        pending.wait()
        times["async_total"].append(time.perf_counter() - start)
    fresh(ckpt_dir, raw_path, torch_path)

    m = {k: statistics.median(v) for k, v in times.items() if v}
    gib = total / (1 << 30)

    def row(label, key, base_key=None, goal=None, higher_is_better=True):
        if key not in m:
            return
        line = f"  {label:<40} {m[key]:8.3f} s  {gib / m[key]:7.2f} GiB/s"
        if base_key and base_key in m:
            ratio = m[base_key] / m[key] if higher_is_better else m[key] / m[base_key]
            verdict = "" if goal is None else (" goal met" if ratio >= goal else " GOAL NOT MET")
            line += f"  ratio {ratio:5.2f}{'' if goal is None else f' (goal >= {goal})'}{verdict}"
        print(line)

    print(f"checkpoint benchmark: {total / (1 << 20):.0f} MiB float32 in {TENSORS} tensors, "
          f"{rounds} rounds (median), {base}; page cache {'dropped' if cold else 'NOT dropped (not root)'}")
    row("raw write()+fsync()", "raw_save")
    row("torch.save()+fsync()", "torch_save")
    row("primus save (vs raw)", "save", "raw_save", 0.9)
    if "torch_save" in m:
        row("primus save (vs torch.save)", "save", "torch_save", 1.0)
    row("raw read, cold", "raw_load_cold")
    row("primus load, cold (vs raw)", "load_cold", "raw_load_cold", 0.9)
    row("raw read, warm", "raw_load_warm")
    row("primus load, warm (vs raw)", "load_warm", "raw_load_warm")
    share = m["async_block"] / m["save"]
    print(f"  {'async save: caller blocked':<40} {m['async_block']:8.3f} s  "
          f"{share:5.2f} of a synchronous save (goal <= 0.10)"
          f"{' goal met' if share <= 0.10 else ' GOAL NOT MET'}")
    print(f"  {'async save: until committed':<40} {m['async_total']:8.3f} s")
    if len(sys.argv) <= 1:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
