#!/usr/bin/env python3
"""Allreduce (float32 sum) at 2 ranks on this machine, in one go: libprimus-coll's TCP backend
(primus-bench-collectives, TCP store bootstrap), Open MPI's MPI_Allreduce over TCP
(--mca pml ob1 --mca btl self,tcp) with its own choice of algorithm and with each of coll_tuned's
allreduce algorithms forced in turn (coll_tuned_use_dynamic_rules 1, coll_tuned_allreduce_algorithm
1 to 6: basic linear, nonoverlapping, recursive doubling, ring, segmented ring, Rabenseifner),
Gloo's allreduce over its TCP transport, and two bounds: the ceiling, two processes sending a
large buffer to each other in both directions at once over loopback TCP (best of several runs in
every round, measured with the backend's socket options and with the kernel's default buffers;
the larger of the two), and the ceiling plus reduction: a 2-rank allreduce of S bytes moves S
bytes each way and sums S/2 bytes on each rank, on the same two cores that copy the bytes, so
its busbw is at most S / (S / ceiling + the time two processes take to sum S/2 bytes at once,
tests/bench/collectives/sum_rate.cpp, measured in every round). Each sweep runs ROUNDS times
(alternating order, primus between the bound's sides and Open MPI's); each figure is the median
of the rounds (each ceiling the median of its rounds' bests), primus's spread (slowest-fastest
busbw) printed beside it. Each goal is judged on the median over the rounds of the ratio within
a round (the sides of a round run back to back, so the loopback's drift over minutes cancels),
against Open MPI's algorithm whose median is the fastest at that size; the ratios of the medians
are printed beside them. The two ranks of primus and of Gloo are bound to a CPU each, as
mpirun binds Open MPI's: unbound, two ranks that take turns waiting can share one CPU for
stretches (the scheduler moves a woken rank to its waker's CPU), and a round then measures the
placement, not the collective (interleaved at 2 MiB: 3.6 to 5.8 GB/s unbound, 5.4 to 5.8 bound,
docs/performance.md). The bounds' processes stream without waiting and are left unbound.
Prints busbw per size, the ratios, and the goals:
  busbw at every size from 4 KiB up >= the best of Open MPI's algorithms (its own choice
  included) and >= Gloo; busbw at >= 1 MiB >= 0.9 of the ceiling plus reduction;
  time at 8 B <= 1.0 x Open MPI-TCP's best.
Exits 1 when a goal is missed or when a side of a comparison is missing (a tool that does not
build or is not installed, a run that fails, a size without a row, a ceiling of 0): every such
side is named on a '# MISSING:' line. '# all goals met' (exit 0) means everything was compared.
Usage: compare_collectives.py BUILD_DIR (where primus-bench-collectives was built)
Environment: PRIMUS_BENCH_COLL_MAX (bytes, default 256 MiB, at least 1 MiB),
PRIMUS_BENCH_COLL_ROUNDS (5)."""

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "collectives")
TIMEOUT = 1800
CEILING_BYTES = 64 << 20
CEILING_RUNS = 5
NAMES = {"primus": "primus", "mpi": "Open MPI-TCP", "gloo": "Gloo"}
# coll_tuned's allreduce algorithms (Open MPI 4.1); 0 is Open MPI's own choice.
MPI_ALGORITHMS = {0: "its choice", 1: "basic linear", 2: "nonoverlapping",
                  3: "recursive doubling", 4: "ring", 5: "segmented ring", 6: "Rabenseifner"}
SUM_MIN = 1 << 20  # the bound that includes the reduction applies from here up
LATENCY_GOAL = 1.0
BOUND_GOAL = 0.9
SIZE_GOAL_FROM = 4 << 10
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


