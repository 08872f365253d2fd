#!/usr/bin/env python3
"""The fault campaign (issue 39, docs/reliability.md): one fault at a seeded instant of a real
training job's life, checked against the contract of docs/reliability.md, trial after trial.

Each trial starts the job (tests/faults/fault_job.py: 4 ranks of the CNN example under
primus.train on this machine), waits for the instant's marker, waits a seeded delay more,
injects the fault, and then judges:
  hung          the run did not end within its deadline (the stop grace, a hang timeout)
  status        it ended with a status the fault does not allow (0 for a stop that came
                before the end: never finished without finishing)
  left behind   a process of the job was still there after it ended
  lost          running the same command again (as a requeue would) did not finish the job
  loop          a second restart for the one fault
  wrong bits    the final parameters and optimizer state differ from the uninterrupted run's
  records       some record was read other than once per epoch in the steps the final model
                descends from (tests/python/train_oracle.py)
and prints a table per fault and instant. Exit status 1 when any trial is not ok.

  campaign.py --quick           the fixed set that scripts/test runs (a few minutes)
  campaign.py --trials N --seed S   N trials over every fault and instant, seeded
  --recover restart|rejoin|both  the faults of a running job with --primus-recover=restart, with
                                 =rejoin (a fault named FAULT@rejoin; flip-copy and standby-dies
                                 exist only there), or both (the default)
"""

import argparse
import collections
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "python"))

import fault_job  # noqa: E402
import train_oracle  # noqa: E402
from injectors import (IoErrors, build_eio_library, damage_newest,  # noqa: E402
                       kill_standby_then_rank, signal_launcher, signal_rank, user_stop)

STOP_GRACE = 15  # --primus-stop-grace of every trial: the deadline after a stop
HANG_TIMEOUT = 6  # --primus-hang-timeout
RUN_TIMEOUT = 120  # any one run, whatever happens
OPTIONS = (f"--primus-stop-grace={STOP_GRACE}", "--primus-max-restarts=1",
           f"--primus-hang-timeout={HANG_TIMEOUT}", "--primus-heartbeat-interval=1")
# A step takes a little longer than the model needs, so that the training (24 steps) lasts long
# enough to be aimed at; should_stop() agrees at every step.
JOB_ENV = {"STEP_SLEEP": "0.04", "PRIMUS_STOP_INTERVAL": "0"}

# Where a fault lands: a marker, then a delay drawn from [low, high) seconds.
INSTANTS = {
    "start": ("launched", 0.0, 0.4),     # primus-launch has started the ranks
    "imports": ("launched", 0.4, 1.6),   # the ranks import torch, connect, rendezvous
    # The second half of the start, up to every rank's ready (measured in the reference run:
    # the launcher's ranks-ready event), where the ranks connect and rendezvous.
    "rendezvous": ("launched", None, None),
    "first-step": ("step>=1", 0.0, 0.1),
    "before-save": ("step>=9", 0.0, 0.06),  # (eio-save's) the first save is at step 10
    "save": ("checkpoint-started", 0.0, 0.03),
    "commit": ("checkpoint-committed", 0.0, 0.01),
    "mid-training": ("step>=14", 0.0, 0.2),
    "last-step": ("step>=23", 0.0, 0.1),
    "after-last": ("final", 0.0, 0.05),  # rank 0 wrote the result; the ranks are exiting
    "resume-load": ("resuming", 0.0, 1.6),  # in a run that resumes (a stopped job first)
}


