#!/usr/bin/env python3
"""Allreduce (float32 sum) at 2 ranks on this machine, in one go: libprimus-coll's TCP backend
(primus-bench-collectives, TCP store bootstrap), Open MPI's MPI_Allreduce over TCP
(--mca pml ob1 --mca btl self,tcp), Gloo's allreduce over its TCP transport, and a ceiling: two
processes sending a large buffer to each other in both directions at once over loopback TCP,
best of several runs in every round, measured twice, with the backend's socket options and with
the kernel's default (autotuned) buffers; the larger of the two is the ceiling. Each sweep runs
ROUNDS times (alternating order) and keeps each size's best. Prints busbw per size, the ratios,
and the goals:
  busbw at >= 1 MiB >= Open MPI-TCP and >= Gloo at every size, and >= 0.8 of the ceiling;
  time at 8 B <= 1.5 x Open MPI-TCP.
Exits 1 when a goal is missed or when a side of a comparison is missing (a tool that does not
build or is not installed, a run that fails, a size without a row, a ceiling of 0): every such
side is named on a '# MISSING:' line. '# all goals met' (exit 0) means everything was compared.
Usage: compare_collectives.py BUILD_DIR (where primus-bench-collectives was built)
Environment: PRIMUS_BENCH_COLL_MAX (bytes, default 256 MiB, at least 1 MiB),
PRIMUS_BENCH_COLL_ROUNDS (3)."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "collectives")
TIMEOUT = 1800
CEILING_BYTES = 64 << 20
CEILING_RUNS = 5
NAMES = {"primus": "primus", "mpi": "Open MPI-TCP", "gloo": "Gloo"}
CEILINGS = {"backend": "the backend's socket options", "kernel": "the kernel's default buffers"}


class Missing(Exception):
    """A side of the comparison that could not be measured; the message says which and why."""


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


def exit_text(rc):
    return f"was killed by signal {-rc}" if rc < 0 else f"exited with status {rc}"


def last_line(text):
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return f": {lines[-1].strip()}" if lines else ""


def run_ranks(label, argvs, envs=None):
    """Runs one process per rank; returns rank 0's stdout, or raises Missing when any rank fails
    or is still running when time is up (then every rank is killed)."""
    procs, killed, late = [], [], False
    try:
        for rank, argv in enumerate(argvs):
            procs.append(subprocess.Popen(
                argv, env=envs[rank] if envs else None, text=True, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL))
        out = procs[0].communicate(timeout=TIMEOUT)[0]
        for proc in procs[1:]:
            proc.wait(timeout=60)
    except OSError as e:
        raise Missing(f"{label}: cannot start {argvs[len(procs)][0]}: {e}") from None
    except subprocess.TimeoutExpired:
        late = True
    finally:
        for rank, proc in enumerate(procs):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
                killed.append(rank)
    for rank, proc in enumerate(procs):
        if rank not in killed and proc.returncode != 0:
            raise Missing(f"{label}: rank {rank} {exit_text(proc.returncode)}")
    if late:
        raise Missing(f"{label}: rank {killed[0] if killed else 0} did not finish in time"
                      f"{' and was killed' if killed else ''}")
    return out


def rows_of(label, out, columns):
    rows = parse(out, *columns)
    if not rows:
        raise Missing(f"{label}: printed no rows")
    return rows


def run_primus_bench(build, args, label, extra_env=None):
    """primus-bench-collectives ARGS at 2 ranks over the TCP store; its rows by size."""
    bench = os.path.join(build, "primus-bench-collectives")
    port = free_port()
    envs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   PRIMUS_PORT=str(port), PRIMUS_JOB_SECRET="be" * 32, PRIMUS_BOOTSTRAP="tcp",
                   **(extra_env or {}))
        env["LD_LIBRARY_PATH"] = os.path.join(build, "collectives", ".libs") + ":" + \
            env.get("LD_LIBRARY_PATH", "")
        envs.append(env)
    out = run_ranks(label, [[bench] + list(args)] * 2, envs)
    return rows_of(label, out, (0, 4, 6))


def run_primus(build, max_bytes, label):
    return run_primus_bench(build, ["-b", "8", "-e", str(max_bytes)], label)


def run_mpi(tools, max_bytes, label):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    try:
        result = subprocess.run(["mpirun", "-np", "2", "--mca", "pml", "ob1", "--mca", "btl",
                                 "self,tcp", os.path.join(tools, "mpi_allreduce"), "8",
                                 str(max_bytes)],
                                env=env, capture_output=True, text=True, timeout=TIMEOUT,
                                stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise Missing(f"{label}: did not finish within {TIMEOUT} s") from None
    except OSError as e:
        raise Missing(f"{label}: cannot start mpirun: {e}") from None
    if result.returncode != 0:
        raise Missing(f"{label}: mpirun {exit_text(result.returncode)}{last_line(result.stderr)}")
    return rows_of(label, result.stdout, (0, 1, 3))


def run_gloo(tools, max_bytes, label):
    store = tempfile.mkdtemp(prefix="gloo-store-")
    try:
        out = run_ranks(label, [[os.path.join(tools, "gloo_allreduce"), str(r), "2", store, "8",
                                 str(max_bytes)] for r in range(2)])
        return rows_of(label, out, (0, 1, 3))
    finally:
        shutil.rmtree(store, ignore_errors=True)


def run_ceiling(tools, mode, label):
    argv = [os.path.join(tools, "ceiling")] + (["--kernel-defaults"] if mode == "kernel" else []) \
        + [str(CEILING_BYTES), str(CEILING_RUNS)]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                                stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise Missing(f"{label}: did not finish within 600 s") from None
    if result.returncode != 0:
        raise Missing(f"{label}: {exit_text(result.returncode)}{last_line(result.stderr)}")
    try:
        value = float(result.stdout)
    except ValueError:
        raise Missing(f"{label}: printed {result.stdout.strip()!r}, not a GB/s figure") from None
    if value <= 0:
        raise Missing(f"{label}: measured {value} GB/s")
    return value


def build_tools(tools):
    """Builds the baselines; returns {name: None when built, else why not}."""
    steps = {
        "ceiling": ["g++", "-O2", "-std=c++17", os.path.join(SRC, "ceiling.cpp"), "-o",
                    os.path.join(tools, "ceiling")],
        "mpi": ["mpicc", "-O2", os.path.join(SRC, "mpi_allreduce.c"), "-o",
                os.path.join(tools, "mpi_allreduce")],
        "gloo": ["g++", "-O2", "-std=c++17", os.path.join(SRC, "gloo_allreduce.cpp"), "-lgloo",
                 "-pthread", "-o", os.path.join(tools, "gloo_allreduce")],
    }
    why = {}
    for name, argv in steps.items():
        why[name] = None
        if shutil.which(argv[0]) is None:
            why[name] = f"{argv[0]} not found"
        elif name == "mpi" and shutil.which("mpirun") is None:
            why[name] = "mpirun not found"
        else:
            result = subprocess.run(argv, capture_output=True, text=True)
            if result.returncode != 0:
                why[name] = f"does not build here (exit {result.returncode}" \
                    f"{last_line(result.stderr)})"
    return why


def best(runs):
    merged = {}
    for rows in runs:
        for size, (time, busbw) in rows.items():
            old = merged.get(size)
            merged[size] = (min(time, old[0]), max(busbw, old[1])) if old else (time, busbw)
    return merged


def listed(sizes):
    return ", ".join(str(s) for s in sizes[:4]) + (f" and {len(sizes) - 4} more"
                                                   if len(sizes) > 4 else "")


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "."
    max_bytes = int(os.environ.get("PRIMUS_BENCH_COLL_MAX", str(256 << 20)))
    rounds = int(os.environ.get("PRIMUS_BENCH_COLL_ROUNDS", "3"))
    if rounds < 1 or max_bytes < 1 << 20:
        print("compare_collectives.py: PRIMUS_BENCH_COLL_ROUNDS must be >= 1 and "
              "PRIMUS_BENCH_COLL_MAX >= 1048576 (the busbw goals start at 1 MiB)", file=sys.stderr)
        return 2
    # Every tool sweeps 8 B, 16 B, ... up to max_bytes: a size without a row is a missing side.
    sizes = []
    while (sizes[-1] * 2 if sizes else 8) <= max_bytes:
        sizes.append(sizes[-1] * 2 if sizes else 8)
    missing = []
    bench = os.path.join(build, "primus-bench-collectives")
    if not os.access(bench, os.X_OK):
        print(f"# MISSING: primus: {bench} not found or not executable (build it first)")
        return 1
    tools = tempfile.mkdtemp(prefix="primus-bench-coll-")
    sweeps = {name: [] for name in NAMES}
    ceilings = {mode: [] for mode in CEILINGS}
    try:
        why = build_tools(tools)
        for name, reason in why.items():
            if reason:
                missing.append(f"{NAMES.get(name, 'the ceiling')} baseline: {reason}")
        order = ["primus", "mpi", "gloo", "backend", "kernel"]
        # This machine's loopback speed drifts by tens of percent within minutes: every round
        # measures everything, both ceilings included, in alternating order.
        for r in range(rounds):
            for name in (order if r % 2 == 0 else order[::-1]):
                tool = "ceiling" if name in CEILINGS else name
                if why.get(tool):
                    continue
                label = (f"ceiling with {CEILINGS[name]}" if name in CEILINGS
                         else NAMES[name]) + f", round {r + 1}"
                try:
                    if name in CEILINGS:
                        ceilings[name].append(run_ceiling(tools, name, label))
                        continue
                    run = {"primus": lambda: run_primus(build, max_bytes, label),
                           "mpi": lambda: run_mpi(tools, max_bytes, label),
                           "gloo": lambda: run_gloo(tools, max_bytes, label)}[name]
                    rows = run()
                    absent = [s for s in sizes if s not in rows]
                    if absent:
                        missing.append(f"{label}: no row for {listed(absent)} B")
                    sweeps[name].append(rows)
                except Missing as e:
                    missing.append(str(e))
    finally:
        shutil.rmtree(tools, ignore_errors=True)
    primus, mpi, gloo = (best(sweeps[n]) for n in ("primus", "mpi", "gloo"))
    ceiling_by = {mode: max(values, default=0.0) for mode, values in ceilings.items()}
    ceiling = max(ceiling_by.values())
    for mode, value in ceiling_by.items():
        if value <= 0 and not why.get("ceiling"):
            missing.append(f"ceiling with {CEILINGS[mode]}: not measured in any round")
    for name, merged in (("primus", primus), ("mpi", mpi), ("gloo", gloo)):
        if why.get(name):
            continue
        if not sweeps[name]:
            missing.append(f"{NAMES[name]}: no sweep succeeded")
            continue
        absent = [s for s in sizes if s not in merged]
        if absent:
            missing.append(f"{NAMES[name]}: no row in any round for {listed(absent)} B")

    print(f"# allreduce float32 sum, 2 ranks, best of {rounds} sweeps each; busbw in GB/s")
    gbs = {mode: f"{value:.3f} GB/s" if value > 0 else "not measured"
           for mode, value in dict(ceiling_by, ceiling=ceiling).items()}
    print(f"# ceiling (loopback TCP both ways at {CEILING_BYTES >> 20} MiB, best of "
          f"{CEILING_RUNS} in each round): {gbs['backend']} with the backend's socket options, "
          f"{gbs['kernel']} with the kernel's default buffers; the larger, {gbs['ceiling']}, is "
          "the ceiling")
    print(f"# {'size(B)':>10} {'primus':>8} {'ompi-tcp':>8} {'gloo':>8} {'/ompi':>6} {'/gloo':>6} "
          f"{'/ceil':>6}")
    failures = []

    def cell(rows, size):
        return f"{rows[size][1]:8.3f}" if size in rows else f"{'-':>8}"

    def ratio(a, b):
        return f"{a / b:6.2f}" if a is not None and b else f"{'-':>6}"

    for size in sorted(set(primus) | set(sizes)):
        p = primus[size][1] if size in primus else None
        m = mpi[size][1] if size in mpi else None
        g = gloo[size][1] if size in gloo else None
        print(f"  {size:>10} {cell(primus, size)} {cell(mpi, size)} {cell(gloo, size)} "
              f"{ratio(p, m)} {ratio(p, g)} {ratio(p, ceiling)}")
        if size < 1 << 20 or p is None:
            continue
        for value, name in ((m, "mpi"), (g, "gloo")):
            if value is None:
                continue  # already a missing side
            if value <= 0:
                missing.append(f"{NAMES[name]}: busbw 0 at {size} B, nothing to compare with")
            elif p < value:
                failures.append(f"{size} B: busbw {p:.3f} GB/s is {p / value:.2f} of "
                                f"{NAMES[name]}'s {value:.3f} GB/s (goal >= 1.00, short by "
                                f"{value - p:.3f} GB/s)")
        if ceiling > 0 and p < 0.8 * ceiling:
            failures.append(f"{size} B: busbw {p:.3f} GB/s is {p / ceiling:.2f} of the ceiling "
                            f"{ceiling:.3f} GB/s (goal >= 0.80, short by "
                            f"{0.8 * ceiling - p:.3f} GB/s)")
    if 8 in primus and 8 in mpi:
        if mpi[8][0] <= 0:
            missing.append("Open MPI-TCP: a time of 0 us at 8 B, nothing to compare with")
        else:
            latency = primus[8][0] / mpi[8][0]
            print(f"# latency at 8 B: primus {primus[8][0]:.1f} us, Open MPI-TCP "
                  f"{mpi[8][0]:.1f} us, ratio {latency:.2f} (goal <= 1.5)")
            if latency > 1.5:
                failures.append(f"8 B: time {primus[8][0]:.1f} us is {latency:.2f} x Open "
                                f"MPI-TCP's {mpi[8][0]:.1f} us (goal <= 1.50, over by "
                                f"{primus[8][0] - 1.5 * mpi[8][0]:.1f} us)")
    for failure in failures:
        print(f"# GOAL NOT MET: {failure}")
    for side in missing:
        print(f"# MISSING: {side}")
    if failures or missing:
        print(f"# {len(failures)} goals not met, {len(missing)} missing sides of the comparison")
        return 1
    print("# all goals met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
