#!/usr/bin/env python3
"""What --primus-coll-integrity costs: allreduce (float32 sum) at 2 ranks over the TCP store on
this machine, at 1 MiB and 64 MiB, with PRIMUS_COLL_INTEGRITY=1 against the plain path measured
in the same run (primus-bench-collectives; ROUNDS rounds in alternating order, each side's best
time per size). Prints both times and their ratio per size, and the goals:
  time with integrity <= 1.5 x plain at 1 MiB, <= 2.0 x plain at 64 MiB.
Every byte is hashed twice (GHASH, by the sender and by the receiver), about 5 GB/s per core
here; with both ranks on this machine's 2 cores, that is the cost at 64 MiB, where the plain
path is bound by memory and loopback copies.
Exits 1 when a goal is missed or a side could not be measured ('# MISSING:').
Usage: bench_integrity.py BUILD_DIR   Environment: PRIMUS_BENCH_INTEGRITY_ROUNDS (3)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_collectives import Missing, run_primus_bench  # noqa: E402

SIZES = (1 << 20, 64 << 20)
GOALS = {1 << 20: 1.5, 64 << 20: 2.0}


def run(build, integrity, label):
    args = ["-b", str(SIZES[0]), "-e", str(SIZES[-1]), "-f", str(SIZES[1] // SIZES[0]), "-n",
            "10", "--check"]
    return run_primus_bench(build, args, label,
                            {"PRIMUS_COLL_INTEGRITY": "1" if integrity else "0"})


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "."
    rounds = int(os.environ.get("PRIMUS_BENCH_INTEGRITY_ROUNDS", "3"))
    best = {False: {}, True: {}}
    missing = []
    for r in range(rounds):
        for integrity in ((False, True) if r % 2 == 0 else (True, False)):
            label = f"{'with' if integrity else 'without'} integrity, round {r + 1}"
            try:
                rows = run(build, integrity, label)
            except Missing as e:
                missing.append(str(e))
                continue
            for size in SIZES:
                if size not in rows:
                    missing.append(f"{label}: no row for {size} B")
                    continue
                old = best[integrity].get(size)
                best[integrity][size] = min(rows[size][0], old) if old else rows[size][0]
    print(f"# allreduce float32 sum, 2 ranks, best of {rounds} rounds; time in us")
    print(f"# {'size(B)':>10} {'plain':>10} {'integrity':>10} {'ratio':>6} {'goal':>6}")
    failures = []
    for size in SIZES:
        plain, sealed = best[False].get(size), best[True].get(size)
        if not plain or not sealed:
            missing.append(f"{size} B: {'plain' if not plain else 'integrity'} not measured")
            continue
        ratio = sealed / plain
        print(f"  {size:>10} {plain:10.1f} {sealed:10.1f} {ratio:6.2f} {GOALS[size]:6.2f}")
        if ratio > GOALS[size]:
            failures.append(f"{size} B: with integrity {sealed:.1f} us is {ratio:.2f} x the "
                            f"plain path's {plain:.1f} us (goal <= {GOALS[size]:.2f})")
    for failure in failures:
        print(f"# GOAL NOT MET: {failure}")
    for side in missing:
        print(f"# MISSING: {side}")
    if failures or missing:
        return 1
    print("# all goals met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