# fault: (inject, statuses the faulted run may end with, between_runs)
FAULTS = {
    "sigterm-launcher": (signal_launcher(signal.SIGTERM), {0, 75}, False),
    "sigusr2-launcher": (signal_launcher(signal.SIGUSR2), {0, 75}, False),
    "sigkill-launcher": (signal_launcher(signal.SIGKILL), {0, -9}, False),
    "sigterm-rank": (signal_rank(signal.SIGTERM), {0, 75}, False),
    "sigkill-rank": (signal_rank(signal.SIGKILL), {0}, False),
    "sigstop-rank": (signal_rank(signal.SIGSTOP), {0}, False),
    "primus-launch-stop": (user_stop, {0, 75}, False),
    "flip-newest": (damage_newest("flip"), {0}, True),
    "truncate-newest": (damage_newest("truncate"), {0}, True),
    "disk-full": (None, set(), True),  # disk_full(): a trial of its own
    "eio-save": (None, set(), True),  # eio_save(): a trial of its own
    # With --primus-recover=rejoin (issue 43): rank 1 killed while rank 0's committed step in
    # memory has a bit flipped in every replicated tensor (FAULT_ENV), and the standby killed
    # just before rank 1 is.
    "flip-copy": (signal_rank(signal.SIGKILL), {0}, False),
    "standby-dies": (kill_standby_then_rank(), {0}, False),
}
# What a fault's job runs with, beyond JOB_ENV (tests/python/train_cnn.py's knobs).
FAULT_ENV = {"flip-copy": {"FLIP_COPY": "0"}}
# A fault name may end with this: the trial runs with --primus-recover=rejoin, with slower
# steps: the standby imports torch beside the ranks, and on two cores the campaign itself then
# aimed its faults a second late, after the training had ended (no rejoin to make).
REJOIN = "@rejoin"
REJOIN_ENV = {"STEP_SLEEP": "0.15"}
REJOINED = collections.Counter()  # rejoin trials: how many rejoined (and how many did not)
REJOIN_ONLY = ("flip-copy", "standby-dies")  # meaningless without a rejoin
EIO_SECONDS = 2.0  # how long writes under the checkpoint directory fail with EIO
EIO_LIBRARY = None  # eio_preload.so, built by main() (None: no C compiler here)


def ready_seconds(job):
    """Seconds from the launcher's start of the ranks to every rank's ready, in a finished run."""
    ready = [e for e in job.events() if e["event"] == "ranks-ready"]
    if not ready:
        raise SystemExit("campaign.py: the uninterrupted run has no ranks-ready event")
    return float(ready[0]["details"]["seconds"])


def reached(job, marker, run):
    if marker == "final":
        return job.finished_output()
    if marker.startswith("step>="):
        return job.step() >= int(marker[len("step>="):])
    allocation = len(job.runs) - 1
    return any(e["event"] == marker and e.get("allocation") == allocation for e in job.events())


def aim(job, run, instant, rng):
    """Waits for the instant's marker and its delay; False when the run ended first."""
    marker, low, high = INSTANTS[instant]
    deadline = time.monotonic() + RUN_TIMEOUT
    while not reached(job, marker, run):
        if run.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    time.sleep(rng.uniform(low, high))
    return run.poll() is None


class Verdicts:
    def __init__(self):
        self.rows = collections.defaultdict(collections.Counter)
        self.failures = []

    def add(self, fault, instant, verdict, detail=""):
        self.rows[(fault, instant)][verdict] += 1
        if verdict not in ("ok", "missed"):
            self.failures.append(f"{fault} at {instant}: {verdict}: {detail}")

    def table(self):
        columns = ["ok", "missed", "status", "hung", "left behind", "lost", "loop", "wrong bits",
                   "records"]
        lines = [f"{'FAULT':<20} {'INSTANT':<14} " + " ".join(f"{c:>11}" for c in columns)]
        for (fault, instant), counts in sorted(self.rows.items()):
            lines.append(f"{fault:<20} {instant:<14} " +
                         " ".join(f"{counts.get(c, 0):>11}" for c in columns))
        return "\n".join(lines)


def end_of(run, timeout):
    status = run.wait(timeout)
    if status is None:
        run.kill()
    return status


