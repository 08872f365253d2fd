"""Checkpoints that are never torn, in HDF5 (libprimus-ckpt; format: docs/ckpt-format.md).

    from primus import checkpoint
    checkpoint.save({"model": model.state_dict(), "optim": opt.state_dict()}, step=step,
                    epoch=epoch, data_cursor=cursor)
    restored = checkpoint.load()          # the newest checkpoint that verifies, or None
    if restored:
        model.load_state_dict(restored.state["model"]); restored.restore_rng()

Every rank calls save() with the same step. By default each tensor is replicated and written
once, by rank `owner`; wrap a rank's part of a sharded tensor in Shard(tensor, global_shape,
offset) and a per-rank tensor in PerRank(tensor). A save becomes visible only when every rank
wrote its file and rank 0 committed: `agree(ok)` must return True on every rank only when all
ranks passed True (the default uses torch.distributed when it is initialized, else primus.comm
after primus.init()).

An asynchronous save (blocking=False) with the default agreement is also committed by
primus.should_stop(): its all-reduce carries whether every rank has finished writing, and the
first of its agreements (every few steps) after the last rank finished commits it, with no
collective of its own. A save still in flight when the program ends is finished at exit: written,
and committed when the program ends normally (on every rank, as saves are collective); after an
uncaught exception it is written but not committed.
"""

import atexit
import json
import os
import sys
import threading
import warnings


from . import _ckpt, _control, _env, _memory_copy, _restored, _rng, _runtime, _saves
from ._restored import Restored
from ._tree import PerRank, Shard, flatten

__all__ = ["save", "load", "wait", "release_staging", "latest_step", "verify", "prune", "Shard", "PerRank",
           "Restored", "PendingSave", "CheckpointError", "CorruptCheckpoint"]

CheckpointError = _ckpt.CheckpointError
CorruptCheckpoint = _ckpt.CorruptCheckpoint

_TREE = _restored.TREE
_META = _restored.META

# Rank 0's error from committing a save that should_stop() agreed on; the next should_stop()
# (or save()) makes every rank raise it.
_commit_failure = None
_saved = False  # whether this process has saved (load() then loads the newest, not the start)
_exit_hook = False  # whether _finish_at_exit is registered (by the first asynchronous save)
_lock = threading.Lock()
# Host copies of the last asynchronous save, reused by the next one: memory holds at most one
# copy of the state. release_staging() frees it.
_staging = {}
_agreement_tensors = []  # the last torch.distributed agreements' flags (_default_agree)
# The newest step this process saved or resumed from, per (checkpoint root, rank): a later save
# must be above it (_check_forward).
_own_steps = {}


def _own_key(root, rank):
    return os.path.realpath(root), rank


def _check_forward(root, rank, step):
    """Refuses a save at or below this process's own last save or resume step under `root`: a
    run's checkpoints only go forward, so that a step committed earlier in the run is never
    silently replaced. (A run resumed from step N may save a step above N that an earlier run
    also saved: that replaces the earlier copy, as docs/architecture.md says.)"""
    last = _own_steps.get(_own_key(root, rank))
    if last is not None and step <= last[0]:
        raise ValueError(f"primus.checkpoint.save: step {step} is not above step {last[0]}, "
                         f"which this run {last[1]} in {root}; a run's checkpoints go forward "
                         f"(save a step above {last[0]})")


