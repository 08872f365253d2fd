"""How the fault campaign (tests/faults/campaign.py) injects its faults into a running job
(tests/faults/fault_job.py): signals to primus-launch or to one rank, `primus-launch stop`, a
newest checkpoint damaged between runs, and I/O errors on the checkpoint directory through
eio_preload.c (an LD_PRELOAD library built here). An injector is inject(job, run)."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import fault_job

HERE = Path(__file__).resolve().parent


def signal_launcher(sig):
    def inject(job, run):
        os.kill(run.process.pid, sig)
    return inject


def rank_pids(job, run):  # noqa: ARG001 (an injector's signature)
    """The ranks' pids: the launcher's children that run the training program (not the
    dataset's check, nor the orphan guard), waiting up to 2 s for them to be started."""
    for _ in range(200):
        try:
            with open(f"/proc/{run.process.pid}/task/{run.process.pid}/children") as f:
                children = [int(p) for p in f.read().split()]
        except OSError:
            return []
        ranks = []
        for pid in children:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            # The orphan guard is a fork of primus-launch: its command line is the launcher's,
            # which names the harness too. Counted as a rank, it kept the count above nproc, so
            # that every rank fault waited out the 2 s below and landed late (after the training
            # had ended, in rejoin trials), and one in two hit the guard's neighbour.
            if os.path.basename(argv[0]) != b"primus-launch" and \
                    any(fault_job.HARNESS.name.encode() in arg for arg in argv[1:]):
                ranks.append(pid)
        if len(ranks) == job.nproc:
            return ranks
        time.sleep(0.01)
    return ranks


def signal_rank(sig, which=1):
    def inject(job, run):
        pids = rank_pids(job, run)
        if len(pids) > which:
            os.kill(pids[which], sig)
        elif pids:
            os.kill(pids[-1], sig)
    return inject


def standby_pid(run):
    """primus-launch's rejoin standby (its child running python -m primus._standby), or None."""
    try:
        with open(f"/proc/{run.process.pid}/task/{run.process.pid}/children") as f:
            children = [int(p) for p in f.read().split()]
    except OSError:
        return None
    for pid in children:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"primus._standby" in f.read():
                    return pid
        except OSError:
            continue
    return None


def kill_standby_then_rank(which=1):
    """--primus-recover=rejoin's standby dies (SIGKILL, once it exists: up to 2 s), then a rank
    does: the replacement must be started afresh."""
    def inject(job, run):
        for _ in range(200):
            pid = standby_pid(run)
            if pid is not None:
                os.kill(pid, 9)
                break
            time.sleep(0.01)
        time.sleep(0.1)
        signal_rank(9, which)(job, run)
    return inject


def user_stop(job, run):  # noqa: ARG001 (an injector's signature)
    (job.dir / "primus-local").mkdir(exist_ok=True)
    subprocess.run([job.launcher, "stop", str(job.dir / "primus-local")], capture_output=True,
                   timeout=30)


def damage_newest(kind):
    """Between runs: after a stop, one bit flipped in place (or a file cut short) in a rank
    file of the newest checkpoint, which the next run must skip for the one before."""
    def inject(job, run):
        newest = job.newest_checkpoint()
        if newest is None:
            return
        target = newest / "rank-00001.h5"
        data = bytearray(target.read_bytes())
        if kind == "flip":
            offset = data_offset(target)
            data[offset] ^= 0x10
            target.write_bytes(bytes(data))
        else:
            with open(target, "r+b") as f:
                f.truncate(len(data) // 2)
    return inject


def data_offset(path):
    """A byte in the middle of the largest contiguous dataset of an HDF5 file (h5py): where a
    flipped bit is data that a load reads, not a structure that opening the file would reject."""
    import h5py

    found = []
    with h5py.File(path, "r") as f:
        def visit(name, item):
            if isinstance(item, h5py.Dataset) and item.id.get_offset() is not None:
                found.append((item.id.get_storage_size(), item.id.get_offset(), name))
        f.visititems(visit)
    if not found:
        raise RuntimeError(f"{path}: no contiguous dataset to damage")
    size, offset, _ = max(found)
    return offset + size // 2


def build_eio_library(work):
    """eio_preload.c as a shared library under `work`, or None when there is no C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    library = Path(work) / "eio_preload.so"
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(library),
                    str(HERE / "eio_preload.c"), "-ldl"], check=True, capture_output=True)
    return library


class IoErrors:
    """I/O errors on one directory for the processes of a job that preload the library:
    environment() is what the job's commands need, and while started() and until stopped()
    every write or fsync under `directory` fails with EIO."""

    def __init__(self, library, job_dir, directory):
        self.library = library
        self.trigger = Path(job_dir) / "eio-trigger"
        self.directory = Path(directory)

    def environment(self):
        return {"LD_PRELOAD": str(self.library), "PRIMUS_EIO_TRIGGER": str(self.trigger)}

    def started(self):
        self.trigger.write_text(f"{os.path.realpath(self.directory)}\n")

    def stopped(self):
        self.trigger.unlink(missing_ok=True)
