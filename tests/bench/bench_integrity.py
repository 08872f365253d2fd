#!/usr/bin/env python3
"""What --primus-coll-integrity costs: allreduce (float32 sum) at 2 ranks over the TCP store on
this machine, at 1 MiB and 64 MiB, with PRIMUS_COLL_INTEGRITY=1 against the plain path measured
in the same run (primus-bench-collectives), against the speed of the MAC itself: OpenSSL's
AES-256-GCM (`openssl speed -evp aes-256-gcm`, whose GHASH is the GMAC that integrity computes,
with the counter-mode encryption that GMAC does not do on top, so a conservative rate), run in
every round. ROUNDS rounds (at least 5), the order rotating; every figure is the median of the
rounds, printed with its spread (min to max).
The floor of integrity's cost: in a 2-rank allreduce of S bytes each rank sends S bytes and
receives S bytes, and every byte is hashed by its sender and by its receiver, so each rank
hashes 2 S bytes, on its own core, at the rate measured: floor = 2 S / rate.
Goals (medians): the time integrity adds <= 1.5 x the floor at both sizes. The rate includes
the encryption that GMAC does without, but at 64 MiB the frames are hashed from memory rather
than from the cache that openssl speed's 1 MiB buffer stays in: measured 0.48 to 1.09.
Exits 1 when a goal is missed or a side could not be measured ('# MISSING:').
Usage: bench_integrity.py BUILD_DIR   Environment: PRIMUS_BENCH_INTEGRITY_ROUNDS (5)."""

import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_collectives import Missing, run_primus_bench  # noqa: E402

SIZES = (1 << 20, 64 << 20)
FLOOR_GOAL = 1.5  # the time integrity adds, as a multiple of the MAC's own time


def run(build, integrity, label):
    args = ["-b", str(SIZES[0]), "-e", str(SIZES[-1]), "-f", str(SIZES[1] // SIZES[0]), "-n",
            "10", "--check"]
    return run_primus_bench(build, args, label,
                            {"PRIMUS_COLL_INTEGRITY": "1" if integrity else "0"})


def gmac_rate():
    """AES-256-GCM's bytes per second on one core, from `openssl speed` on 1 MiB buffers."""
    try:
        done = subprocess.run(["openssl", "speed", "-elapsed", "-seconds", "1", "-bytes",
                               str(1 << 20), "-mr", "-evp", "aes-256-gcm"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Missing(f"openssl speed: {e}") from e
    found = re.search(r"^\+F:\d+:[^:]+:([0-9.]+)", done.stdout, re.M)
    if done.returncode != 0 or not found:
        raise Missing(f"openssl speed -evp aes-256-gcm: exit {done.returncode}, no rate in "
                      f"{done.stdout[-300:]!r} {done.stderr[-300:]!r}")
    return float(found.group(1))


def spread(values):
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def measure(build, rounds, missing):
    """{False: {size: [us]}, True: {size: [us]}} and the MAC's rates, one per round."""
    times = {False: {s: [] for s in SIZES}, True: {s: [] for s in SIZES}}
    rates = []
    sides = ["plain", "integrity", "openssl"]
    for r in range(rounds):
        for side in sides[r % 3:] + sides[:r % 3]:
            try:
                if side == "openssl":
                    rates.append(gmac_rate())
                    continue
                integrity = side == "integrity"
                rows = run(build, integrity, f"{side}, round {r + 1}")
            except Missing as e:
                missing.append(str(e))
                continue
            for size in SIZES:
                if size in rows:
                    times[integrity][size].append(rows[size][0])
                else:
                    missing.append(f"{side}, round {r + 1}: no row for {size} B")
    return times, rates


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "."
    rounds = max(5, int(os.environ.get("PRIMUS_BENCH_INTEGRITY_ROUNDS", "5")))
    missing = []
    times, rates = measure(build, rounds, missing)
    failures = []
    if rates:
        rate = statistics.median(rates)
        print(f"# openssl speed -evp aes-256-gcm, 1 MiB buffers: {rate / 1e9:.2f} GB/s "
              f"({min(rates) / 1e9:.2f}-{max(rates) / 1e9:.2f}), one core")
    print(f"# allreduce float32 sum, 2 ranks, median (min-max) of {rounds} rounds; time in us")
    print(f"# {'size(B)':>10} {'plain':>22} {'integrity':>22} {'ratio':>6} {'added':>8} "
          f"{'floor':>8} {'x floor':>7}")
    for size in SIZES:
        plain, sealed = times[False][size], times[True][size]
        if not plain or not sealed or not rates:
            missing.append(f"{size} B: {'plain' if not plain else 'integrity' if not sealed else 'the MAC rate'} not measured")
            continue
        added = statistics.median(sealed) - statistics.median(plain)
        floor = 2 * size / statistics.median(rates) * 1e6
        print(f"  {size:>10} {spread(plain):>22} {spread(sealed):>22} "
              f"{statistics.median(sealed) / statistics.median(plain):6.2f} {added:8.1f} "
              f"{floor:8.1f} {added / floor:7.2f} (goal <= {FLOOR_GOAL})")
        if added > FLOOR_GOAL * floor:
            failures.append(f"{size} B: integrity adds {added:.1f} us, {added / floor:.2f} x "
                            f"the MAC's own {floor:.1f} us for 2 x {size} B (goal <= "
                            f"{FLOOR_GOAL})")
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
