"""The CNN example (examples/cnn/train.py, primus.train) run as the tests need it: the example's
model, data, optimizer and schedule, with hooks that only observe or interrupt.

EXAMPLE=DIR: where examples/cnn is (default: this tree's).
OUT=FILE: at the end rank 0 writes the final parameters, buffers and optimizer state as hex.
TRACE=DIR: every rank appends one JSON line per step to DIR/rank-R.jsonl: the run (TRACE_RUN,
SLURM_RESTART_COUNT, PRIMUS_LAUNCH_RESTARTS and, after a rejoin, PRIMUS_GENERATION: a rank that
rejoined is in a new run from then on), its resume step, the step, the epoch and the numbers of
the records it trained on (from the records themselves, not from the plan).
STOP_AT=S: after step S rank 0 sends SIGTERM to its parent (primus-launch, as a preemption would
reach it) and waits until the signal comes back; with PRIMUS_STOP_INTERVAL=0 (an agreement at
every step) that step's should_stop() agrees on the stop, and the ranks stop after step S.
STEP_SLEEP=seconds per step. PROGRESS=FILE:
rank 0 writes its step there. FAIL_AT=S, FAIL_RANK (1), FAIL_MARKER=FILE: that rank exits 3
after step S, once (AFTER_COMMIT=1: at the first step from S on with a committed checkpoint);
with STANDBY=wait it first waits (up to a minute) for primus-launch's rejoin
standby (under srun: its node's) to be done importing, with STANDBY=kill it kills that standby instead. HANG_AT=S (with FAIL_RANK and FAIL_MARKER): that rank stops itself with
SIGSTOP after step S instead, once (a hang for --primus-hang-timeout). IGNORE_STOP=1: the ranks ignore the stop signals (until SIGKILL).
PAUSE_AT=S: in the job's first run, rank 0 waits after step S until a stop signal arrives (up
to 2 minutes), so that a preemption sent meanwhile stops the job after step S (with
PRIMUS_STOP_INTERVAL=0).
FLIP_COPY=R,R...: those ranks flip one bit in every replicated tensor of their committed step
kept in memory for a rejoin (primus._memory_copy), each time a new copy is held: a copy that no
longer verifies.
PAD_MIB=N: the model carries N MiB more, a parameter that is never trained (a state that takes
time to restore, for the benchmarks). DROP_CACHES=1: the failing rank (FAIL_AT) drops the page
cache before it exits (as root), so that what the others restore from files comes from the disk.
CKPT_EVENTS=FILE: rank 0 appends 'started STEP' when it starts a checkpoint. SLOW_WRITE=seconds:
every rank's file of an asynchronous checkpoint takes that much longer to write (in the
background), so that a stop can be sent while a save is in flight.
"""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

EXAMPLE = Path(os.environ.get("EXAMPLE") or
               Path(__file__).resolve().parents[2] / "examples" / "cnn")
sys.path.insert(0, str(EXAMPLE))

import cnn  # noqa: E402
import train as example  # noqa: E402

import primus  # noqa: E402
from primus import checkpoint  # noqa: E402


def due(step, at):
    """Whether the failure or hang planned for step `at` comes at `step`. With AFTER_COMMIT=1 it
    comes at the first step from `at` on at which a checkpoint is committed (LATEST exists): a
    save started before `at` commits at a later step's agreement, later still on a loaded
    machine, and a rejoin needs a committed checkpoint to go on from."""
    if os.environ.get("AFTER_COMMIT") != "1":
        return step == at
    root = os.environ.get("PRIMUS_CKPT_DIR")
    return at >= 0 and step >= at and root is not None and os.path.exists(
        os.path.join(root, "LATEST"))


def node_standby_name():
    """Under srun: the abstract socket of this node's standby (python/primus/_standby_node.py)."""
    return "primus-standby.{}.{}.{}".format(os.environ["SLURM_JOB_ID"],
                                            os.environ.get("SLURM_STEP_ID", ""),
                                            os.environ.get("SLURMD_NODENAME", ""))