def trial(work, launcher, options, data, reference, fault, instant, rng, keep):
    """One trial; returns (verdict, detail)."""
    token = secrets.token_hex(8)
    base, rejoin = fault.removesuffix(REJOIN), fault.endswith(REJOIN)
    job = fault_job.Job(work / f"{base}-{'rejoin-' if rejoin else ''}{instant}-{token}", launcher,
                        data, token,
                        options=list(options) + (["--primus-recover=rejoin"] if rejoin else []),
                        env={**JOB_ENV, **(REJOIN_ENV if rejoin else {}),
                             **FAULT_ENV.get(base, {})})
    fault = base
    try:
        if fault == "disk-full":
            return disk_full(job, reference)
        if fault == "eio-save":
            return eio_save(job, reference, rng)
        outcome = fault_run(job, fault, instant, rng)
        verdict = outcome if outcome else judge_after(job, reference)
        if rejoin and verdict[0] != "missed":
            REJOINED[any(e["event"] == "rejoined" for e in job.events())] += 1
        return verdict
    finally:
        for run in job.runs:
            if run.poll() is None:
                run.kill()
        job.kill_leftovers()
        if not keep:
            shutil.rmtree(job.dir, ignore_errors=True)


def fault_run(job, fault, instant, rng):
    """The faulted run, and the stop before it where the fault needs one; a verdict when the
    trial is over already, else None."""
    inject, allowed, between_runs = FAULTS[fault]
    if between_runs or instant == "resume-load":
        first = job.start("pre", STOP_AT=13)
        status = end_of(first, RUN_TIMEOUT)
        if status != 75:
            return "lost", f"the stop before the trial ended with {status}"
    if between_runs:
        inject(job, None)
        run = job.start("faulted")
        status = end_of(run, RUN_TIMEOUT)
        if status is None:
            return "hung", "the run after the damage did not end"
        if status != 0:
            return "lost", f"the run after the damage ended with {status}:\n" + \
                run.output()[-2000:]
        return None
    run = job.start("faulted")
    if not aim(job, run, instant, rng):
        end_of(run, RUN_TIMEOUT)
        return "missed", "the run ended before the instant"
    inject(job, run)
    deadline = STOP_GRACE + 10 if fault != "sigstop-rank" else HANG_TIMEOUT + 20
    status = end_of(run, deadline)
    if status is None:
        return "hung", f"no end within {deadline} s:\n" + run.output()[-2000:]
    if status not in allowed:
        return "status", f"ended with {status}:\n" + run.output()[-3000:]
    return None


