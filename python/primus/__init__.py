"""Primus for Slurm, the rank side.

`primus.checkpoint` saves and loads HDF5 checkpoints that are never torn (libprimus-ckpt);
`primus.comm` runs collectives between the ranks (libprimus-coll);
`primus.data` reads each rank's share of a dataset, every record exactly once per epoch;
`primus.init()` and `primus.should_stop()` make a stopped (preempted) job save at a step every
rank agrees on and exit with `primus.EXIT_PREEMPTED`; should_stop() also counts the steps (and
with samples=n the samples) that the heartbeats report to primus-launch's monitor;
`primus.log(step, loss=...)` records user scalars in the job directory's metrics.jsonl;
`primus.train(model, dataset, epochs=10, workers=4)` is a ready data-parallel training loop
built from these calls (checkpoints, exact resume, a stop that saves).
The rank environment (RANK, WORLD_SIZE, MASTER_ADDR, PRIMUS_CKPT_DIR, ...) comes from the Primus
SPANK plugin under srun, or from primus-launch.
"""

__version__ = "0.1.0"
__all__ = ["checkpoint", "comm", "data", "ddp", "init", "log", "should_stop", "stop_requested",
           "train", "worker_init_fn", "EXIT_PREEMPTED", "Job", "StepInfo", "TrainResult",
           "__version__"]

from ._ddp import ddp  # noqa: E402 (imports torch only when called)
from ._metrics import log  # noqa: E402
from ._train import StepInfo, TrainResult, train  # noqa: E402 (imports torch only when called)

from ._runtime import (EXIT_PREEMPTED, Job, init, should_stop, stop_requested,  # noqa: E402
                       worker_init_fn)


def __getattr__(name):
    # Submodules load on first use: `import primus` stays cheap and needs no torch.
    if name in ("checkpoint", "comm", "data"):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'primus' has no attribute {name!r}")
