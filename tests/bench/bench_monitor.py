#!/usr/bin/env python3
"""What primus-launch's monitor costs, on this machine (one-machine mode):
  - launcher load at 1,024 ranks: `primus-launch --nproc 1024 -- /bin/sleep 120` with
    heartbeats every second; the ranks' reports come from this process, which opens the 1,024
    control connections itself (the job secret and address read from a rank's environment),
    sends each a hello and then one heartbeat a second like the primus package's (node_stats on
    every 8th rank, as a node's local rank 0). After a 5 s warm-up the launcher's CPU time is
    read from /proc in 6 windows of 5 s, 2 s apart; in each gap the reference loop below runs
    once, so that each window has its own reference (the machine's speed drifts within a run:
    on 3bb1da1 this process's rounds and the launcher slowed by a third together after the
    first window, and a reference run after all the windows did not see it). Prints the
    launcher's CPU use in % of one core, status.json's size, throughput.jsonl's growth per
    second, the /metrics text's size and the time of one GET, and a linear extrapolation to
    100,000 ranks. Goal: the median over the windows of the launcher's CPU per heartbeat / the
    reference loop's <= 4: tests/bench/heartbeat_parse.cpp parsing the same heartbeat lines
    with the launcher's JSON parser and nothing else (the least that understanding a heartbeat
    takes on this machine); the share of a core is printed beside it.
  - heartbeat overhead: 4 ranks of tests/bench/monitor_rank.py (torch DDP on gloo,
    primus.should_stop() every step) with --primus-heartbeat-interval=1, JOBS jobs; within each
    job the ranks send their heartbeats in every other phase of 1 s (on, off, off, on, ...) and
    none in the others, so that both sides run in the same processes on the same CPUs (between
    two jobs, where the 4 ranks land on 2 cores moved the throughput by up to 4 %, more than the
    cost; 1 s phases vary by about 3 % each, so 200 phases a side are taken: with 120, the
    median of the pairs was 1.0019 in one run and 0.9921 in the next). Prints the steps/s
    of all the jobs' phases with heartbeats and without, each job's ratio, the neighbouring
    phases' ratios, and what building one heartbeat costs rank 0. The launcher writes its
    status every second in both phases (at 4 ranks a few microseconds; the launcher's load at
    1,024 ranks is measured above). Goal: the median over the neighbouring pairs of phases of
    their ratio, steps/s with / without, >= 0.99 (all phases together printed beside it).
Exits 1 when a goal is missed or a figure cannot be measured ('# MISSING:').
Usage: bench_monitor.py BUILD_DIR   Environment: PRIMUS_BENCH_MONITOR_JOBS (5)."""

import http.client
import json
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
PYTHON = "/usr/bin/python3"
RANKS = 1024
RANKS_PER_NODE = 8      # the simulated layout: node_stats from every 8th rank
WARMUP_S = 5            # heartbeat rounds before the first CPU window
SUB_WINDOW_S = 5        # one CPU window: this many rounds
WINDOWS = 6             # ... of which the median is taken
REFERENCE_GAP_S = 2     # rounds between two windows, in which the reference loop runs once
GOAL_REFERENCE_RATIO = 4.0  # the launcher's CPU per heartbeat, against the reference loop's
GOAL_RATIO = 0.99
PHASE_S = 1             # heartbeat overhead: heartbeats on, or off, for this long
PHASES = 80             # ... this many times in each job
LIB_DIRS = ("data/.libs", "ckpt/.libs", "collectives/.libs")


def base_env():
    """This environment without Slurm's variables (primus-launch --nproc refuses to run inside
    an allocation)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}


def library_path(build):
    return ":".join(str(build / d) for d in LIB_DIRS)


def raise_nofile():
    """The soft limit on open files up to the hard one: 1,024 connections here, and in the
    launcher 1,024 connections plus each rank's output pipes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def proc_stat(pid):
    """(comm, fields after the comm) of /proc/PID/stat, or None when PID is gone. fields[1] is
    the parent, [11] and [12] utime and stime, [19] the start time (clock ticks)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    close = text.rindex(")")
    return text[text.index("(") + 1:close], text[close + 2:].split()


def children_of(parent):
    """{pid: start time} of PARENT's children named sleep."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat = proc_stat(int(name))
        if stat and stat[0] == "sleep" and int(stat[1][1]) == parent:
            out[int(name)] = stat[1][19]
    return out