def judge_after(job, reference):
    """After the faulted run: nothing left, no second restart, and the same command run again
    (as a requeue would) finishes with the reference's bits, every record once per epoch."""
    time.sleep(0.5)
    if job.leftovers():
        left = job.leftovers()
        job.kill_leftovers()
        return "left behind", f"pids {left}"
    if len(job.restarts()) > 1:
        return "loop", f"{len(job.restarts())} restarts for one fault"
    run = job.runs[-1]
    for attempt in range(2):
        if job.final_state() is not None and run.poll() == 0:
            break
        run = job.start(f"again{attempt}")
        status = end_of(run, RUN_TIMEOUT)
        if status is None:
            return "hung", "a run after the fault did not end"
        if status != 0:
            return "lost", f"run again, it ended with {status}:\n" + run.output()[-3000:]
    final = job.final_state()
    if final is None:
        return "lost", "no final state"
    different = sorted(k for k in reference if final.get(k) != reference[k])
    if different or final.keys() != reference.keys():
        return "wrong bits", f"differ: {different[:5]}"
    try:
        train_oracle.check_exactly_once(
            train_oracle.read_trace(job.dir / "trace"), fault_job.RECORDS, fault_job.EPOCHS,
            fault_job.RECORDS // fault_job.GLOBAL_BATCH)
    except AssertionError as error:
        return "records", str(error)[:500]
    return "ok", ""


def disk_full(job, reference):
    """The checkpoints on a file system too small for a third one (a 640 KiB tmpfs, as root):
    a save fails with ENOSPC. The job must end non-zero within its deadlines, naming the full
    disk (a restart under --primus-max-restarts=1 fails the same way: one restart, no loop);
    once the disk has room again, the same command resumes from the last committed step and
    ends with the reference's bits."""
    if os.geteuid() != 0:
        return "missed", "not root: no tmpfs to fill"
    mount = job.dir / "small-disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=640k,mode=0700", "tmpfs", str(mount)],
                   check=True, capture_output=True)
    try:
        job.options.append(f"--primus-ckpt-dir={mount}")
        run = job.start("faulted")
        status = end_of(run, RUN_TIMEOUT)
        output = run.output()
        if status is None:
            return "hung", "the run on a full disk did not end:\n" + output[-2000:]
        if status in (0, 75) or "No space left on device" not in output:
            return "status", f"ended with {status}, not naming the full disk:\n" + output[-3000:]
        subprocess.run(["mount", "-o", "remount,size=64m", str(mount)], check=True,
                       capture_output=True)
        return judge_after(job, reference)
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def eio_save(job, reference, rng):
    """I/O errors on the checkpoint directory for EIO_SECONDS from a seeded instant of a save
    (eio_preload.c in every process of the job): the job ends 0 (a rank's failed save or
    commit is a rank failure, and the restart finds the disk working), or non-zero naming the
    I/O error; no hang, no loop, nothing left, and the same command then ends with the
    reference's bits."""
    if EIO_LIBRARY is None:
        return "missed", "no C compiler here to build eio_preload.c"
    errors = IoErrors(EIO_LIBRARY, job.dir, job.dir / "primus-local" / "ckpt")
    job.env.update(errors.environment())
    run = job.start("faulted")
    # From just before the first save (the rank files fail) or from its start (the rank files
    # may be written already, and the commit fails).
    if not aim(job, run, rng.choice(["before-save", "save"]), rng):
        end_of(run, RUN_TIMEOUT)
        return "missed", "the run ended before its first save"
    errors.started()
    try:
        status = run.wait(EIO_SECONDS)
    finally:
        errors.stopped()
    if status is None:
        status = end_of(run, RUN_TIMEOUT)
    output = run.output()
    if status is None:
        return "hung", "the run with I/O errors did not end:\n" + output[-2000:]
    if status != 0 and "Input/output error" not in output:
        return "status", f"ended with {status}, not naming the I/O error:\n" + output[-3000:]
    return judge_after(job, reference)


QUICK = [
    # Each bug of issue 39 that a fault on one machine can show, at the instant that showed it.
    ("sigterm-launcher", "start"), ("sigterm-launcher", "imports"),
    ("sigterm-launcher", "imports"), ("sigterm-launcher", "save"),
    ("sigterm-launcher", "rendezvous"), ("sigterm-launcher", "rendezvous"),
    ("sigkill-rank", "rendezvous"), ("sigstop-rank", "rendezvous"),
    ("sigusr2-launcher", "imports"), ("primus-launch-stop", "imports"),
    ("sigkill-launcher", "imports"), ("sigkill-launcher", "mid-training"),
    ("sigkill-rank", "imports"), ("sigkill-rank", "first-step"), ("sigkill-rank", "commit"),
    ("sigterm-rank", "imports"), ("sigstop-rank", "mid-training"),
    ("sigterm-launcher", "resume-load"), ("sigterm-launcher", "last-step"),
    ("sigterm-launcher", "after-last"),
    ("flip-newest", "-"), ("truncate-newest", "-"), ("disk-full", "-"), ("eio-save", "-"),
    # The same contract with the ranks that survive a rank's failure kept alive (issue 43).
    ("sigkill-rank@rejoin", "mid-training"), ("sigkill-rank@rejoin", "commit"),
    ("sigstop-rank@rejoin", "mid-training"), ("sigterm-launcher@rejoin", "mid-training"),
    ("flip-copy@rejoin", "mid-training"), ("standby-dies@rejoin", "mid-training"),
]


