#!/usr/bin/env python3
"""A rank's failure on one machine, recovered three ways, interleaved: tests/python/train_cnn.py
(the CNN example under primus.train, a checkpoint every 10 steps) under `primus-launch --nproc 4
--primus-max-restarts=1`, rank 2 exiting 3 after step 13 (once the standby exists, as it would
for a failure hours into a job):

  rejoin        --primus-recover=rejoin: ranks 0, 1 and 3 stay alive, the standby (started
                and done importing torch) becomes rank 2;
  rejoin-cold   the same with --primus-no-standby: a new rank 2 starts from nothing;
  restart       --primus-recover=restart: every rank ends and starts again.

Each way's recovery time counts from the failure (the `rank-failed` event) to the first step
taken after it (the trace's first step 11, resumed from step 10, on any rank); the job's cold
start counts from its `launched` event to its first step 1. Printed: each run's figures, the
medians, and the ratios of each rejoin to the restart and to the cold start. Issue 43's goal is at most
0.25 of the cold start for a rank killed at 8 ranks on the testbed; this benchmark is its
one-machine form and holds the rejoin to the same 0.25 (failing while it misses). Exits 1 when a
goal is missed or a run failed.
Usage: bench_rejoin.py BUILD_DIR. Environment: PRIMUS_BENCH_REJOIN_PAIRS (3)."""

import json
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "tests" / "python"))

from job_env import job_environment  # noqa: E402

HARNESS = TOP / "tests" / "python" / "train_cnn.py"
EXAMPLE = TOP / "examples" / "cnn"
GOAL_OF_COLD_START = 0.25
NPROC, FAIL_AT, RESUMED_STEP = 4, 13, 11


def event_times(workdir):
    """{event: the first time it was written (UNIX seconds)}."""
    times = {}
    for line in (workdir / "primus-local" / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        stamp = datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()
        times.setdefault(event["event"], stamp)
    return times


def first_step_times(workdir):
    """{step: the earliest time any rank finished it, per run label} as [(time, run, step)]."""
    entries = []
    for path in (workdir / "trace").glob("rank-*.jsonl"):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            entries.append((entry["time"], entry["run"], entry["step"]))
    return sorted(entries)


WAYS = {"rejoin": ["--primus-recover=rejoin"],
        "rejoin-cold": ["--primus-recover=rejoin", "--primus-no-standby"],
        "restart": ["--primus-recover=restart"]}


def one_run(build, data, way, work):
    workdir = Path(tempfile.mkdtemp(prefix=f"{way}-", dir=work))
    (workdir / "trace").mkdir()
    env = job_environment(PRIMUS_DATA=f"{data}/*.tfrecord", EPOCHS=3, TRACE=workdir / "trace",
                          TRACE_RUN=way, PRIMUS_STOP_INTERVAL=0, FAIL_AT=FAIL_AT, FAIL_RANK=2,
                          FAIL_MARKER=workdir / "failed", AFTER_COMMIT=1,
                          **({"STANDBY": "wait"} if way == "rejoin" else {}))
    result = subprocess.run([str(build / "primus-launch"), "--nproc", str(NPROC), *WAYS[way],
                             "--primus-max-restarts=1", "--",
                             sys.executable, str(HARNESS)], cwd=workdir, env=env,
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"{way}: primus-launch exited {result.returncode}: "
                           f"{result.stderr[-2000:]}")
    events = event_times(workdir)
    steps = first_step_times(workdir)
    first = next(t for t, _, step in steps if step == 1)
    failed = events["rank-failed"]
    again = next(t for t, _, step in steps if step == RESUMED_STEP and t > failed)
    if way.startswith("rejoin") and "rejoined" not in events:
        raise RuntimeError(f"{way}: no rejoin was made: {sorted(events)}")
    return first - events["launched"], again - failed


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    build = Path(sys.argv[1]).resolve()
    pairs = int(os.environ.get("PRIMUS_BENCH_REJOIN_PAIRS", "3"))
    with tempfile.TemporaryDirectory(prefix="primus-bench-rejoin-") as tmp:
        work = Path(tmp)
        data = work / "data"
        made = subprocess.run([sys.executable, str(EXAMPLE / "make_data.py"), str(data),
                               "--records", "512", "--files", "3"], capture_output=True,
                              text=True, env=job_environment())
        if made.returncode != 0:
            print(f"# MISSING: the data: {made.stderr[-1000:]}")
            return 1
        figures = {way: [] for way in WAYS}
        cold = []
        names = list(WAYS)
        try:
            for k in range(pairs):
                for way in names[k % len(names):] + names[:k % len(names)]:
                    start, recovery = one_run(build, data, way, work)
                    cold.append(start)
                    figures[way].append(recovery)
                    print(f"  {way:<11} cold start {start:.2f} s, from the failure to step "
                          f"{RESUMED_STEP} {recovery:.2f} s", flush=True)
        except (RuntimeError, StopIteration, KeyError) as error:
            print(f"# MISSING: {error}")
            return 1
    rejoin, restart = statistics.median(figures["rejoin"]), statistics.median(figures["restart"])
    without = statistics.median(figures["rejoin-cold"])
    start = statistics.median(cold)
    print(f"# one machine, {NPROC} ranks, rank 2 failing after step {FAIL_AT}: rejoin "
          f"{rejoin:.2f} s, without the standby {without:.2f} s, restart {restart:.2f} s "
          f"(medians of {pairs}); rejoin / restart {rejoin / restart:.2f} (without the standby "
          f"{without / restart:.2f}); cold start {start:.2f} s, rejoin / cold start "
          f"{rejoin / start:.2f} (without the standby {without / start:.2f}) "
          f"(goal <= {GOAL_OF_COLD_START})")
    if rejoin / start > GOAL_OF_COLD_START:
        print(f"GOAL NOT MET: rejoin / cold start {rejoin / start:.2f} > {GOAL_OF_COLD_START}")
        return 1
    print("# goal met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