def alive(pid, started):
    """PID is still the process that started at STARTED, and not a zombie."""
    stat = proc_stat(pid)
    return stat is not None and stat[1][19] == started and stat[1][0] != "Z"


def cpu_ticks(pid):
    fields = proc_stat(pid)[1]
    return int(fields[11]) + int(fields[12])


def cpu_ns(pid):
    """Nanoseconds the process's threads have run (schedstat: finer than the clock ticks)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended
    return total


def environ_of(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        entries = f.read().split(b"\0")
    return dict(e.decode(errors="replace").split("=", 1) for e in entries if b"=" in e)


def heartbeat_line(rank, round_number, rng_state):
    """One heartbeat as the primus package sends it (python/primus/_control.py), for a rank that
    makes about 10 steps of 32 samples a second on one core and a GPU."""
    jitter = rng_state[rank]
    steps = 100 + 10 * round_number + (rank % 3)
    message = {
        "type": "heartbeat", "steps": steps, "samples": 32 * steps,
        "cpu_seconds": round(12.5 + 0.97 * round_number + jitter, 3),
        "step_seconds": round(0.1 + jitter / 100, 6),
        "last_step_time": round(time.time() - jitter / 10, 3),
        "wait_seconds": round(0.004 + jitter / 1000, 6),
        "rss_bytes": 3_200_000_000 + 4096 * rank,
        "gpu_memory_bytes": 61_000_000_000 + 65536 * rank,
        "gpu_utilization_ratio": round(0.9 + jitter / 20, 4),
    }
    if rank % RANKS_PER_NODE == 0:
        message["node_stats"] = {
            "cpu_usage_ratio": round(0.7 + jitter / 10, 4),
            "memory_used_bytes": 410_000_000_000 + 1_000_000 * round_number,
            "memory_available_bytes": 1_600_000_000_000,
            "network_receive_bytes_total": 9_000_000_000 + 2_500_000_000 * round_number,
            "network_transmit_bytes_total": 8_000_000_000 + 2_500_000_000 * round_number,
        }
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def window_bounds():
    """[(first round, last round)] of the CPU windows: SUB_WINDOW_S rounds each, after the
    warm-up, REFERENCE_GAP_S rounds apart."""
    return [(WARMUP_S + j * (SUB_WINDOW_S + REFERENCE_GAP_S),
             WARMUP_S + j * (SUB_WINDOW_S + REFERENCE_GAP_S) + SUB_WINDOW_S)
            for j in range(WINDOWS)]


def heartbeat_rounds(launcher, work, send_all, on_window_end):
    """Sends a heartbeat of every rank once a second until the last window ends, and reads the
    launcher's CPU ticks and time, this process's CPU time and throughput.jsonl's size half a
    second after the rounds that open and close each window; on_window_end(j) runs after the
    end of window j is read (it starts that window's reference loop, which runs in the gap
    before the next window), and on_window_end(-1 - j) before the start of window j + 1 is read
    (it waits for that loop). Keeps one round's lines in heartbeats.jsonl for the reference loop.
    Returns (ms per round, bytes per round, {round: (wall, launcher ticks, own CPU, throughput
    bytes, launcher ns)}, connections broken)."""
    bounds = window_bounds()
    starts = {first: j for j, (first, _) in enumerate(bounds)}
    ends = {last: j for j, (_, last) in enumerate(bounds)}
    rounds = bounds[-1][1] + 1
    broken = 0
    rng = random.Random(13)
    jitter = [rng.random() for _ in range(RANKS)]
    t0 = time.monotonic() + 0.2
    round_ms, line_bytes = [], []
    window = {}
    for k in range(rounds):
        time.sleep(max(0.0, t0 + k - time.monotonic()))
        t = time.perf_counter()
        lines = [heartbeat_line(rank, k, jitter) for rank in range(RANKS)]
        broken += send_all(lines)
        if k == WARMUP_S + 1:
            (work / "heartbeats.jsonl").write_bytes(b"".join(lines))
        round_ms.append((time.perf_counter() - t) * 1e3)
        line_bytes.append(sum(len(line) for line in lines))
        if k in starts or k in ends:
            if starts.get(k, 0) > 0:
                on_window_end(-starts[k])  # the reference loop in the gap has ended
            # Half a second after this round, between two rounds.
            time.sleep(max(0.0, t0 + k + 0.5 - time.monotonic()))
            throughput = work / "primus-local" / "throughput.jsonl"
            window[k] = (time.monotonic(), cpu_ticks(launcher.pid), time.process_time(),
                         throughput.stat().st_size if throughput.exists() else 0,
                         cpu_ns(launcher.pid))
            if k in ends:
                on_window_end(ends[k])
    return round_ms, line_bytes, window, broken


def scrape_metrics(work):
    """GETs /metrics five times; prints its size and the GET's time; returns the text."""
    metrics_address = (work / "primus-local" / "metrics.addr").read_text().strip()
    gets, body = [], b""
    for _ in range(5):
        seconds, body = get_metrics(metrics_address)
        gets.append(seconds)
    print(f"  /metrics: {len(body)} bytes ({len(body) / RANKS:.0f} per rank); one GET: median "
          f"{statistics.median(gets) * 1e3:.1f} ms (min {min(gets) * 1e3:.1f}, max "
          f"{max(gets) * 1e3:.1f}, 5 GETs)")
    return body


