"""Where this rank stands, from the variables the Primus plugin or primus-launch set."""

import operator
import os


def _int_variable(name, default):
    text = os.environ.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}: expected an integer, got {text!r}") from None


def rank_and_world(rank=None, world_size=None):
    """(rank, world_size): the arguments, else RANK and WORLD_SIZE, else (0, 1)."""
    if rank is None:
        rank = _int_variable("RANK", 0)
    if world_size is None:
        world_size = _int_variable("WORLD_SIZE", 1)
    if not isinstance(rank, int) or not isinstance(world_size, int):
        raise TypeError("rank and world_size must be integers")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} of world size {world_size}: expected 0 <= rank < world_size")
    return rank, world_size


def checkpoint_dir(directory=None):
    """The checkpoint root: the argument, else PRIMUS_CKPT_DIR."""
    if directory is not None:
        return os.fspath(directory)
    directory = os.environ.get("PRIMUS_CKPT_DIR")
    if not directory:
        raise ValueError("no checkpoint directory: pass dir=... or run under srun --primus "
                         "(which sets PRIMUS_CKPT_DIR)")
    return directory


_secret = None


def job_secret():
    """The job secret (PRIMUS_JOB_SECRET), or None without one. The first call takes it out of
    the environment and keeps it in this process's memory only, so that the programs this rank
    starts (DataLoader workers, shells, anything the user runs) do not inherit it; the
    extensions get it as an argument."""
    global _secret
    if _secret is None:
        value = os.environ.pop("PRIMUS_JOB_SECRET", None)  # unsetenv too
        if value:
            _secret = value
    return _secret


def count(value, where):
    """`value` as an int >= 0 (any integer type, not bool); TypeError or ValueError naming
    `where` otherwise."""
    if isinstance(value, bool):
        raise TypeError(f"{where}: expected an integer, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{where}: expected an integer, got {type(value).__name__}") from None
    if number < 0:
        raise ValueError(f"{where}: expected an integer >= 0, got {number}")
    return number
