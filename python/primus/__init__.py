"""Primus for Slurm, the rank side.

`primus.checkpoint` saves and loads HDF5 checkpoints that are never torn (libprimus-ckpt);
`primus.comm` runs collectives between the ranks (libprimus-coll). The
rank environment (RANK, WORLD_SIZE, MASTER_ADDR, PRIMUS_CKPT_DIR, ...) comes from the Primus
SPANK plugin under srun, or from primus-launch.
"""

__version__ = "0.1.0"
__all__ = ["checkpoint", "comm", "__version__"]


def __getattr__(name):
    # Submodules load on first use: `import primus` stays cheap and needs no torch.
    if name in ("checkpoint", "comm"):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'primus' has no attribute {name!r}")