def standby_pid():
    """The pid of the rejoin's standby: on one machine primus-launch's (a child of this rank's
    parent), under srun this node's; or None."""
    if "SLURM_STEP_ID" in os.environ:
        wanted = node_standby_name().encode()
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and wanted in Path(f"/proc/{entry}/cmdline").read_bytes():
                    return int(entry)
            except OSError:
                continue
        return None
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getppid() and fields[0] != "Z" and b"primus._standby" in cmdline:
            return int(entry)
    return None


def waiting_on_stdin(pid):
    """Whether the process is blocked reading its standard input: a standby done importing
    (under srun: the node's standby listens on its socket once it is)."""
    if "SLURM_STEP_ID" in os.environ:
        return f"@{node_standby_name()}" in Path("/proc/net/unix").read_text()
    try:
        return Path(f"/proc/{pid}/syscall").read_text().startswith("0 0x0 ")  # read(0, ...)
    except OSError:
        return False


def flip_held_copy(flipped):
    """Flips a bit in each replicated tensor of this rank's held copy, once per copy (`flipped`:
    [the last one done])."""
    from primus import _memory_copy

    held = _memory_copy._held
    if held is None or flipped[0] is held:
        return
    for name, array in held.arrays.items():
        if "@rank" not in name and array.nbytes:
            array.reshape(-1).view("uint8")[0] ^= 1
    flipped[0] = held


def meet_standby(kill):
    """Waits for the standby to exist and be done importing (blocked reading its standard input,
    as long into a job it would be); with `kill`, kills it and waits until it has ended."""
    deadline = time.monotonic() + 60
    while (pid := standby_pid()) is None or not (kill or waiting_on_stdin(pid)):
        if time.monotonic() > deadline:
            raise SystemExit("no standby became ready within a minute")
        time.sleep(0.05)
    if kill:
        os.kill(pid, signal.SIGKILL)
        while standby_pid() is not None and time.monotonic() < deadline:
            time.sleep(0.01)


