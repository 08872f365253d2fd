"""primus.train(workers=N): the number of ranks, checked against the job's, or made by running
the script again under `primus-launch --nproc N` (docs/architecture.md, "The rank-side API")."""

import os
import shutil
import sys
from pathlib import Path

from . import _env

_MARK = "PRIMUS_TRAIN_RELAUNCHED"


def _launcher():
    """primus-launch: PRIMUS_LAUNCH, else on PATH, else beside this installed package
    (PREFIX/bin for a package in PREFIX/lib/python3/dist-packages/primus)."""
    given = _env.given("PRIMUS_LAUNCH")
    if given:
        return given
    found = shutil.which("primus-launch")
    if found:
        return found
    here = Path(__file__).resolve().parent
    for parent in here.parents[:5]:
        candidate = parent / "bin" / "primus-launch"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _job_world():
    """(world size, who set it) when this process is a rank of a job, else None."""
    if _env.given("PRIMUS_CONTROL"):
        who = "primus-launch"
    elif _env.is_set("PRIMUS_ENV_VERSION"):
        who = "srun --primus"
    elif _env.is_set("WORLD_SIZE"):
        who = "WORLD_SIZE"
    else:
        return None
    return _env._int_variable("WORLD_SIZE", 1), who


def ensure_world(workers):
    """Returns when this process is a rank of a world of `workers` ranks (None: any). In a plain
    `python script.py` with workers > 1 it does not return: the script runs again as that many
    ranks under primus-launch (this process becomes primus-launch)."""
    if workers is None:
        return
    wanted = _env.count(workers, "primus.train: workers")
    if wanted < 1:
        raise ValueError("primus.train: workers: expected at least 1 rank, got 0")
    world = _job_world()
    if world is not None:
        size, who = world
        if size != wanted:
            raise ValueError(f"primus.train: workers={wanted}, but this job has {size} ranks "
                             f"(set by {who}); pass workers={size}, or workers=None to take the "
                             "job's, or change the job's number of tasks")
        return
    if wanted == 1:
        return
    if _env.given(_MARK):
        raise RuntimeError("primus.train: the script was run again under primus-launch, and "
                           "still sees no rank environment (PRIMUS_ENV_VERSION is unset)")
    argv = list(getattr(sys, "orig_argv", []))[1:] or sys.argv
    if not sys.argv or sys.argv[0] in ("", "-c"):
        raise RuntimeError(f"primus.train: workers={wanted} runs the script again in "
                           f"{wanted} ranks, and this Python runs no script file; run it as "
                           f"`primus-launch --nproc {wanted} -- python SCRIPT`")
    launcher = _launcher()
    if launcher is None:
        raise RuntimeError(f"primus.train: workers={wanted} needs primus-launch, which is not on "
                           "PATH (`module load primus`, or set PRIMUS_LAUNCH to its path)")
    command = [launcher, "--nproc", str(wanted), "--", sys.executable, *argv]
    print(f"primus.train: workers={wanted}: running the script again as {wanted} ranks: "
          f"primus-launch --nproc {wanted} -- {' '.join([sys.executable, *argv])}",
          file=sys.stderr, flush=True)
    sys.stdout.flush()
    _env.export(_MARK, "1")
    os.execv(launcher, command)
