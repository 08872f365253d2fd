"""primus.init(), primus.should_stop() and the stop signals (docs/architecture.md, "The rank-side
API" and "Preemption and requeue").

SIGTERM and the warning signal (PRIMUS_PREEMPT_SIGNAL, default USR2) mean the same to a rank:
save at the next step boundary and exit with EXIT_PREEMPTED (PRIMUS_EXIT_PREEMPTED, 75). The
handlers only raise a flag, so a signal that arrives during a save (a second SIGTERM) never
interrupts it. should_stop(), called by every rank once per step, agrees on the flag through
primus.comm every few steps (primus/_agreement.py), so that every rank stops at the same step.
"""

import atexit
import os
import signal
import sys
import threading
import time

from . import _agreement, _control, _env, _gpu, _saves

EXIT_PREEMPTED = _env._int_variable("PRIMUS_EXIT_PREEMPTED", 75)

_lock = threading.Lock()
_job = None
_stop_signal = None  # the number of the first stop signal received, or None
_comm = None  # the primus.comm communicator that agrees on stops (world size > 1)
# should_stop()'s agreement (primus/_agreement.py): the calls since the last one and the steps
# it fixed until the next (every rank counts alike), when it ended, and the interval.
_calls_since_agreement = 0
_steps_agreed = 1
_agreed_at = None
_stop_interval = None
_dynamic = False  # --primus-data-mode=dynamic (PRIMUS_DATA_MODE, read at init())
_destroy_registered = False  # _destroy_process_group is registered with atexit


class Job:
    """What init() found: this rank, its world, and where to resume from."""

    def __init__(self, rank, world_size, local_rank, restart_count, job_dir, ckpt_dir, resume):
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self.restart_count = restart_count
        self.job_dir = job_dir
        self.ckpt_dir = ckpt_dir
        self.resume = resume  # the committed checkpoint directory to resume from, or None
        self.device = "cpu"

    def __repr__(self):
        return (f"primus.Job(rank={self.rank}, world_size={self.world_size}, "
                f"local_rank={self.local_rank}, restart_count={self.restart_count}, "
                f"resume={self.resume!r})")


def _stop_signals():
    names = {"USR1": signal.SIGUSR1, "USR2": signal.SIGUSR2, "TERM": signal.SIGTERM,
             "INT": signal.SIGINT, "HUP": signal.SIGHUP}
    given = _env.raw("PRIMUS_PREEMPT_SIGNAL")
    warning = (given if given is not None else "USR2").upper().removeprefix("SIG")
    if warning not in names:
        raise ValueError(f"PRIMUS_PREEMPT_SIGNAL: expected one of {', '.join(names)}, got "
                         f"{given!r}")
    return sorted({signal.SIGTERM, names[warning]})


def _raise_flag(signum, frame):  # noqa: ARG001 (the signal module's signature)
    global _stop_signal
    if _stop_signal is None:
        _stop_signal = signum


def _check_main_thread():
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("primus.init() must be called from the main thread (it installs the "
                           "stop-signal handlers)")


def _install_handlers():
    """The stop signals raise the flag from now on. Installed as init() ends, never earlier:
    until then a stop signal ends the rank at once (its default action), which the launcher
    counts as stopped while starting, since a rank that has not finished its rendezvous has
    nothing to save, and a handler there would only interrupt the rendezvous's blocking calls
    (torch's TCPStore fails with EINTR). With SA_RESTART (siginterrupt False) the handler
    interrupts no blocking call that can be restarted: it only raises the flag."""
    for signum in _stop_signals():
        signal.signal(signum, _raise_flag)
        signal.siginterrupt(signum, False)
    atexit.register(_ignore_stop_signals)


def _ignore_stop_signals():
    """At exit: the interpreter's teardown puts a Python handler back to the default action, so
    a stop signal after the last atexit function would kill a rank that finished (or stopped as
    asked) and turn its exit status into 128+SIGTERM. Ignored signals stay ignored; the
    launcher's deadline (SIGKILL) still bounds the exit."""
    for signum in _stop_signals():
        signal.signal(signum, signal.SIG_IGN)