def plan(args):
    rng = random.Random(args.seed)
    if args.quick:
        return [(fault, instant, random.Random(args.seed * 1000 + i))
                for i, (fault, instant) in enumerate(QUICK)]
    trials = []
    pairs = [(f, i) for f in FAULTS for i in INSTANTS if not FAULTS[f][2] and i != "before-save"] + \
        [(f, "-") for f in FAULTS if FAULTS[f][2]]
    pairs = [(f, i) for f, i in pairs if f not in REJOIN_ONLY]
    if args.recover in ("rejoin", "both"):
        rejoined = [(f + REJOIN, i) for f, i in pairs if not FAULTS[f][2]] + \
            [(f + REJOIN, i) for f in REJOIN_ONLY for i in ("mid-training", "commit")]
        pairs = rejoined if args.recover == "rejoin" else pairs + rejoined
    pairs = [(f, i) for f, i in pairs
             if (not args.only or f.removesuffix(REJOIN) == args.only) and
             (not args.at or i == args.at)]
    if not pairs:
        sys.exit("campaign.py: no fault and instant match --only and --at")
    for n in range(args.trials):
        fault, instant = pairs[n % len(pairs)] if n < len(pairs) else rng.choice(pairs)
        trials.append((fault, instant, random.Random(rng.getrandbits(64))))
    return trials


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launcher", default=os.path.abspath("primus-launch"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument("--only", help="a fault name: only its trials")
    parser.add_argument("--recover", choices=("restart", "rejoin", "both"), default="both",
                        help="the trials' --primus-recover: restart, rejoin (the faults of a "
                             "running job), or both (the default)")
    parser.add_argument("--at", help="an instant's name: only its trials")
    parser.add_argument("--ready-seconds", type=float,
                        help="the start's length for the rendezvous instant, where the launcher "
                             "writes no ranks-ready event (an older build)")
    parser.add_argument("--launcher-options",
                        help="primus-launch's options instead of the campaign's (for an older "
                             "build that lacks one): one string, split at spaces")
    parser.add_argument("--work", help="keep every trial's directory here")
    parser.add_argument("--junit", help="write JUnit XML here: a case per trial")
    parser.add_argument("--finish", type=int, default=0,
                        help="instead of faults: N uninterrupted runs that must finish")
    parser.add_argument("--burn", action="store_true",
                        help="with --finish: beside a CPU burner on every core")
    args = parser.parse_args()
    if not os.access(args.launcher, os.X_OK):
        sys.exit(f"campaign.py: {args.launcher} is not built (run from the build directory)")
    work = Path(args.work or tempfile.mkdtemp(prefix="primus-faults-"))
    work.mkdir(parents=True, exist_ok=True)
    data = fault_job.make_data(work / "data")
    global EIO_LIBRARY
    EIO_LIBRARY = build_eio_library(work)
    options = args.launcher_options.split() if args.launcher_options is not None else OPTIONS
    reference_job = fault_job.Job(work / "reference", args.launcher, data, secrets.token_hex(8),
                                  options=options, env=JOB_ENV)
    run = reference_job.start("reference")
    status = end_of(run, RUN_TIMEOUT)
    if status != 0:
        sys.exit(f"campaign.py: the uninterrupted run failed ({status}):\n{run.output()[-3000:]}")
    reference = reference_job.final_state()
    start = args.ready_seconds or ready_seconds(reference_job)
    INSTANTS["rendezvous"] = ("launched", 0.5 * start, start)
    print(f"the uninterrupted run: ranks ready {start:.2f} s after the launcher started them",
          flush=True)
    verdicts = Verdicts()
    cases = []
    started = time.monotonic()
    if args.finish:
        import multiprocessing

        stop = multiprocessing.Event()
        burners = burn(stop) if args.burn else []
        try:
            for n in range(args.finish):
                began = time.monotonic()
                verdict, detail = finished_run(work, args.launcher, options, data, reference, n)
                verdicts.add("none (finish)", "burner" if args.burn else "-", verdict, detail)
                cases.append(("none (finish)", "burner" if args.burn else "-", verdict, detail,
                              time.monotonic() - began))
                print(f"finished run {n:<4} {verdict:<12} {time.monotonic() - began:5.1f} s",
                      flush=True)
                if verdict != "ok":
                    print("  " + detail.replace("\n", "\n  "), flush=True)
        finally:
            stop.set()
            for p in burners:
                p.join()
    for fault, instant, rng in ([] if args.finish else plan(args)):
        if (args.only and fault.removesuffix(REJOIN) != args.only) or \
                (args.at and instant != args.at):
            continue
        began = time.monotonic()
        # A trial whose run ended before its instant is drawn again (a fixed set must try what
        # it names); after three such runs it counts as missed.
        for _ in range(3):
            verdict, detail = trial(work, args.launcher, options, data, reference, fault, instant,
                                    rng, keep=bool(args.work))
            if verdict != "missed":
                break
        verdicts.add(fault, instant, verdict, detail)
        cases.append((fault, instant, verdict, detail, time.monotonic() - began))
        print(f"{fault:<20} {instant:<14} {verdict:<12} {time.monotonic() - began:5.1f} s",
              flush=True)
        if verdict not in ("ok", "missed"):
            print("  " + detail.replace("\n", "\n  "), flush=True)
    print()
    print(verdicts.table())
    total = sum(sum(c.values()) for c in verdicts.rows.values())
    print(f"\n{total} trials in {time.monotonic() - started:.0f} s, "
          f"{len(verdicts.failures)} not ok")
    if REJOINED:
        print(f"with --primus-recover=rejoin: {REJOINED[True]} trials rejoined, "
              f"{REJOINED[False]} restarted or ended (a fault before the first commit, or at a "
              "stop or the end)")
    if args.junit:
        write_junit(args.junit, cases)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if verdicts.failures else 0