def rank_cpus(ranks):
    """The CPU each rank is bound to, as mpirun binds Open MPI's two ranks (--report-bindings:
    rank 0 to core 0, rank 1 to core 1), from the CPUs this process may use; None (unbound)
    where there are fewer CPUs than ranks."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[:ranks] if len(cpus) >= ranks else None


def run_ranks(label, argvs, envs=None):
    """Runs one process per rank, each bound to a CPU of its own like Open MPI's (rank_cpus);
    returns rank 0's stdout, or raises Missing when any rank fails or is still running when time
    is up (then every rank is killed)."""
    procs, killed, late = [], [], False
    cpus = rank_cpus(len(argvs))
    try:
        for rank, argv in enumerate(argvs):
            bind = None if cpus is None else (lambda cpu=cpus[rank]: os.sched_setaffinity(0, {cpu}))
            procs.append(subprocess.Popen(
                argv, env=envs[rank] if envs else None, text=True, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL, preexec_fn=bind))
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


def run_mpi(tools, max_bytes, label, algorithm=0):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    forced = [] if algorithm == 0 else [
        "--mca", "coll_tuned_use_dynamic_rules", "1",
        "--mca", "coll_tuned_allreduce_algorithm", str(algorithm)]
    try:
        result = subprocess.run(["mpirun", "-np", "2", "--mca", "pml", "ob1", "--mca", "btl",
                                 "self,tcp"] + forced + [os.path.join(tools, "mpi_allreduce"),
                                                         "8", str(max_bytes)],
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


def run_sum(tools, max_bytes, label):
    """{S: seconds two processes take to sum S/2 bytes of float32 at once} from SUM_MIN up."""
    try:
        result = subprocess.run([os.path.join(tools, "sum_rate"), str(SUM_MIN), str(max_bytes),
                                 "3"], capture_output=True, text=True, timeout=600,
                                stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise Missing(f"{label}: did not finish within 600 s") from None
    if result.returncode != 0:
        raise Missing(f"{label}: {exit_text(result.returncode)}{last_line(result.stderr)}")
    rows = {}
    for line in result.stdout.splitlines():
        size, seconds = line.split()
        rows[int(size)] = float(seconds)
    if not rows or min(rows.values()) <= 0:
        raise Missing(f"{label}: printed no usable times")
    return rows


def build_tools(tools):
    """Builds the baselines; returns {name: None when built, else why not}."""
    steps = {
        "ceiling": ["g++", "-O2", "-std=c++17", os.path.join(SRC, "ceiling.cpp"), "-o",
                    os.path.join(tools, "ceiling")],
        # -O3: the summing loop vectorized, the least the reduction can take.
        "sum": ["g++", "-O3", "-std=c++17", os.path.join(SRC, "sum_rate.cpp"), "-o",
                os.path.join(tools, "sum_rate")],
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


def median_rows(runs):
    """{size: (median time, median busbw, slowest busbw, fastest busbw)} over the rounds."""
    by_size = {}
    for rows in runs:
        for size, (time, busbw) in rows.items():
            by_size.setdefault(size, []).append((time, busbw))
    return {size: (statistics.median(t for t, _ in values), statistics.median(b for _, b in values),
                   min(b for _, b in values), max(b for _, b in values))
            for size, values in by_size.items()}


def listed(sizes):
    return ", ".join(str(s) for s in sizes[:4]) + (f" and {len(sizes) - 4} more"
                                                   if len(sizes) > 4 else "")


def measure(build, tools, why, sizes, max_bytes, rounds, missing):
    """Every side, ROUNDS times in alternating order, each by round: {side: {round: rows}},
    {ceiling mode: {round: GB/s}}, {round: {size: sum seconds}}. Open MPI's sides are "mpi:N",
    N its algorithm (0: its choice). Primus runs next to the bound's sides and to Open MPI's."""
    sides = ["backend", "kernel", "sum", "primus"] + [f"mpi:{a}" for a in MPI_ALGORITHMS] + \
        ["gloo"]
    sweeps = {side: {} for side in sides if side not in CEILINGS and side != "sum"}
    ceilings = {mode: {} for mode in CEILINGS}
    sums = {}
    # This machine's loopback speed drifts by tens of percent within minutes: every round
    # measures everything, both ceilings and the sums included, in alternating order.
    for r in range(rounds):
        for side in (sides if r % 2 == 0 else sides[::-1]):
            name, _, algorithm = side.partition(":")
            tool = "ceiling" if side in CEILINGS else name
            if why.get(tool):
                continue
            if side in CEILINGS:
                label = f"ceiling with {CEILINGS[side]}"
            elif side == "sum":
                label = "the sums of the ceiling plus reduction"
            elif name == "mpi":
                label = f"Open MPI-TCP, {MPI_ALGORITHMS[int(algorithm)]}"
            else:
                label = NAMES[name]
            label += f", round {r + 1}"
            try:
                if side in CEILINGS:
                    ceilings[side][r] = run_ceiling(tools, side, label)
                    continue
                if side == "sum":
                    sums[r] = run_sum(tools, max_bytes, label)
                    continue
                if name == "primus":
                    rows = run_primus(build, max_bytes, label)
                elif name == "mpi":
                    rows = run_mpi(tools, max_bytes, label, int(algorithm))
                else:
                    rows = run_gloo(tools, max_bytes, label)
                absent = [size for size in sizes if size not in rows]
                if absent:
                    missing.append(f"{label}: no row for {listed(absent)} B")
                sweeps[side][r] = rows
            except Missing as e:
                missing.append(str(e))
    return sweeps, ceilings, sums


def best_mpi(merged_by_algorithm):
    """{size: (time, busbw, algorithm)}: the fastest of Open MPI's algorithms at each size."""
    out = {}
    for algorithm, rows in merged_by_algorithm.items():
        for size, (time, busbw, *_) in rows.items():
            if size not in out or busbw > out[size][1]:
                out[size] = (time, busbw, algorithm)
    return out


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "."
    max_bytes = int(os.environ.get("PRIMUS_BENCH_COLL_MAX", str(256 << 20)))
    rounds = int(os.environ.get("PRIMUS_BENCH_COLL_ROUNDS", "5"))
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
    try:
        why = build_tools(tools)
        for name, reason in why.items():
            if reason:
                what = {"ceiling": "the ceiling", "sum": "the sums"}.get(name, NAMES.get(name))
                missing.append(f"{what} baseline: {reason}")
        sweeps, ceilings, sums = measure(build, tools, why, sizes, max_bytes, rounds, missing)
    finally:
        shutil.rmtree(tools, ignore_errors=True)
    merged = {side: median_rows(list(runs.values())) for side, runs in sweeps.items()}
    for side, runs in sweeps.items():
        name = side.partition(":")[0]
        if why.get(name):
            continue
        if not runs:
            missing.append(f"{side}: no sweep succeeded")
            continue
        absent = [size for size in sizes if size not in merged[side]]
        if absent:
            missing.append(f"{side}: no row in any round for {listed(absent)} B")
    primus, gloo = merged["primus"], merged["gloo"]
    mpi_by = {int(side.partition(":")[2]): rows for side, rows in merged.items()
              if side.startswith("mpi:") and rows}
    mpi = best_mpi(mpi_by)
    ceiling_by = {mode: statistics.median(values.values()) if values else 0.0
                  for mode, values in ceilings.items()}
    ceiling = max(ceiling_by.values())
    for mode, value in ceiling_by.items():
        if value <= 0 and not why.get("ceiling"):
            missing.append(f"ceiling with {CEILINGS[mode]}: not measured in any round")
    sum_time = {size: statistics.median(rows[size] for rows in sums.values() if size in rows)
                for size in set().union(*sums.values())} if sums else {}
    if not sums and not why.get("sum"):
        missing.append("the sums of the ceiling plus reduction: not measured in any round")
    pairs = paired_ratios(sweeps, ceilings, sums, mpi, rounds)
    report(primus, mpi, mpi_by, gloo, ceiling_by, ceiling, sum_time, pairs, sizes, rounds,
           missing)
    return 1 if REPORT["failed"] or missing else 0