def main():
    job = primus.init()
    if os.environ.get("IGNORE_STOP") == "1":
        for signum in (signal.SIGTERM, signal.SIGUSR2):
            signal.signal(signum, signal.SIG_IGN)
    def run_and_resume():
        # Read at every step: a rank that rejoins goes on in a new generation, from its resume.
        names = ["TRACE_RUN", "SLURM_RESTART_COUNT", "PRIMUS_LAUNCH_RESTARTS"]
        if os.environ.get("PRIMUS_GENERATION", "0") != "0":
            names.append("PRIMUS_GENERATION")
        run = "/".join(os.environ.get(name, "-") for name in names)
        return run, int(Path(job.resume).name.split("-")[1]) if job.resume else None

    trace_dir = os.environ.get("TRACE")
    trace = open(Path(trace_dir) / f"rank-{job.rank}.jsonl", "a") if trace_dir else None
    resume = run_and_resume()[1]
    seen = []
    seen_in = [os.environ.get("PRIMUS_GENERATION", "0")]

    def decode(record):
        generation = os.environ.get("PRIMUS_GENERATION", "0")
        if generation != seen_in[0]:  # a rejoin: the failed step's records were not trained on
            seen.clear()
            seen_in[0] = generation
        seen.append(cnn.record_number(record))
        return cnn.decode(record)

    stop_at = int(os.environ.get("STOP_AT", "-1"))
    pause_at = int(os.environ.get("PAUSE_AT", "-1"))
    fail_at = int(os.environ.get("FAIL_AT", "-1"))
    hang_at = int(os.environ.get("HANG_AT", "-1"))
    fail_rank = int(os.environ.get("FAIL_RANK", "1"))
    fail_marker = os.environ.get("FAIL_MARKER")
    sleep = float(os.environ.get("STEP_SLEEP", "0"))
    progress = os.environ.get("PROGRESS")
    ckpt_events = os.environ.get("CKPT_EVENTS")
    if ckpt_events and job.rank == 0:
        original_save = checkpoint.save

        def noting_save(state, step, **kwargs):
            with open(ckpt_events, "a") as out:
                out.write(f"started {step}\n")
            return original_save(state, step, **kwargs)

        checkpoint.save = noting_save
    slow_write = float(os.environ.get("SLOW_WRITE", "0"))
    if slow_write:
        # Each rank's file takes so much longer to finish, in the background writer's thread:
        # training goes on meanwhile, and a stop is likely to come while a save is in flight.
        from primus import _ckpt

        class SlowWriter:
            def __init__(self, *args):
                self._writer = original_writer(*args)

            def __getattr__(self, name):
                return getattr(self._writer, name)

            def finish(self):
                # Only the asynchronous saves (their writer thread): a save at a stop must end
                # within the partition's GraceTime.
                if threading.current_thread().name == "primus-checkpoint":
                    time.sleep(slow_write)
                return self._writer.finish()

        original_writer = _ckpt.RankWriter
        _ckpt.RankWriter = SlowWriter

    flip_copy = job.rank in {int(r) for r in os.environ.get("FLIP_COPY", "").split(",") if r}
    flipped = [None]

    def on_step(info):
        if flip_copy:
            flip_held_copy(flipped)
        if trace is not None:
            run, resumed = run_and_resume()
            trace.write(json.dumps({"run": run, "time": time.time(), "resume": resumed,
                                    "rank": job.rank, "step": info.step, "epoch": info.epoch,
                                    "ids": seen}) + "\n")
            trace.flush()
        seen.clear()
        if sleep:
            time.sleep(sleep)
        if progress and job.rank == 0:
            Path(progress + ".tmp").write_text(str(info.step))
            os.replace(progress + ".tmp", progress)
        if due(info.step, fail_at) and job.rank == fail_rank and not (
                fail_marker and os.path.exists(fail_marker)):
            if fail_marker:
                Path(fail_marker).touch()
            if os.environ.get("STANDBY"):
                meet_standby(os.environ["STANDBY"] == "kill")
            if os.environ.get("DROP_CACHES") == "1":
                os.sync()
                with open("/proc/sys/vm/drop_caches", "w") as out:
                    out.write("3\n")
            print(f"rank {job.rank}: failing at step {info.step}", flush=True)
            os._exit(3)
        if due(info.step, hang_at) and job.rank == fail_rank and not (
                fail_marker and os.path.exists(fail_marker)):
            if fail_marker:
                Path(fail_marker).touch()
            print(f"rank {job.rank}: hanging at step {info.step}", flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)
        if info.step == pause_at and job.rank == 0 and resume is None:
            # The others wait for rank 0 in this step's should_stop() (with
            # PRIMUS_STOP_INTERVAL=0): the ranks stop after step pause_at.
            for _ in range(1200):
                if primus.stop_requested():
                    break
                time.sleep(0.1)
        if info.step == stop_at and job.rank == 0 and not primus.stop_requested():
            os.kill(os.getppid(), signal.SIGTERM)
            for _ in range(500):
                if primus.stop_requested():
                    break
                time.sleep(0.01)

    pad_mib = int(os.environ.get("PAD_MIB", "0"))
    if pad_mib:
        plain = cnn.SmallCNN

        class PaddedCNN(plain):
            def __init__(self):
                super().__init__()
                import torch

                self.pad = torch.nn.Parameter(torch.zeros(pad_mib << 18), requires_grad=False)

        cnn.SmallCNN = PaddedCNN
    result = example.main(decode=decode, on_step=on_step)
    if job.rank == 0 and os.environ.get("OUT"):
        state = {f"model.{k}": v.detach().cpu().numpy().tobytes().hex()
                 for k, v in result.model.state_dict().items()}
        for key, values in result.optimizer.state_dict()["state"].items():
            for name, value in values.items():
                state[f"optim.{key}.{name}"] = tensor_hex(value)
        Path(os.environ["OUT"]).write_text(json.dumps(state))
    print(f"rank {job.rank}: finished at step {result.steps}", flush=True)


def tensor_hex(value):
    import torch

    return torch.as_tensor(value).detach().cpu().numpy().tobytes().hex()


if __name__ == "__main__":
    main()