def _default_agree(world_size):
    """After primus.init(), primus.comm's agreement, even where torch.distributed is initialized:
    it runs on the calling thread and keeps nothing. A gloo all_reduce's tensor can be released
    last by gloo's worker thread, which then takes the GIL to free it; at the save committed at
    exit that happened during the interpreter's teardown, and Python ended the thread through a
    noexcept frame: "terminate called without an active exception", SIGABRT of a rank that had
    finished (issue 41; a core showed c10d::ProcessGroupGloo::runLoop freeing the tensor)."""
    if world_size == 1:
        return lambda ok: bool(ok)
    if _runtime.initialized():
        return _runtime.agree
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is None or not dist.is_available() or not dist.is_initialized():
        raise CheckpointError(
            f"save() with world_size {world_size} needs agree=...: a function that returns True "
            "on every rank only when every rank passed True (torch.distributed is not "
            "initialized)")

    def agree(ok):
        device = "cuda" if dist.get_backend() == "nccl" else "cpu"
        flag = torch.tensor([1 if ok else 0], dtype=torch.int32, device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        # Kept, so that this thread, not the backend's, frees it (see above).
        _agreement_tensors.append(flag)
        del _agreement_tensors[:-4]
        return bool(flag.item())

    return agree


class PendingSave:
    """A save whose rank file is being written in the background. wait() joins it, agrees with
    the other ranks and commits; it returns the committed directory. primus.should_stop()
    commits it too, once every rank has written its file (committed() tells)."""

    def __init__(self, step, job, agree, commit, by_should_stop):
        self.step = step
        self._agree, self._commit = agree, commit
        self._by_should_stop = by_should_stop  # should_stop() may commit it (_agreed())
        self._error = None
        self._result = None
        self._done = False

        def run():
            try:
                job()
            except BaseException as error:  # reported by wait(), on the caller's thread
                self._error = error

        self._thread = threading.Thread(target=run, name="primus-checkpoint", daemon=True)
        self._thread.start()

    def done(self):
        """Whether the background write has finished (the commit still needs wait(), or a
        should_stop() agreement after every rank finished)."""
        return not self._thread.is_alive()

    def committed(self):
        """Whether wait() or should_stop() has committed it (or found that it failed). After
        should_stop() on a rank other than 0 it means that the commit was decided: rank 0
        writes it right after that agreement, and the next should_stop() confirms it to every
        rank (or raises rank 0's failure), so only then does latest_step() see it there."""
        return self._done

    def wait(self):
        """Joins the write, agrees with the other ranks and commits (every rank calls it);
        returns the committed directory on rank 0, None on the others."""
        return self._finish(self._agree, confirm=True)

    def _finish(self, agree, confirm):
        if self._done:
            if isinstance(self._result, BaseException):
                raise self._result
            return self._result
        self._thread.join()
        self._done = True
        with _lock:
            if _saves.in_flight is self:
                _saves.in_flight = None
        try:
            self._result = self._commit(agree, self._error, confirm)
        except CommitFailure as failure:
            self._result = failure.error
            raise
        except BaseException as error:
            self._result = error
            raise
        return self._result


def _vote_flags():
    """What this rank says in should_stop()'s all-reduce about the save in flight: [writing
    (its file is not written yet), failed (writing it failed), commit_failed (rank 0: the last
    commit that should_stop() made failed)]. Their maximum over the ranks goes to
    _agreed()."""
    pending = _saves.in_flight
    writing = failed = 0
    if pending is not None and pending._by_should_stop:
        if pending.done():
            failed = int(pending._error is not None)
        else:
            writing = 1
    return [writing, failed, int(_commit_failure is not None)]


def _awaits_agreement():
    """Whether a save waits for should_stop()'s agreement to commit it (the same on every rank:
    saves are collective, and so are their commits)."""
    return _saves.awaits_agreement()


def _agreed(writing, failed, commit_failed, subject):
    """After should_stop()'s agreement on _vote_flags() (the maximum over the ranks;
    `subject`: the save in flight when the flags were taken): raises on every rank once rank 0
    reported a failed commit; commits the save in flight once no rank is writing it, if it is
    the one the flags were about (every rank saved the same step and holds it in flight: saves
    are collective, and so is this commit). Rank 0 commits with no second agreement: a failure
    is its own error here, and every rank's at the next should_stop() or save()."""
    global _commit_failure
    if commit_failed:
        error, _commit_failure = _commit_failure, None
        if error is None:
            error = CheckpointError("rank 0 could not commit the last checkpoint; see its error")
        raise error
    pending = _saves.in_flight
    if pending is None or pending is not subject or not pending._by_should_stop or writing:
        return
    try:
        pending._finish(lambda ok: not failed, confirm=False)
    except CommitFailure as failure:  # rank 0: the others learn of it at the next agreement
        _commit_failure = failure.error


_saves.register(_vote_flags, _agreed)  # should_stop()'s agreement carries and commits a save


class CommitFailure(Exception):
    """Rank 0's commit failed where no agreement follows (should_stop()'s commit)."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


def _new_generation():
    """A rejoin (primus._rejoin): the save in flight, whose commit would need a rank that failed,
    is joined and discarded (its files are written over when the step is saved again), and the
    next load() with no arguments loads the new generation's resume point, as in a rank that
    starts, with the same agreement."""
    global _saved, _commit_failure
    pending = _saves.in_flight
    if pending is not None:
        pending._thread.join()
        with _lock:
            if _saves.in_flight is pending:
                _saves.in_flight = None
        if not pending._done:
            pending._done = True
            pending._result = CheckpointError(
                f"step {pending.step} was not committed: a rank failed while it was saved")
    _memory_copy.discarded()
    _saved = False
    _commit_failure = None


def release_staging():
    """Frees the host copies kept for asynchronous saves (after waiting for the one in flight),
    and the committed step kept in memory."""
    wait()
    _staging.clear()
    _memory_copy.release()


def wait():
    """Finishes the save in flight, if any (returns its directory, or None)."""
    pending = _saves.in_flight
    return pending.wait() if pending is not None else None


def save(state, step, *, dir=None, rank=None, world_size=None, owner=0, agree=None, epoch=None,
         data_cursor=None, metadata=None, rng=True, keep_last=None, keep_every=0,
         chunk_bytes=4 << 20, compress=0, blocking=True):
    """Saves `state` (nested dicts/lists of numpy arrays, torch tensors and plain values) as
    step `step` under `dir` (default PRIMUS_CKPT_DIR). Every rank calls it.

    blocking=False copies the tensors to host memory, writes this rank's file in a background
    thread and returns a PendingSave; the commit happens at its wait() (or at the next save,
    which waits for it, or at should_stop()'s agreement, or when the program ends). At most one save is in flight, and its host copies are reused by the
    next asynchronous save: memory holds at most one copy of the state (release_staging()).
    keep_last / keep_every: retention after the commit (rank 0); LATEST is never removed.
    compress: 0 (off, the default) or ISA-L igzip's level 1 to 3, stored as HDF5's standard
    deflate (h5py and h5dump read it). chunk_bytes: the target size of one HDF5 chunk.
    Returns the committed directory (blocking) or the PendingSave."""
    global _saved, _commit_failure
    _saved = True
    if _saves.in_flight is not None:
        _saves.in_flight.wait()
    by_should_stop = not blocking and agree is None and rank is None and world_size is None
    root = _env.checkpoint_dir(dir)
    rank, world_size = _env.rank_and_world(rank, world_size)
    if not isinstance(step, int) or step < 0:
        raise ValueError(f"step: expected a non-negative integer, got {step!r}")
    if not 0 <= owner < world_size:
        raise ValueError(f"owner: expected a rank below {world_size}, got {owner}")
    _check_forward(root, rank, step)
    before = _own_steps.get(_own_key(root, rank))
    _own_steps[_own_key(root, rank)] = (step, "saved")
    agree = agree or _default_agree(world_size)
    if rank == 0:
        _control.event("checkpoint-started", step=step)
    # From here on every failure on this rank reaches the others through agree(), so that no
    # rank waits for one that gave up.
    prepare_error = None
    if _commit_failure is not None:  # rank 0's last commit failed: every rank hears it below
        prepare_error, _commit_failure = _commit_failure, None
    try:
        # With --primus-recover=rejoin the copy is also the committed step in memory
        # (primus._memory_copy): the replicated tensors too, in a set of buffers of its own.
        keep = not blocking and _memory_copy.active(world_size)
        kept = [] if keep else None
        staging = None if blocking else (_memory_copy.staging() if keep else _staging)
        tree, leaves = flatten(state, rank, owner, copy=not blocking, staging=staging, kept=kept)
        if keep:
            _memory_copy.saving(root, step, leaves, kept, staging)
        meta = json.dumps({"step": step, "epoch": epoch, "data_cursor": data_cursor,
                           "metadata": metadata})
        rng_values = _rng.capture() if rng else {}
    except Exception as e:
        prepare_error = e

    def write():
        if prepare_error is not None:
            raise prepare_error
        writer = _ckpt.RankWriter(root, step, rank, world_size, chunk_bytes, compress)
        for leaf in leaves:
            writer.add(leaf.name, leaf.array, leaf.dtype, leaf.global_shape, leaf.offset)
        writer.set_string(_TREE, json.dumps(tree))
        writer.set_string(_META, meta)
        writer.set_int("primus.step", step)
        for key, value in rng_values.items():
            if isinstance(value, bytes):
                writer.set_bytes(key, value)
            else:
                writer.set_string(key, value)
        writer.finish()

    def commit(agree_fn, error, confirm=True):
        if not agree_fn(error is None):
            if error is not None:
                raise error
            raise CheckpointError(f"step {step}: another rank failed to write its file; "
                                  "nothing was committed")
        committed, commit_error = None, None
        if rank == 0:
            try:
                committed, _ = _ckpt.commit(root, step, world_size)
                _control.event("checkpoint-committed", step=int(step), path=str(committed))
                if keep_last is not None:
                    # The step just committed verifies: prune need not open its files again.
                    _ckpt.prune(root, keep_last, keep_every, known_good=step)
            except BaseException as e:  # every rank must learn that the commit failed
                commit_error = e
        if not confirm:
            if commit_error is not None:
                raise CommitFailure(commit_error)
            _memory_copy.committed(root, step)
            return committed
        if not agree_fn(commit_error is None):
            if commit_error is not None:
                raise commit_error
            raise CheckpointError(f"step {step}: rank 0 could not commit; see its error")
        _memory_copy.committed(root, step)
        return committed

    if blocking:
        error = None
        try:
            write()
        except Exception as e:  # the other ranks must hear of it through agree()
            error = e
        try:
            return commit(agree, error)
        except BaseException:
            _own_steps[_own_key(root, rank)] = before  # nothing was committed: it may be retried
            raise
    pending = PendingSave(step, write, agree, commit, by_should_stop)
    with _lock:
        _saves.in_flight = pending
    _finish_at_exit_once()
    return pending


def _finish_at_exit_once():
    """Registers _finish_at_exit with atexit once. The first asynchronous save does it, after
    primus.init() registered its own exit functions, so that it runs before them (atexit runs
    the newest first): the process group and the control channel are still there."""
    global _exit_hook
    with _lock:
        if _exit_hook:
            return
        _exit_hook = True
    atexit.register(_finish_at_exit)


def _finish_at_exit():
    """The save in flight when the program ends, finished before the interpreter is torn down.
    Left to its daemon thread, its write would be cut off (and its commit lost): Python ends a
    thread that asks for the GIL back during the teardown, which once aborted a rank that had
    finished (issue 39). Committed when the program ends normally: every rank ends the same way
    at the same step, so the commit's agreements meet. After an uncaught exception on this rank
    the others are elsewhere, so the file is written but not committed."""
    if _commit_failure is not None:
        print(f"primus.checkpoint: warning: the last commit failed: {_commit_failure}",
              file=sys.stderr)
    pending = _saves.in_flight
    if pending is None or pending.committed():
        return
    if getattr(sys, "last_value", None) is not None:  # set by the uncaught exception's report
        pending._thread.join()
        print(f"primus.checkpoint: step {pending.step} was written but not committed: this rank "
              "ended with an uncaught exception", file=sys.stderr)
        return
    try:
        pending.wait()
    except Exception as error:  # noqa: BLE001 (at exit: say so, the exit status stands)
        print(f"primus.checkpoint: warning: step {pending.step}, in flight at exit, was not "
              f"committed: {error}", file=sys.stderr)


def load(dir=None, step=None, *, rank=None, world_size=None, full_verify=False,
         restore_rng=False):
    """The newest committed checkpoint under `dir` (default PRIMUS_CKPT_DIR) that verifies, or
    the given step; None when there is none. With neither `dir` nor `step`, until this process
    first saves, it is the job's resume point instead: the one checkpoint every rank agreed on at
    primus.init() (PRIMUS_RESUME; None when there was none), loaded strictly (an error rather
    than another checkpoint, so that no rank starts from a different step), and above one rank
    after primus.init() only once every rank loaded it (else every rank raises). A torn or
    corrupt newer one is skipped with a warning naming what failed. Loads into any world size:
    replicated tensors whole, Shard tensors as this rank's rows, PerRank tensors as this rank
    saved them. A run that resumed from step N (this load with no `step`) then saves only steps
    above N there."""
    rank, world_size = _env.rank_and_world(rank, world_size)
    if dir is None and step is None and _resume_applies():
        resume = _resume_point()
        if resume is None:
            return None  # every rank agreed at init() that there is nothing to resume from
        return _resumed(_load_resume_point(resume, rank, world_size, full_verify, restore_rng),
                        rank)
    root = _env.checkpoint_dir(dir)
    if step is None:
        checkpoint, skipped = _ckpt.load_latest(root, full_verify)
    else:
        checkpoint, skipped = _ckpt.load_step(root, step, full_verify)
    for reason in skipped:
        warnings.warn(f"primus.checkpoint: skipped {reason}", RuntimeWarning, stacklevel=2)
    if checkpoint is None:
        return None
    restored = _restored.read(checkpoint, skipped, rank, world_size, restore_rng)
    return _resumed(restored, rank) if step is None else restored


def _resumed(restored, rank):
    """Notes that this process resumed from `restored`: its saves there go above it from now on
    (a process that went back to an older step, as after a corrupt newest one, saves the later
    steps again)."""
    key = _own_key(os.path.dirname(os.path.normpath(restored.path)) or ".", rank)
    _own_steps[key] = (restored.step, "resumed from")
    return restored


def _load_resume_point(resume, rank, world_size, full_verify, restore_rng):
    """The job's resume point, loaded strictly, and (after primus.init(), above one rank) only
    once every rank has loaded it: a rank whose file fails its checksums makes every rank raise
    before any trains, so that no rank goes on from a state the others do not share."""
    agree = world_size > 1 and _runtime.initialized()
    # At a rejoin the ranks first agree that every one opened it, then restore what they can
    # from the copies in memory (collectives in the same order on every rank), then agree again.
    exchange = agree and _memory_copy.restore_applies(world_size)
    agreement_left = agree
    filled = None
    try:
        root, step = _split_step_dir(resume)
        checkpoint, skipped = _ckpt.load_step(root, step, full_verify)
        if checkpoint is None:
            # Every rank resumes from this one, or none does: no fallback of its own.
            raise CorruptCheckpoint(f"PRIMUS_RESUME={resume}: cannot load it ("
                                    f"{'; '.join(skipped) or 'no reason given'})")
        if exchange:
            if not _runtime.agree(True):
                agreement_left = False
                raise CorruptCheckpoint(f"PRIMUS_RESUME={resume}: another rank could not open "
                                        "it (its error is in its log); no rank resumes from it")
            filled = _memory_copy.restore(checkpoint, rank, world_size, _runtime._communicator())
        restored = _restored.read(checkpoint, skipped, rank, world_size, restore_rng=False,
                                  filled=filled)
    except Exception:
        if agreement_left:
            _runtime.agree(False)
        raise
    if agree and not _runtime.agree(True):
        raise CorruptCheckpoint(f"PRIMUS_RESUME={resume}: another rank could not load it (its "
                                "error is in its log); no rank resumes from it")
    if restore_rng:
        restored.restore_rng()
    return restored


def _resume_applies():
    """Whether load() with no arguments loads the resume point: until this process saves, the
    start of the job is what it loads (after init(): the point every rank agreed on; without
    init(): PRIMUS_RESUME when set); after a save, the newest checkpoint."""
    if _saved:
        return False
    return _runtime.initialized() or bool(_env.given("PRIMUS_RESUME"))


def _resume_point():
    if _runtime.initialized():
        return _runtime.init(torch=False).resume
    return _env.given("PRIMUS_RESUME")


def _split_step_dir(path):
    """(root, step) of a checkpoint directory .../step-NNNNNNNNNNNN."""
    path = os.path.normpath(os.fspath(path))
    name = os.path.basename(path)
    digits = name[len("step-"):]
    if not name.startswith("step-") or not digits.isdigit():
        raise ValueError(f"PRIMUS_RESUME: expected a checkpoint directory named step-N (as "
                         f"primus-ckpt latest prints), got {path!r}")
    return os.path.dirname(path) or ".", int(digits)


def latest_step(dir=None):
    """The step LATEST names (not verified), or None."""
    return _ckpt.read_latest(_env.checkpoint_dir(dir))


def verify(path, full=True):
    """Problems of the checkpoint directory `path` (a step-* directory), each naming the file
    and dataset at fault; empty when it verifies."""
    return _ckpt.verify(str(path), full)


def prune(dir=None, keep_last=1, keep_every=0):
    """Removes all but the newest keep_last checkpoints (and every keep_every-th), never the one
    LATEST names, and leftovers of saves that never committed. Returns the removed paths."""
    return _ckpt.prune(_env.checkpoint_dir(dir), keep_last, keep_every)
