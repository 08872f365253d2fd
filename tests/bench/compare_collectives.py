#!/usr/bin/env python3
"""Allreduce (float32 sum) at 2 ranks on this machine, in one go: libprimus-coll's TCP backend
(primus-bench-collectives, TCP store bootstrap), Open MPI's MPI_Allreduce over TCP
(--mca pml ob1 --mca btl self,tcp), Gloo's allreduce over its TCP transport, and a ceiling: two
processes sending a large buffer to each other in both directions at once over loopback TCP,
best of several runs in every round. Each sweep runs ROUNDS times (alternating order) and keeps
each size's best. Prints busbw per size, the ratios, and the goals:
  busbw at >= 1 MiB >= Open MPI-TCP and >= Gloo at every size, and >= 0.8 of the ceiling;
  time at 8 B <= 1.5 x Open MPI-TCP.
Usage: compare_collectives.py BUILD_DIR (where primus-bench-collectives was built)
Environment: PRIMUS_BENCH_COLL_MAX (bytes, default 256 MiB), PRIMUS_BENCH_COLL_ROUNDS (3)."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "collectives")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse(text, size_col, time_col, busbw_col):
    rows = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts or line.lstrip().startswith("#"):
            continue
        try:
            rows[int(parts[size_col])] = (float(parts[time_col]), float(parts[busbw_col]))
        except (ValueError, IndexError):
            pass
    return rows


def run_primus(build, max_bytes):
    bench = os.path.join(build, "primus-bench-collectives")
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   PRIMUS_PORT=str(port), PRIMUS_JOB_SECRET="bench", PRIMUS_BOOTSTRAP="tcp")
        env["LD_LIBRARY_PATH"] = os.path.join(build, "collectives", ".libs") + ":" + \
            env.get("LD_LIBRARY_PATH", "")
        procs.append(subprocess.Popen([bench, "-b", "8", "-e", str(max_bytes)], env=env,
                                      stdout=subprocess.PIPE, text=True))
    out = procs[0].communicate(timeout=1800)[0]
    procs[1].wait(timeout=60)
    return parse(out, 0, 4, 6)


def run_mpi(tools, max_bytes):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run(["mpirun", "-np", "2", "--mca", "pml", "ob1", "--mca", "btl",
                          "self,tcp", os.path.join(tools, "mpi_allreduce"), "8", str(max_bytes)],
                         env=env, capture_output=True, text=True, timeout=1800).stdout
    return parse(out, 0, 1, 3)


def run_gloo(tools, max_bytes):
    store = tempfile.mkdtemp(prefix="gloo-store-")
    try:
        procs = [subprocess.Popen([os.path.join(tools, "gloo_allreduce"), str(r), "2", store, "8",
                                   str(max_bytes)], stdout=subprocess.PIPE, text=True)
                 for r in range(2)]
        out = procs[0].communicate(timeout=1800)[0]
        procs[1].wait(timeout=60)
        return parse(out, 0, 1, 3)
    finally:
        shutil.rmtree(store, ignore_errors=True)


def build_tools(tools):
    """The baselines that build here: {name: True/False (reason printed)}."""
    built = {}
    steps = {
        "ceiling": ["g++", "-O2", "-std=c++17", os.path.join(SRC, "ceiling.cpp"), "-o",
                    os.path.join(tools, "ceiling")],
        "mpi": ["mpicc", "-O2", os.path.join(SRC, "mpi_allreduce.c"), "-o",
                os.path.join(tools, "mpi_allreduce")],
        "gloo": ["g++", "-O2", "-std=c++17", os.path.join(SRC, "gloo_allreduce.cpp"), "-lgloo",
                 "-pthread", "-o", os.path.join(tools, "gloo_allreduce")],
    }
    for name, argv in steps.items():
        if shutil.which(argv[0]) is None:
            print(f"# {name}: {argv[0]} not found, baseline skipped")
            built[name] = False
            continue
        result = subprocess.run(argv, capture_output=True, text=True)
        built[name] = result.returncode == 0
        if not built[name]:
            print(f"# {name}: does not build here ({result.stderr.strip().splitlines()[-1:]}), "
                  "baseline skipped")
    return built


def best(runs):
    merged = {}
    for rows in runs:
        for size, (time, busbw) in rows.items():
            old = merged.get(size)
            merged[size] = (min(time, old[0]), max(busbw, old[1])) if old else (time, busbw)
    return merged


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "."
    max_bytes = int(os.environ.get("PRIMUS_BENCH_COLL_MAX", str(256 << 20)))
    rounds = int(os.environ.get("PRIMUS_BENCH_COLL_ROUNDS", "3"))
    tools = tempfile.mkdtemp(prefix="primus-bench-coll-")
    try:
        built = build_tools(tools)
        sweeps = {"primus": [], "mpi": [], "gloo": []}
        order = ["primus", "mpi", "gloo", "ceiling"]
        ceilings = []
        # This machine's loopback speed drifts by tens of percent within minutes: every round
        # measures everything, the ceiling included, in alternating order.
        for r in range(rounds):
            for name in (order if r % 2 == 0 else order[::-1]):
                if name == "primus":
                    sweeps[name].append(run_primus(build, max_bytes))
                elif not built.get(name):
                    continue
                elif name == "ceiling":
                    ceilings.append(float(subprocess.run(
                        [os.path.join(tools, "ceiling"), str(64 << 20), "5"],
                        capture_output=True, text=True).stdout or 0))
                else:
                    sweeps[name].append(run_mpi(tools, max_bytes) if name == "mpi"
                                        else run_gloo(tools, max_bytes))
        ceiling = max(ceilings, default=0.0)
    finally:
        shutil.rmtree(tools, ignore_errors=True)
    primus, mpi, gloo = (best(sweeps[n]) for n in ("primus", "mpi", "gloo"))
    print(f"# allreduce float32 sum, 2 ranks, best of {rounds} sweeps each; busbw in GB/s; "
          f"ceiling (loopback TCP both ways at 64 MiB, best of 5 in each round): {ceiling:.3f} GB/s")
    print(f"# {'size(B)':>10} {'primus':>8} {'ompi-tcp':>8} {'gloo':>8} {'/ompi':>6} {'/gloo':>6} "
          f"{'/ceil':>6}")
    failures = []
    for size in sorted(primus):
        p = primus[size][1]
        m = mpi.get(size, (0, 0))[1]
        g = gloo.get(size, (0, 0))[1]
        ratio = lambda a, b: f"{a / b:6.2f}" if b > 0 else "     -"
        print(f"  {size:>10} {p:8.3f} {m:8.3f} {g:8.3f} {ratio(p, m)} {ratio(p, g)} "
              f"{ratio(p, ceiling)}")
        if size >= 1 << 20:
            if m > 0 and p < m:
                failures.append(f"{size} B: below Open MPI-TCP ({p:.3f} < {m:.3f})")
            if g > 0 and p < g:
                failures.append(f"{size} B: below Gloo ({p:.3f} < {g:.3f})")
            if ceiling > 0 and p < 0.8 * ceiling:
                failures.append(f"{size} B: below 0.8 of the ceiling ({p / ceiling:.2f})")
    if 8 in primus and 8 in mpi:
        latency = primus[8][0] / mpi[8][0]
        print(f"# latency at 8 B: primus {primus[8][0]:.1f} us, Open MPI-TCP {mpi[8][0]:.1f} us, "
              f"ratio {latency:.2f} (goal <= 1.5)")
        if latency > 1.5:
            failures.append(f"8 B latency {latency:.2f} x Open MPI-TCP")
    for failure in failures:
        print(f"# GOAL NOT MET: {failure}")
    print("# all goals met" if not failures else f"# {len(failures)} goals not met")


if __name__ == "__main__":
    main()