def _newest_or_given(ckpt_dir):
    """The newest committed checkpoint under ckpt_dir that verifies (fully), else the
    PRIMUS_RESUME the user gave (a start from another run's checkpoint), else None."""
    if ckpt_dir and os.path.isdir(ckpt_dir):
        from . import _ckpt

        checkpoint, skipped = _ckpt.load_latest(ckpt_dir, True)  # as load() checks it
        for reason in skipped:
            print(f"primus: not resuming from {reason}", file=sys.stderr)
        if checkpoint is not None:
            path = checkpoint.dir
            checkpoint.close()
            return path
    return _env.given("PRIMUS_RESUME")


def _share_from_rank0(rank, compute):
    """compute() on rank 0, its text (or None, or its exception's message) on every rank."""
    import numpy as np

    kind, text = 0, b""
    if rank == 0:
        try:
            value = compute()
            if value is not None:
                kind, text = 1, value.encode()
        except Exception as error:  # noqa: BLE001 (every rank raises it below)
            kind, text = 2, f"{type(error).__name__}: {error}".encode()
    comm = _communicator()
    header = np.array([kind, len(text)], dtype=np.int64)
    comm.broadcast(header)
    body = np.frombuffer(text, dtype=np.uint8).copy() if rank == 0 else \
        np.empty(int(header[1]), dtype=np.uint8)
    if header[1]:
        comm.broadcast(body)
    value = body.tobytes().decode()
    if header[0] == 2:
        raise RuntimeError(f"primus.init(): rank 0 could not tell which checkpoint to resume "
                           f"from: {value}")
    return value if header[0] == 1 else None


def _fresh_start(ckpt_dir, restart_count):
    """--primus-fresh where no primus-launch resolves the resume point (a plain srun or script):
    the checkpoint directory moved aside (primus-ckpt set-aside's implementation) before the
    job's first start, never after a requeue or a restart, which resume from the job's own. Run
    by the one rank that resolves the resume point."""
    if (_env.given("PRIMUS_FRESH") or "0").lower() not in ("1", "yes", "true") or restart_count:
        return
    from . import _ckpt

    moved = _ckpt.set_aside(ckpt_dir)
    if moved:
        print(f"primus: --primus-fresh: moved the earlier checkpoints aside to {moved}",
              file=sys.stderr, flush=True)


def _resolve_resume(ckpt_dir, rank, world_size, restart_count=0):
    """Where every rank resumes from (rule 4 of "Preemption and requeue"): the same checkpoint
    on every rank. Under primus-launch (PRIMUS_CONTROL set) the launcher resolved it before the
    attempt: PRIMUS_RESUME, or nothing when it is unset. Otherwise rank 0 resolves it and the
    others take its answer through primus.comm (with the plugin's environment; without it each
    rank resolves alone)."""
    if _env.given("PRIMUS_CONTROL"):
        return _env.given("PRIMUS_RESUME")

    def resolve():
        if rank == 0:
            _fresh_start(ckpt_dir, restart_count)
        return _newest_or_given(ckpt_dir)

    if world_size == 1 or not _env.is_set("PRIMUS_ENV_VERSION"):
        return resolve()
    return _share_from_rank0(rank, resolve)


def _init_torch(job):
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return
    if job.world_size > 1 and dist.is_available() and not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        # torch holds the GIL in the rendezvous: the heartbeats stop until "ready", and the
        # launcher's hang watch then knows this rank waits rather than being stopped.
        _control.event("rendezvous")
        if job.rank != 0:
            _wait_for_store()
        dist.init_process_group(backend, init_method="env://", rank=job.rank,
                                world_size=job.world_size)
        # The group primus made is torn down before the interpreter's own teardown: left to the
        # latter, torch 1.13 sometimes aborts at exit ("terminate called without an active
        # exception", seen here when a rank exits 75 right after a stop).
        global _destroy_registered
        if not _destroy_registered:
            _destroy_registered = True
            atexit.register(_destroy_process_group)
    if torch.cuda.is_available():
        torch.cuda.set_device(job.local_rank % torch.cuda.device_count())
        job.device = f"cuda:{torch.cuda.current_device()}"