REPORT = {"failed": False}


def bound_of(size, ceiling, sum_time):
    """The ceiling plus reduction's busbw at `size` (GB/s), or None where it is not measured."""
    if ceiling <= 0 or size not in sum_time:
        return None
    return size / (size / (ceiling * 1e9) + sum_time[size]) / 1e9


def paired_ratios(sweeps, ceilings, sums, mpi, rounds):
    """{size: {"best" | "gloo" | "bound" | "time": median over the rounds of the ratio within a
    round}}: primus's busbw over the busbw, in the same round, of Open MPI's algorithm fastest
    at that size by its median, of Gloo and of the ceiling plus reduction; "time": primus's time
    over that Open MPI algorithm's. A ratio is left out where a round lacks one of its sides."""
    out = {}
    for size in set().union(*(rows.keys() for rows in sweeps["primus"].values())):
        ratios = {"best": [], "gloo": [], "bound": [], "time": []}
        for r in range(rounds):
            p = sweeps["primus"].get(r, {}).get(size)
            if p is None:
                continue
            sides = {"gloo": sweeps["gloo"].get(r, {}).get(size)}
            if size in mpi:
                sides["best"] = sweeps[f"mpi:{mpi[size][2]}"].get(r, {}).get(size)
            ceiling = max((values.get(r, 0.0) for values in ceilings.values()), default=0.0)
            if size in sums.get(r, {}):
                bound = bound_of(size, ceiling, sums[r])
                sides["bound"] = (0.0, bound) if bound else None
            for key, side in sides.items():
                if side is not None and side[1] > 0:
                    ratios[key].append(p[1] / side[1])
            if sides.get("best") is not None and sides["best"][0] > 0:
                ratios["time"].append(p[0] / sides["best"][0])
        out[size] = {key: statistics.median(values) for key, values in ratios.items() if values}
    return out


