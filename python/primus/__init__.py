"""Primus for Slurm, the rank side.

`primus.checkpoint` saves and loads HDF5 checkpoints that are never torn (libprimus-ckpt). The
rank environment (RANK, WORLD_SIZE, MASTER_ADDR, PRIMUS_CKPT_DIR, ...) comes from the Primus
SPANK plugin under srun, or from primus-launch.
"""

__version__ = "0.1.0"
__all__ = ["checkpoint", "__version__"]


def __getattr__(name):
    # Submodules load on first use: `import primus` stays cheap and needs no torch.
    if name == "checkpoint":
        import importlib

        return importlib.import_module(".checkpoint", __name__)
    raise AttributeError(f"module 'primus' has no attribute {name!r}")