def _wait_for_store(timeout=60.0):
    """Waits until rank 0's TCP store (MASTER_ADDR:MASTER_PORT) accepts connections. torch's
    client, refused, sleeps about a second before it tries again: a rank that came before rank 0
    had its store up lost that second at every start and every rejoin (the cold start at 4 ranks
    here took 1.4 or 2.4 s, a rejoin from the standby 0.1 or 1.1 s). Refused, this tries again
    after 5 ms; anything else, or the timeout, is left to torch's own connect to report."""
    import socket

    addr, port = _env.text("MASTER_ADDR"), _env.given("MASTER_PORT")
    if not addr or not port:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((addr, int(port)), timeout=1.0):
                return
        except ConnectionRefusedError:
            time.sleep(0.005)
        except (OSError, ValueError):
            return


def _destroy_process_group():
    try:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 (at exit, nothing is left to tell)
        pass


def init(torch=True):
    """Reads the rank environment of the Primus plugin or primus-launch and returns the Job;
    idempotent. Installs the stop-signal handlers, resolves where to resume from (job.resume, the
    same on every rank: PRIMUS_RESUME as primus-launch resolved it, or, under a plain srun, the
    newest committed checkpoint under PRIMUS_CKPT_DIR that verifies as rank 0 finds it, else a
    PRIMUS_RESUME the user gave), and, with torch=True and torch
    importable, initialises torch.distributed (gloo, or nccl with CUDA) for a world above one.
    In a plain `python script.py` it is a world of one, with ./primus-local as the job
    directory."""
    global _job, _stop_interval, _dynamic
    with _lock:
        if _job is not None:
            return _job
        _stop_interval = _agreement.interval_seconds()
        _env.reread()  # the variables as this process has them now
        _dynamic = _env.given("PRIMUS_DATA_MODE") == "dynamic"
        if not _env.is_set("PRIMUS_ENV_VERSION") and _env.is_set("RANK"):
            print("primus: warning: RANK is set but PRIMUS_ENV_VERSION is not: the variables "
                  "did not come from the Primus plugin or primus-launch", file=sys.stderr)
        rank, world_size = _env.rank_and_world()
        job_dir, ckpt_dir = _env.job_directories()
        _env.export("PRIMUS_JOB_DIR", job_dir)  # for this rank's children, and data's index
        _env.export("PRIMUS_CKPT_DIR", ckpt_dir)
        restarts = _env._int_variable("PRIMUS_RESTART_COUNT",
                                      _env._int_variable("TORCHELASTIC_RESTART_COUNT", 0))
        job = Job(rank, world_size, _env._int_variable("LOCAL_RANK", 0), restarts, job_dir,
                  ckpt_dir, _resolve_resume(ckpt_dir, rank, world_size, restarts))
        _env.export("PRIMUS_RESUME", job.resume or None)
        _check_main_thread()
        _stop_signals()  # a bad PRIMUS_PREEMPT_SIGNAL fails before any connection
        _control.connect(rank, _env.job_secret(), lambda: _stop_signal)
        if torch:
            _init_torch(job)
        _install_handlers()
        _job = job
        # Ready: from here a stop signal makes this rank save and exit as asked.
        _control.event("ready")
        return job


def worker_init_fn(worker_id):  # noqa: ARG001 (torch's signature)
    """For torch DataLoader(worker_init_fn=primus.worker_init_fn): a worker ignores the stop
    signals (Slurm sends them to every process of the step), so that only the rank decides when
    to stop, and its workers end with it."""
    for signum in _stop_signals():
        signal.signal(signum, signal.SIG_IGN)


def stop_requested():
    """Whether this rank received a stop signal (no agreement: see should_stop())."""
    return _stop_signal is not None


def _communicator():
    global _comm
    if _comm is None:
        from . import comm

        _comm = comm.connect()
    return _comm


def _sample_count(samples):
    return 0 if samples is None else _env.count(samples, "should_stop(samples=...)")