def burn(stop):
    """A CPU burner on every core (a busy machine), until `stop` is set."""
    import multiprocessing

    def spin(flag):
        while not flag.is_set():
            sum(range(10000))

    procs = [multiprocessing.Process(target=spin, args=(stop,), daemon=True)
             for _ in range(os.cpu_count() or 2)]
    for p in procs:
        p.start()
    return procs


def finished_run(work, launcher, options, data, reference, n):
    """One uninterrupted run that must finish: status 0, nothing left, the reference's bits.
    A rank that aborted leaves a core in the job directory: its threads' backtraces are the
    detail (issue 39's abort at interpreter exit)."""
    token = secrets.token_hex(8)
    job = fault_job.Job(work / f"finish-{n}-{token}", launcher, data, token, options=options,
                        env=JOB_ENV, cores=True)
    try:
        run = job.start("whole")
        status = end_of(run, RUN_TIMEOUT)
        detail = ""
        for core in job.dir.glob("core*"):
            detail += f"\n{core}:\n" + fault_job.backtraces(core)
        if status is None:
            return "hung", run.output()[-2000:] + detail
        if status != 0:
            return "status", f"ended with {status}:\n" + run.output()[-3000:] + detail
        time.sleep(0.5)
        if job.leftovers():
            return "left behind", f"pids {job.leftovers()}"
        if job.final_state() != reference:
            return "wrong bits", ""
        return "ok", ""
    finally:
        for run in job.runs:
            if run.poll() is None:
                run.kill()
        job.kill_leftovers()
        if not any(job.dir.glob("core*")):
            shutil.rmtree(job.dir, ignore_errors=True)


def write_junit(path, cases):
    """One case per trial (scripts/test counts them): a verdict other than ok fails it, a
    trial whose instant was missed three times is skipped."""
    from xml.etree import ElementTree as ET

    suite = ET.Element("testsuite", name="faults", tests=str(len(cases)))
    seen = collections.Counter()
    for fault, instant, verdict, detail, seconds in cases:
        seen[(fault, instant)] += 1
        case = ET.SubElement(suite, "testcase", classname=fault,
                             name=f"{instant}#{seen[(fault, instant)]}", time=f"{seconds:.1f}")
        if verdict == "missed":
            ET.SubElement(case, "skipped", message="missed: the run ended before the instant")
        elif verdict != "ok":
            failure = ET.SubElement(case, "failure", message=verdict)
            failure.text = detail
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(path, encoding="unicode")


if __name__ == "__main__":
    sys.exit(main())
