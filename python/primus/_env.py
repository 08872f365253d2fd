"""Every environment variable the rank side reads, in one place (as submitit's JobEnvironment):
the table below names each with its default and who sets it. The variables are read once, into
a snapshot, at primus.init() (or at the first use before it), never on a hot path; tests that
change the environment in-process call reread(). What a child process must inherit (the job
and checkpoint directories, the resume point) is written with export(), which keeps the
snapshot in step."""

import operator
import os
import threading

# name: (default, who sets it and what it means)
VARIABLES = {
    "RANK": ("0", "the plugin or primus-launch: this rank"),
    "WORLD_SIZE": ("1", "the plugin or primus-launch: the ranks of the job"),
    "LOCAL_RANK": ("0", "the plugin or primus-launch: this rank on its node"),
    "PRIMUS_ENV_VERSION": (None, "the plugin or primus-launch: the rank environment's version"),
    "PRIMUS_RESTART_COUNT": (None, "the plugin or primus-launch: requeues of the job"),
    "TORCHELASTIC_RESTART_COUNT": (None, "torchrun: restarts (when PRIMUS_RESTART_COUNT is unset)"),
    "SLURM_RESTART_COUNT": ("0", "Slurm: requeues (metrics.jsonl's allocation)"),
    "SLURMD_NODENAME": (None, "Slurm: this node's name (else the host name)"),
    "CUDA_VISIBLE_DEVICES": (None, "Slurm or the plugin: this rank's GPUs"),
    "PRIMUS_CONTROL": (None, "primus-launch: its control channel, ADDR:PORT"),
    "PRIMUS_LAUNCH_RESTARTS": ("0", "primus-launch: restarts in this allocation (the attempt)"),
    "PRIMUS_JOB_SECRET": (None, "the plugin or primus-launch: the job's secret (taken out)"),
    "PRIMUS_JOB_DIR": (None, "the plugin or primus-launch: the job directory"),
    "PRIMUS_CKPT_DIR": (None, "the plugin or primus-launch: the checkpoint root"),
    "PRIMUS_RESUME": (None, "primus-launch or the user: the checkpoint to resume from"),
    "PRIMUS_RECOVER": ("restart", "--primus-recover: rejoin or restart after a rank's failure"),
    "PRIMUS_REJOIN_DEADLINE": ("60", "--primus-rejoin-deadline: seconds a survivor waits"),
    "PRIMUS_REJOIN_MEMORY": ("4096", "--primus-rejoin-memory: MiB for the step in memory"),
    "PRIMUS_GENERATION": ("0", "primus-launch: the ranks' generation (one more per rejoin)"),
    "MASTER_ADDR": ("127.0.0.1", "the plugin or primus-launch: rank 0's host (torch's store)"),
    "MASTER_PORT": (None, "the plugin or primus-launch: torch's rendezvous port (a rejoin's)"),
    "PRIMUS_PORT": (None, "the plugin or primus-launch: primus.comm's TCP store port"),
    "PRIMUS_BOOTSTRAP": (None, "the plugin or primus-launch: pmix or tcp (primus.comm)"),
    "PRIMUS_FRESH": ("0", "--primus-fresh: move the checkpoints aside before the first start"),
    "PRIMUS_HEARTBEAT_INTERVAL": ("5", "--primus-heartbeat-interval: seconds (0: none)"),
    "PRIMUS_STOP_INTERVAL": (None, "seconds between should_stop()'s agreements (0.5)"),
    "PRIMUS_PREEMPT_SIGNAL": ("USR2", "--primus-preempt-signal: the warning signal"),
    "PRIMUS_EXIT_PREEMPTED": ("75", "--primus-exit-preempted: the status of a rank that stopped"),
    "PRIMUS_DATA": (None, "--primus-data: the dataset"),
    "PRIMUS_DATA_FORMAT": ("tfrecord", "--primus-data-format"),
    "PRIMUS_DATA_MODE": ("static", "--primus-data-mode: static or dynamic"),
    "PRIMUS_GLOBAL_BATCH_SIZE": (None, "--primus-global-batch-size"),
    "PRIMUS_SEED": ("0", "--primus-seed"),
    "PRIMUS_SHUFFLE": ("records", "--primus-shuffle"),
    "PRIMUS_SHUFFLE_BLOCK": ("1024", "--primus-shuffle-block"),
    "PRIMUS_DROP_LAST": ("0", "--primus-drop-last"),
    "PRIMUS_LAUNCH": (None, "the user: primus-launch for primus.train(workers=N)"),
    "PRIMUS_TRAIN_RELAUNCHED": (None, "primus.train: set when it ran the script again"),
}

_lock = threading.Lock()
_snapshot = None


def _read():
    return {name: os.environ.get(name) for name in VARIABLES}


def reread():
    """Reads every variable of the table again (primus.init() does; tests that set variables
    in-process too)."""
    global _snapshot
    with _lock:
        _snapshot = _read()


def adopt(env):
    """Takes `env` ({name: value}) as this process's whole environment and reads the table anew:
    a standby becoming a rank (primus._standby)."""
    os.environ.clear()
    os.environ.update(env)
    reread()


def raw(name):
    """The variable as set: None when unset, "" when set empty. Every name is one of the
    table's."""
    global _snapshot
    if name not in VARIABLES:
        raise KeyError(f"{name} is not in primus._env.VARIABLES")
    snapshot = _snapshot
    if snapshot is None:
        with _lock:
            if _snapshot is None:
                _snapshot = _read()
            snapshot = _snapshot
    return snapshot[name]


def given(name):
    """The variable's value as set; None when unset or empty."""
    return raw(name) or None


def text(name):
    """The variable's value, else its default (None when it has none)."""
    value = given(name)
    return value if value is not None else VARIABLES[name][0]


def is_set(name):
    """Whether the variable is set at all (even empty)."""
    return raw(name) is not None


def export(name, value):
    """Sets (or, with None, unsets) a variable for this process's children, and in the snapshot."""
    raw(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    with _lock:
        _snapshot[name] = value


def _int_variable(name, default):
    value = given(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}: expected an integer, got {value!r}") from None


def count_variable(name):
    """A count the launcher sets (0 when unset or not a number)."""
    try:
        return int(given(name) or 0)
    except ValueError:
        return 0


def job_directories():
    """(job directory, checkpoint root) for this rank: PRIMUS_JOB_DIR and PRIMUS_CKPT_DIR as
    the plugin or primus-launch set them; in a plain `python script.py`, ./primus-local (as
    primus-launch --nproc uses) and its ckpt/."""
    job_dir = given("PRIMUS_JOB_DIR") or os.path.abspath("primus-local")
    return job_dir, given("PRIMUS_CKPT_DIR") or os.path.join(job_dir, "ckpt")


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
    directory = given("PRIMUS_CKPT_DIR")
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
        value = given("PRIMUS_JOB_SECRET")
        export("PRIMUS_JOB_SECRET", None)  # unsetenv too
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