def should_stop(samples=None):
    """True on every rank at the same step once any rank received a stop signal. Every rank
    calls it once per training step, after training on the step's batch. The ranks agree
    through a max-allreduce of a few flags through primus.comm (nothing in a world of one), not
    at every call but every few steps, about every PRIMUS_STOP_INTERVAL seconds (0.5 by
    default; 0: at every step): each agreement fixes, on every rank alike, how many calls come
    before the next one, so a stop lands up to about that long after its signal
    (primus/_agreement.py). The same agreement commits an asynchronous checkpoint.save() once
    every rank has written its file, and while such a save is in flight the ranks agree at
    every call: no other collective is needed for it (a failed write or commit raises here, on
    every rank).

    `samples`: the number of samples (records) this rank trained on in the step, for the
    monitor's throughput, when the batches do not come from primus.data (which counts its own
    batches: passing them here too would count them twice). Each call is also a step of the
    heartbeats: its time, and how long this rank waited in the agreement, which tells the
    launcher which rank comes late.

    In the dynamic data mode (--primus-data-mode=dynamic) ranks do not step together: a stop
    signal goes to primus-launch, which orders a checkpoint of every rank (see
    primus.data.Dataset.checkpoint_due()); should_stop() is True, with no collective, once this
    rank saved that stop's checkpoint."""
    global _calls_since_agreement, _steps_agreed, _agreed_at
    count = 0 if samples is None else _sample_count(samples)
    job = init(torch=False) if _job is None else _job
    # Each call costs microseconds here: right after a training step all of this runs cold, so
    # a step without an agreement makes as few calls as it can (one into _control).
    if job.world_size > 1 and not _dynamic:
        _calls_since_agreement += 1
        # While a save waits for its commit the ranks agree at every step, so that it commits
        # as soon as every rank has written its file (_saves.awaits_agreement()).
        pending = _saves.in_flight
        if _calls_since_agreement < _steps_agreed and (pending is None
                                                        or not pending._by_should_stop):
            _control.step_done(_stop_signal, count, agreeing=False)
            return False
    _control.step_done(_stop_signal, count)
    if _dynamic:
        _gpu.note_device()
        return _control.data_stop_saved()
    if job.world_size == 1:
        _gpu.note_device()
        _saves.agreed(*_saves.vote_flags(), subject=_saves.in_flight)
        return _stop_signal is not None
    _gpu.note_device()  # the heartbeats' GPU: once torch.cuda is initialised, any step will do
    import numpy as np

    started = time.perf_counter()
    proposal = _agreement.steps_to_propose(
        _stop_interval, None if _agreed_at is None else started - _agreed_at,
        _calls_since_agreement)
    paper, subject = _agreement.paper(_stop_signal)
    # The maximum of the flags, and of minus the proposals: the fewest steps any rank proposed.
    summed = np.array([*paper, -proposal], dtype=np.int32)
    _communicator().allreduce(summed, op="max")
    _agreed_at = time.perf_counter()
    _control.agreement_waited(_agreed_at - started)
    flags = [int(flag) for flag in summed]
    _calls_since_agreement, _steps_agreed = 0, -flags[4]
    _saves.agreed(flags[1], flags[2], flags[3], subject=subject)
    return flags[0] != 0


def agree(ok):
    """True on every rank only when every rank passed True (checkpoint.save's agreement when
    torch.distributed is not initialised)."""
    job = init(torch=False) if _job is None else _job
    if job.world_size == 1:
        return bool(ok)
    import numpy as np

    flag = np.array([1 if ok else 0], dtype=np.int32)
    _communicator().allreduce(flag, op="min")
    return bool(flag[0])


def initialized():
    return _job is not None


def abort_collectives(notice=None):
    """Ends the collectives a failed peer would hold (primus.comm's; the gradient sums and the
    agreements go through it): from primus-launch's reader thread when a new generation is
    announced (primus._rejoin), and before the communicator is made again."""
    comm = _comm
    if comm is not None:
        generation = (notice or {}).get("generation")
        comm.abort("primus-launch started generation " + str(generation) if generation else
                   "this rank is joining a new generation")


def new_generation(resume):
    """Makes this rank's groups again for a new generation (primus._rejoin.enter, which set the
    generation's variables): primus.comm's communicator is aborted and made again at its first
    use, should_stop()'s agreement starts afresh, and torch.distributed's group is destroyed and
    initialised on the new ports. job.resume becomes `resume`, the checkpoint every rank of the
    new generation loads."""
    global _comm, _calls_since_agreement, _steps_agreed, _agreed_at
    with _lock:
        if _job is None:
            raise RuntimeError("primus: a new generation before primus.init()")
        abort_collectives()
        _comm = None
        _calls_since_agreement, _steps_agreed, _agreed_at = 0, 1, None
        _destroy_process_group()
        _job.resume = resume
        _init_torch(_job)
    _control.event("ready")