def report(primus, mpi, mpi_by, gloo, ceiling_by, ceiling, sum_time, pairs, sizes, rounds,
           missing):
    print(f"# allreduce float32 sum, 2 ranks, median of {rounds} sweeps each; busbw in GB/s; "
          "ompi-best: the fastest of Open MPI's algorithms at that size (which in the last "
          "column)")
    gbs = {mode: f"{value:.3f} GB/s" if value > 0 else "not measured"
           for mode, value in dict(ceiling_by, ceiling=ceiling).items()}
    print(f"# ceiling (loopback TCP both ways at {CEILING_BYTES >> 20} MiB, the median over the "
          f"rounds of the best of {CEILING_RUNS} in each): {gbs['backend']} with the backend's socket options, "
          f"{gbs['kernel']} with the kernel's default buffers; the larger, {gbs['ceiling']}, is "
          "the ceiling; bound: the ceiling plus reduction")
    print("# /best, /gloo, /bound: the median over the rounds of the ratio within a round (the "
          "goals); m/best, m/bound: the ratio of the medians; /ompi, /ceil: of the medians")
    print(f"# {'size(B)':>10} {'primus':>8} {'ompi':>8} {'ompi-best':>9} {'gloo':>8} "
          f"{'bound':>8} {'/ompi':>6} {'/best':>6} {'/gloo':>6} {'/ceil':>6} {'/bound':>6} "
          f"{'m/best':>6} {'m/bound':>7}  best algorithm; primus's spread")
    failures = []

    def cell(value, width=8):
        return f"{value:{width}.3f}" if value is not None else f"{'-':>{width}}"

    def ratio(a, b, width=6):
        return f"{a / b:{width}.2f}" if a is not None and b else f"{'-':>{width}}"

    def paired(size, key):
        value = pairs.get(size, {}).get(key)
        return (f"{value:6.2f}" if value is not None else f"{'-':>6}"), value

    own = mpi_by.get(0, {})
    for size in sorted(set(primus) | set(sizes)):
        p = primus[size][1] if size in primus else None
        m0 = own[size][1] if size in own else None
        m = mpi[size][1] if size in mpi else None
        g = gloo[size][1] if size in gloo else None
        b = bound_of(size, ceiling, sum_time)
        algorithm = MPI_ALGORITHMS[mpi[size][2]] if size in mpi else "-"
        spread = f"{primus[size][2]:.3f}-{primus[size][3]:.3f}" if size in primus else "-"
        (best_text, best), (gloo_text, over_gloo), (bound_text, over_bound) = (
            paired(size, key) for key in ("best", "gloo", "bound"))
        print(f"  {size:>10} {cell(p)} {cell(m0)} {cell(m, 9)} {cell(g)} {cell(b)} "
              f"{ratio(p, m0)} {best_text} {gloo_text} {ratio(p, ceiling)} {bound_text} "
              f"{ratio(p, m)} {ratio(p, b, 7)}  {algorithm}; {spread}")
        if p is None:
            continue
        if size >= SIZE_GOAL_FROM:
            for value, paired_ratio, name in (
                    (m, best, f"the best of Open MPI-TCP's algorithms ({algorithm})"),
                    (g, over_gloo, "Gloo")):
                if value is None:
                    continue  # already a missing side
                if value <= 0:
                    missing.append(f"{name}: busbw 0 at {size} B, nothing to compare with")
                elif paired_ratio is None:
                    missing.append(f"{name} and primus: no round with both at {size} B")
                elif paired_ratio < 1.0:
                    failures.append(f"{size} B: busbw {paired_ratio:.2f} of {name}'s in the "
                                    f"median round (medians {p:.3f} and {value:.3f} GB/s; goal "
                                    ">= 1.00)")
        if size >= SUM_MIN and over_bound is not None and over_bound < BOUND_GOAL:
            failures.append(f"{size} B: busbw {over_bound:.2f} of the ceiling plus reduction in "
                            f"the median round (medians {p:.3f} and {b:.3f} GB/s; goal >= "
                            f"{BOUND_GOAL:.2f})")
    if 8 in primus and 8 in mpi:
        if mpi[8][0] <= 0:
            missing.append("Open MPI-TCP: a time of 0 us at 8 B, nothing to compare with")
        else:
            latency = pairs.get(8, {}).get("time", primus[8][0] / mpi[8][0])
            print(f"# latency at 8 B: primus {primus[8][0]:.1f} us, Open MPI-TCP's best "
                  f"{mpi[8][0]:.1f} us ({MPI_ALGORITHMS[mpi[8][2]]}), ratio {latency:.2f} in "
                  f"the median round, {primus[8][0] / mpi[8][0]:.2f} of the medians "
                  f"(goal <= {LATENCY_GOAL:.1f})")
            if latency > LATENCY_GOAL:
                failures.append(f"8 B: time {primus[8][0]:.1f} us is {latency:.2f} x Open "
                                f"MPI-TCP's best {mpi[8][0]:.1f} us (goal <= {LATENCY_GOAL:.2f}, "
                                f"over by {primus[8][0] - LATENCY_GOAL * mpi[8][0]:.1f} us)")
    for failure in failures:
        print(f"# GOAL NOT MET: {failure}")
    for side in missing:
        print(f"# MISSING: {side}")
    REPORT["failed"] = bool(failures)
    if failures or missing:
        print(f"# {len(failures)} goals not met, {len(missing)} missing sides of the comparison")
    else:
        print("# all goals met")


if __name__ == "__main__":
    sys.exit(main())