def start_reference(build, lines_path):
    """The reference loop (heartbeat_parse.cpp), started in the background."""
    tool = build / "tests" / "bench" / "primus-bench-heartbeat-parse"
    return subprocess.Popen([str(tool), str(lines_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def reference_us(process):
    """The reference loop's CPU microseconds per heartbeat line, once it has ended."""
    out, err = process.communicate(timeout=60)
    if process.returncode != 0:
        raise RuntimeError(f"primus-bench-heartbeat-parse: exit {process.returncode}: "
                           f"{err.strip()[-300:]}")
    return float(out.split()[0])


def get_metrics(address):
    host, port = address.rsplit(":", 1)
    start = time.perf_counter()
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", "/metrics")
    response = conn.getresponse()
    body = response.read()
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"GET /metrics: HTTP {response.status}")
    return time.perf_counter() - start, body


def stop_launcher(launcher, sleeps):
    """SIGTERM to the launcher (it forwards it to its ranks); after 15 s SIGKILL to it and to
    each of its sleeps still running. Returns the sleeps left after that (should be none)."""
    if launcher.poll() is None:
        sleeps.update(children_of(launcher.pid))  # any started since they were counted
        launcher.send_signal(signal.SIGTERM)
        try:
            launcher.wait(timeout=15)
        except subprocess.TimeoutExpired:
            print("# the launcher did not end within 15 s of SIGTERM: SIGKILL")
            launcher.kill()
            launcher.wait()
            for pid, started in sleeps.items():
                if alive(pid, started):
                    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while True:
        left = [pid for pid, started in sleeps.items() if alive(pid, started)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for pid in left:
        if alive(pid, sleeps[pid]):
            os.kill(pid, signal.SIGKILL)
    return left


def launcher_load(build, work, failures, missing):
    from primus import _coll

    figures = {}
    stderr_path = work / "launcher.err"
    started = time.monotonic()
    with open(stderr_path, "w") as stderr:
        launcher = subprocess.Popen(
            [str(build / "primus-launch"), "--nproc", str(RANKS), "--primus-heartbeat-interval=1",
             "--primus-metrics=0", "--primus-progress-interval=0", "--", "/bin/sleep", "120"],
            cwd=work, env=base_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=stderr, preexec_fn=raise_nofile)
    sleeps = {}
    socks = []
    try:
        # The ranks: all RANKS sleeps started, and one of them exec'd with the job's variables.
        while len(sleeps) < RANKS:
            if launcher.poll() is not None:
                raise RuntimeError(f"primus-launch exited {launcher.returncode}: "
                                   f"{stderr_path.read_text()[-300:]}")
            if time.monotonic() - started > 120:
                raise RuntimeError(f"only {len(sleeps)} of {RANKS} ranks started in 120 s")
            time.sleep(0.2)
            sleeps = children_of(launcher.pid)
        start_seconds = time.monotonic() - started
        rank_env = environ_of(next(iter(sleeps)))
        address, secret = rank_env["PRIMUS_CONTROL"], rank_env["PRIMUS_JOB_SECRET"]
        print(f"# launcher load: {RANKS} ranks of /bin/sleep, their reports simulated here; the "
              f"launcher started them in {start_seconds:.1f} s")

        # The handshakes, one after the other; then every socket non-blocking.
        t = time.perf_counter()
        for rank in range(RANKS):
            sock = socket.socket(fileno=_coll.control_connect(address, secret, rank, 30.0))
            sock.setblocking(False)
            socks.append(sock)
        handshake = time.perf_counter() - t
        print(f"  {RANKS} control connections with the job-secret handshake, one after the "
              f"other: {handshake:.3f} s ({handshake / RANKS * 1e6:.0f} us each)")

        # What has not been sent yet, per connection: a full socket buffer keeps the rest.
        pending = [b""] * RANKS

        def send_all(lines):
            broken = 0
            for rank, line in enumerate(lines):
                data = pending[rank] + line if pending[rank] else line
                try:
                    sent = socks[rank].send(data)
                except BlockingIOError:
                    sent = 0
                except OSError:
                    sent, broken = len(data), broken + 1
                pending[rank] = data[sent:]
            return broken

        # The launcher does not check a hello's pid against its rank: this process's own.
        hello = [(json.dumps({"type": "hello", "attempt": 0,
                              "node": f"sim-{rank // RANKS_PER_NODE:05d}", "pid": os.getpid()},
                             separators=(",", ":")) + "\n").encode() for rank in range(RANKS)]
        broken = send_all(hello)

        # The reference loop runs once after each window, in the gap before the next, so that
        # each window's figure has its own (this machine's speed drifts within minutes).
        references, running = [], []

        def on_window_end(j):
            if j >= 0:
                running.append(start_reference(build, work / "heartbeats.jsonl"))
            else:
                references.append(reference_us(running.pop()))

        try:
            round_ms, line_bytes, window, lost = heartbeat_rounds(launcher, work, send_all,
                                                                  on_window_end)
            while running:
                references.append(reference_us(running.pop()))
        finally:
            for process in running:
                process.kill()
        broken += lost
        bounds = window_bounds()
        rounds = bounds[-1][1] + 1
        (w0, c0, p0, b0, _), (w1, c1, p1, b1, _) = window[bounds[0][0]], window[bounds[-1][1]]
        wall = w1 - w0
        cpu_percent = (c1 - c0) / os.sysconf("SC_CLK_TCK") / wall * 100
        client_percent = (p1 - p0) / wall * 100
        unsent = sum(len(p) for p in pending)
        print(f"  ms per round of {RANKS} heartbeats (line building and non-blocking sends), "
              "each second: " + " ".join(f"{ms:.0f}" for ms in round_ms))
        print(f"  heartbeat lines: {statistics.mean(line_bytes) / RANKS:.0f} bytes on average, "
              f"{statistics.mean(line_bytes) / 1024:.0f} KiB a second in all; this process used "
              f"{client_percent:.1f} % of a core; unsent at the end: {unsent} bytes; "
              f"connections broken: {broken}")
        if max(round_ms) > 1000 or unsent or broken:
            missing.append("not every heartbeat got through (a round took over 1 s, bytes "
                           "were left unsent, or connections broke)")
        status_path = work / "primus-local" / "status.json"
        status_text = status_path.read_text()
        status = json.loads(status_text)
        behind = [r["rank"] for r in status["ranks"]
                  if r.get("state") != "running" or (r.get("steps") or 0) < 100 + 10 * (rounds - 3)]
        pieces = [(window[b][4] - window[a][4]) / 1e3 / (RANKS * (b - a)) for a, b in bounds]
        per_heartbeat = statistics.median(pieces)
        reference = statistics.median(references)
        ratios = [p / r for p, r in zip(pieces, references)]
        ratio = statistics.median(ratios)
        print(f"  launcher CPU over {wall:.1f} s: {cpu_percent:.2f} % of one core; per "
              f"heartbeat, the median of {len(pieces)} windows of {SUB_WINDOW_S} s: "
              f"{per_heartbeat:.1f} us ({min(pieces):.1f}-{max(pieces):.1f}); the reference loop, "
              f"parsing the same lines, run after each window: {reference:.2f} us "
              f"({min(references):.2f}-{max(references):.2f}); ratio, the median of the "
              f"windows' own: {ratio:.1f} (goal <= {GOAL_REFERENCE_RATIO:.0f})")
        print("  the windows in order, us per heartbeat / the reference after it: " +
              " ".join(f"{p:.1f}/{r:.2f}" for p, r in zip(pieces, references)))
        print(f"  status.json: {len(status_text)} bytes ({len(status_text) / RANKS:.0f} per rank; "
              f"{len(status['nodes'])} nodes); ranks not running or more than 2 rounds behind: "
              f"{len(behind)}")
        throughput_rate = (b1 - b0) / wall
        print(f"  throughput.jsonl: {throughput_rate:.0f} bytes a second "
              f"({throughput_rate / RANKS:.1f} per rank)")
        if behind:
            missing.append(f"status.json does not show every rank's newest heartbeats "
                           f"({len(behind)} behind, e.g. rank {behind[0]})")
        body = scrape_metrics(work)
        complaints = [line for line in stderr_path.read_text().splitlines()
                      if "malformed" in line or "refused" in line]
        if complaints:
            missing.append(f"the launcher complained: {complaints[0]}")
        if len(references) != len(pieces):
            missing.append(f"the reference loop ran {len(references)} times for "
                           f"{len(pieces)} windows")
        elif ratio > GOAL_REFERENCE_RATIO:
            failures.append(f"the launcher used {per_heartbeat:.1f} us of CPU per heartbeat at "
                            f"{RANKS} ranks, {ratio:.1f} x the reference loop's (the median of "
                            f"the windows' ratios; its median {reference:.2f} us; goal <= "
                            f"{GOAL_REFERENCE_RATIO:.0f})")
        figures = {"cpu_percent": cpu_percent, "status_bytes": len(status_text),
                   "throughput_bytes_per_s": throughput_rate, "metrics_bytes": len(body)}
    finally:
        left = stop_launcher(launcher, sleeps)
        for sock in socks:
            sock.close()
        print(f"  stopped: launcher exit status {launcher.returncode}; sleeps left running: "
              f"{len(left)}")
        if left:
            missing.append(f"{len(left)} of the launcher's sleeps outlived it (killed now)")
    return figures


def extrapolate(figures):
    """Everything scales with ranks / heartbeat interval: print 100,000 ranks at 1 s and at the
    default 5 s, and the job size where the launcher would pass half a core."""
    if not figures:
        return
    per_rank_cpu = figures["cpu_percent"] / RANKS  # % of a core per rank at one beat a second
    big = 100_000
    print(f"# linear extrapolation to {big:,} ranks: {big:,} connections; at 1 s, {big:,} "
          f"messages/s, launcher {per_rank_cpu * big:.0f} % of a core, status.json "
          f"{figures['status_bytes'] / RANKS * big / 1e6:.1f} MB rewritten every second, "
          f"throughput.jsonl {figures['throughput_bytes_per_s'] / RANKS * big / 1e6:.2f} MB/s, "
          f"/metrics {figures['metrics_bytes'] / RANKS * big / 1e6:.1f} MB; at the default 5 s, "
          f"a fifth of each rate: {per_rank_cpu * big / 5:.0f} % of a core")
    if per_rank_cpu > 0:
        print(f"# half a core at about {50 / per_rank_cpu:,.0f} ranks with 1 s heartbeats, "
              f"{5 * 50 / per_rank_cpu:,.0f} ranks with 5 s heartbeats")


def heartbeat_overhead(build, work, package, jobs, failures, missing):
    env = base_env() | {"PYTHONPATH": str(package),
                        "LD_LIBRARY_PATH": library_path(build), "OMP_NUM_THREADS": "1",
                        "GLOG_minloglevel": "2", "PHASE_SECONDS": str(PHASE_S),
                        "PHASES": str(PHASES)}
    rank = TOP / "tests" / "bench" / "monitor_rank.py"

    def run(job):
        result = subprocess.run(
            [str(build / "primus-launch"), "--nproc", "4",
             f"--primus-job-dir={work}/hb-{job}", "--primus-heartbeat-interval=1",
             "--primus-progress-interval=0", "--", PYTHON, str(rank)],
            env=env, cwd=work, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=180)
        # Rank 0's JSON line (searched for, in case another rank's output shares its line).
        lines = [line[line.index('{"phases"'):] for line in result.stdout.splitlines()
                 if '{"phases"' in line]
        if result.returncode != 0 or not lines:
            raise RuntimeError(f"4 ranks with heartbeats switched on and off: exit status "
                               f"{result.returncode}: {result.stderr.strip()[-300:]}")
        out = json.loads(lines[-1])
        if out["heartbeat_interval"] != "1" or not out["reporting"]:
            raise RuntimeError(f"the ranks saw PRIMUS_HEARTBEAT_INTERVAL="
                               f"{out['heartbeat_interval']}, reporting={out['reporting']}")
        if len(out["phases"]) != PHASES:
            raise RuntimeError(f"rank 0 reported {len(out['phases'])} phases, not {PHASES}")
        return out

    ratios, job_ratios, build_us, sent = [], [], [], 0
    total = {True: [0, 0.0], False: [0, 0.0]}  # heartbeats on, off: [steps, seconds]
    try:
        for job in range(jobs):
            out = run(job)
            phases = out["phases"]
            rate = [p["steps"] / p["seconds"] for p in phases]
            for a in range(0, len(phases) - 1, 2):
                on, off = (a, a + 1) if phases[a]["on"] else (a + 1, a)
                if not phases[on]["on"] or phases[off]["on"]:
                    raise RuntimeError(f"phases {a} and {a + 1} are not one on, one off")
                ratios.append(rate[on] / rate[off])
            job_total = {flag: [sum(p[k] for p in phases if p["on"] == flag)
                                for k in ("steps", "seconds")] for flag in (True, False)}
            job_ratios.append((job_total[True][0] / job_total[True][1])
                              / (job_total[False][0] / job_total[False][1]))
            for flag in (True, False):
                total[flag] = [a + b for a, b in zip(total[flag], job_total[flag])]
            build_us.append(out["heartbeat_us"])
            sent += out["heartbeats_sent"]
        rates = {flag: steps / seconds for flag, (steps, seconds) in total.items()}
    except (RuntimeError, OSError, ValueError, KeyError, ZeroDivisionError,
            subprocess.TimeoutExpired) as e:
        missing.append(str(e))
        return
    pooled = rates[True] / rates[False]
    ratio = statistics.median(ratios)
    print(f"# heartbeat overhead: 4 ranks of torch DDP (gloo, 1 thread each) with "
          f"primus.should_stop() every step and --primus-heartbeat-interval=1, {jobs} jobs, "
          f"each with {PHASES} phases of {PHASE_S:g} s, heartbeats sent in every other one "
          f"(on, off, off, on, ...): {sent} heartbeats sent by rank 0 in "
          f"{total[True][1]:.0f} s with them")
    for flag, name in ((True, "with heartbeats"), (False, "without")):
        print(f"  {name:>15}: {rates[flag]:7.2f} steps/s ({total[flag][0]} steps in "
              f"{total[flag][1]:.1f} s)")
    print("  each job's ratio: " + " ".join(f"{r:.4f}" for r in job_ratios)
          + f"; all the jobs' phases together: {pooled:.4f}")
    print(f"  building one heartbeat costs rank 0 (with node_stats) "
          f"{statistics.median(build_us):.0f} us (median over the jobs): "
          f"{statistics.median(build_us) / 1e4:.3f} % of its time at one a second")
    print(f"# throughput with heartbeats / without: {ratio:.4f}, the median of {len(ratios)} "
          f"neighbouring pairs of phases (min {min(ratios):.3f}, max {max(ratios):.3f}) "
          f"(goal >= {GOAL_RATIO})")
    if ratio < GOAL_RATIO:
        failures.append(f"throughput with heartbeats every second is {ratio:.4f} x without "
                        f"(goal >= {GOAL_RATIO})")


def main():
    build = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    # primus._coll needs the collectives' library on the loader's path, which is read when the
    # process starts: start again with it.
    wanted = library_path(build)
    if not os.environ.get("LD_LIBRARY_PATH", "").startswith(wanted):
        os.execve(sys.executable, [sys.executable, *sys.argv],
                  dict(os.environ, LD_LIBRARY_PATH=":".join(
                      p for p in (wanted, os.environ.get("LD_LIBRARY_PATH")) if p)))
    raise_nofile()
    jobs = int(os.environ.get("PRIMUS_BENCH_MONITOR_JOBS", "5"))
    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="primus-bench-monitor-"))
    failures, missing = [], []
    try:
        # A copy of the staged package: the build copies its modules over the staged ones in
        # place, which crashes a process that has them loaded (a rebuild during the run).
        package = work / "package"
        shutil.copytree(build / "python" / "stage", package)
        sys.path.insert(0, str(package))
        try:
            figures = launcher_load(build, work, failures, missing)
            extrapolate(figures)
        except (RuntimeError, OSError, ValueError, KeyError, ImportError) as e:
            missing.append(f"launcher load: {e}")
        heartbeat_overhead(build, work, package, jobs, failures, missing)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"# {time.monotonic() - began:.0f} s in all")
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
