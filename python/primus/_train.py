"""primus.train(): a ready data-parallel training loop for PyTorch, built from the public calls
only (primus.init, primus.data, primus.ddp, primus.checkpoint, primus.should_stop, primus.log),
so that a user can write the same loop by hand (examples/cnn/train_loop.py does)."""

import dataclasses
import sys
import time

from . import _control, _env, _rejoin, _relaunch, _resume_check

PER_RANK_BATCH = 32
DEFAULT_CHECKPOINT_EVERY = 100
DEFAULT_KEEP_LAST = 3
DEFAULT_LOG_EVERY = 10


@dataclasses.dataclass
class TrainResult:
    """What train() returns: the trained `model` (not DDP-wrapped), its `optimizer` and
    `lr_scheduler`, `steps` (training steps taken in all, from the start of the job), `epochs`
    (completed), `final_loss` (this rank's loss on its last batch; after a resume at the end,
    the loss the checkpoint recorded; None when no step was ever taken),
    `samples_per_second` (all ranks, over the steps this process ran), `stopped` (True after a
    stop with exit_on_stop=False), `resumed_from` (the checkpoint's step, or None) and
    `checkpoint` (the last committed checkpoint directory, or None)."""

    model: object
    optimizer: object
    lr_scheduler: object
    steps: int
    epochs: int
    final_loss: object
    samples_per_second: float
    stopped: bool
    resumed_from: object
    checkpoint: object

    def __repr__(self):
        return (f"TrainResult(steps={self.steps}, epochs={self.epochs}, "
                f"final_loss={self.final_loss}, samples_per_second="
                f"{self.samples_per_second:.1f}, stopped={self.stopped})")


@dataclasses.dataclass
class StepInfo:
    """What on_step(info) gets after every step: `step` (from the start of the job), `epoch`,
    `loss` (this rank's, a detached tensor: float() it only when needed, it waits for a GPU) and
    `samples` (this rank's share of the global batch)."""

    step: int
    epoch: int
    loss: object
    samples: int


def _count(value, name, low=0):
    number = _env.count(value, f"primus.train: {name}")
    if number < low:
        raise ValueError(f"primus.train: {name}: expected an integer >= {low}, got {number}")
    return number


def _dataset(dataset, global_batch_size, world_size, seed):
    """A primus.data.Dataset: the one given (its global batch size must agree), or one over a
    map-style dataset (global batch size: the argument, else PRIMUS_GLOBAL_BATCH_SIZE, else
    PER_RANK_BATCH per rank). The last global batch is dropped unless drop_last was chosen."""
    from . import _data_map, data

    if isinstance(dataset, data.Dataset):
        if global_batch_size is not None and global_batch_size != dataset.global_batch_size:
            raise ValueError(f"primus.train: global_batch_size={global_batch_size}, but the "
                             f"dataset's is {dataset.global_batch_size}; leave it out or make "
                             "them agree")
        ds = dataset
    elif _data_map.is_map_style(dataset):
        if global_batch_size is None and not _env.given("PRIMUS_GLOBAL_BATCH_SIZE"):
            global_batch_size = PER_RANK_BATCH * world_size
        ds = data.Dataset(dataset, global_batch_size=global_batch_size, seed=seed)
    else:
        raise TypeError(f"primus.train: dataset: expected a primus.data.Dataset or a map-style "
                        f"dataset (len() and [i]), got {type(dataset).__name__}")
    if ds.mode != "static":
        raise ValueError("primus.train: the dynamic data mode has no step that every rank "
                         "takes together; primus.train is synchronous (use the static split)")
    if not ds.drop_last_chosen:
        ds.drop_last = True
    if ds.global_batch_size < world_size:
        raise ValueError(f"primus.train: the global batch size {ds.global_batch_size} is below "
                         f"the number of ranks ({world_size}): a rank would get no sample")
    return ds


def _optimizer(optimizer, model):
    import torch

    if optimizer is None:
        return torch.optim.Adam(model.parameters(), lr=1e-3)
    if isinstance(optimizer, torch.optim.Optimizer):
        return optimizer
    if callable(optimizer):
        made = optimizer(model.parameters())
        if not isinstance(made, torch.optim.Optimizer):
            raise TypeError(f"primus.train: optimizer: the callable returned "
                            f"{type(made).__name__}, not a torch.optim.Optimizer")
        return made
    raise TypeError(f"primus.train: optimizer: expected a torch.optim.Optimizer or a callable "
                    f"of the parameters, got {type(optimizer).__name__}")


def _scheduler(lr_scheduler, optimizer):
    if lr_scheduler is None or hasattr(lr_scheduler, "state_dict"):
        return lr_scheduler
    if callable(lr_scheduler):
        return lr_scheduler(optimizer)
    raise TypeError(f"primus.train: lr_scheduler: expected a learning-rate scheduler or a "
                    f"callable of the optimizer, got {type(lr_scheduler).__name__}")


def _collate(batch, device):
    from torch.utils.data import default_collate

    # The first sample stands for the batch (a sample of another kind further on fails in
    # default_collate); this runs at every step.
    first = batch[0] if batch else None
    if not isinstance(first, (tuple, list)) or len(first) != 2:
        kind = type(first).__name__ if batch else "an empty share"
        raise TypeError(f"primus.train: every sample must be (input, target); got {kind} "
                        "(give primus.data.Dataset a decode=... that returns the pair)")
    inputs, targets = default_collate(batch)
    if device == "cpu":
        return inputs, targets
    return inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)


def _duration(seconds):
    """'1h02m', '3m05s', '12s'."""
    seconds = int(round(max(seconds, 0)))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def _seed_of(seed, rank):
    # A generator per rank (different dropout masks on every rank, the same run after run).
    return (int(seed) * 1_000_003 + 7919 * (rank + 1)) % (1 << 63)


def train(model, dataset, *, epochs, workers=None, global_batch_size=None, optimizer=None,
          loss_fn=None, lr_scheduler=None, scheduler_interval="step",
          checkpoint_every=DEFAULT_CHECKPOINT_EVERY, keep_last=DEFAULT_KEEP_LAST,
          log_every=DEFAULT_LOG_EVERY, num_workers=0, seed=None, exit_on_stop=True,
          on_step=None):
    """Trains `model` data-parallel for `epochs` epochs of `dataset`, resumably; returns a
    TrainResult.

    - `workers`: the number of ranks. Under srun --primus or primus-launch it must equal the
      job's world size (an error names both); None takes the job's. In a plain
      `python script.py`, workers=N > 1 runs the script again as N ranks under
      `primus-launch --nproc N` (this process becomes primus-launch, and the ranks run the
      whole script, train() included).
    - `dataset`: a primus.data.Dataset whose decode returns (input, target) tensors, or a torch
      map-style dataset of (input, target) samples, to which primus gives the same global
      order, split and cursor. drop_last is True unless the dataset chose it (an empty or
      one-sample share breaks batch norm).
    - `global_batch_size`: the dataset's (a primus.data.Dataset always has one; another value is
      an error); for a map-style dataset the argument, else PRIMUS_GLOBAL_BATCH_SIZE, else 32
      per rank times the world size.
    - Defaults: `optimizer` Adam(lr=1e-3) (or pass an optimizer, or a callable of the
      parameters), `loss_fn` cross-entropy, no `lr_scheduler` (a scheduler, or a callable of
      the optimizer; stepped after every step, or at every epoch's end with
      scheduler_interval="epoch").
    - The model runs under primus.ddp (the DDP whose resumes are bitwise equal), on the rank's
      device (job.device). `seed` (default PRIMUS_SEED, else 0) orders the data and seeds
      torch's generator of each rank (dropout) at a fresh start.
    - Checkpoints: every `checkpoint_every` steps (0: only at a stop and at the end), written
      in the background while training goes on and committed once every rank's file is written;
      the newest `keep_last` are kept (None: all). They hold the model, optimizer, scheduler,
      every rank's RNG state and the data cursor; a job started again resumes from the newest
      that verifies, exactly where it stopped.
    - `log_every`: primus.log(step, loss=..., samples_per_second=...) every so many steps (rank
      0's; 0: never). `num_workers`: DataLoader worker processes that read and decode.
      `on_step(info)`: called after every step with a StepInfo.
    - On a stop (preemption, time limit, primus-launch stop) every rank saves the same step and
      train() raises SystemExit(primus.EXIT_PREEMPTED), which is what primus-launch and Slurm's
      RequeueExit expect; exit_on_stop=False returns the result with stopped=True instead.
    """
    import torch

    import primus

    epochs = _count(epochs, "epochs")
    checkpoint_every = _count(checkpoint_every, "checkpoint_every")
    log_every = _count(log_every, "log_every")
    num_workers = _count(num_workers, "num_workers")
    if keep_last is not None:
        keep_last = _count(keep_last, "keep_last", 1)
    if scheduler_interval not in ("step", "epoch"):
        raise ValueError(f"primus.train: scheduler_interval: expected 'step' or 'epoch', got "
                         f"{scheduler_interval!r}")
    if on_step is not None and not callable(on_step):
        raise TypeError("primus.train: on_step: expected a callable")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"primus.train: model: expected a torch.nn.Module, got "
                        f"{type(model).__name__}")
    _relaunch.ensure_world(workers)
    job = primus.init()
    if seed is None:
        seed = _env._int_variable("PRIMUS_SEED", 0)
    seed = _count(seed, "seed")
    ds = _dataset(dataset, global_batch_size, job.world_size, seed)
    model.to(job.device)
    net = primus.ddp(model)
    optimizer = _optimizer(optimizer, model)
    run = _Run(job, model, net, ds, optimizer, _scheduler(lr_scheduler, optimizer),
               loss_fn or torch.nn.CrossEntropyLoss(), seed)
    run.scheduler_interval, run.checkpoint_every, run.keep_last = (
        scheduler_interval, checkpoint_every, keep_last)
    run.log_every, run.num_workers, run.on_step = log_every, num_workers, on_step
    run.metadata = {"primus.train": {"epochs": epochs, "global_batch_size": ds.global_batch_size,
                                     "world_size": job.world_size,
                                     "optimizer": type(optimizer).__name__,
                                     "command": list(sys.argv)}}
    run.total_steps = ds.steps_per_epoch * epochs
    torch.manual_seed(_seed_of(seed, job.rank))
    run.restore()
    _control.training_plan(run.total_steps)
    return run.finish(run.train(epochs), exit_on_stop)


class _Run:
    """One run of train(): the model and its training state, its checkpoints (the save in
    flight, the last committed), and the loop over the epochs."""

    def __init__(self, job, model, net, ds, optimizer, lr_scheduler, loss_fn, seed):
        self.job, self.model, self.net, self.ds = job, model, net, ds
        self.optimizer, self.lr_scheduler, self.loss_fn, self.seed = (
            optimizer, lr_scheduler, loss_fn, seed)
        self.step, self.resumed_from, self.last_committed = 0, None, None
        self.restored_loss, self.loss = None, None
        self.pending, self.saved_step = None, None
        self.ran, self.started = 0, None
        self.restore_seconds = None
        self.first_step_due = False

    def state(self):
        saved = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
        if self.lr_scheduler is not None:
            saved["lr_scheduler"] = self.lr_scheduler.state_dict()
        return saved

    def restore(self):
        """Resumes from the newest checkpoint that verifies, if there is one."""
        from . import _memory_copy, checkpoint

        started = time.perf_counter()
        _memory_copy.last_restore = None
        restored = checkpoint.load()
        self.restore_seconds = time.perf_counter() - started
        if restored is None:
            return
        saved = restored.state
        _resume_check.check(restored, self.model, self.optimizer, self.lr_scheduler, self.ds)
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        if self.lr_scheduler is not None:
            self.lr_scheduler.load_state_dict(saved["lr_scheduler"])
        if restored.data_cursor is not None:
            self.ds.load_state_dict(restored.data_cursor)
        restored.restore_rng()
        self.step = self.resumed_from = self.saved_step = restored.step
        self.last_committed = restored.path
        self.restored_loss = ((restored.metadata or {}).get("primus.train") or {}).get("loss")
        if self.job.rank == 0:
            print(f"primus.train: resumed at step {self.step} (epoch {self.ds.epoch}) from "
                  f"{restored.path}", file=sys.stderr, flush=True)

    def save(self, at, blocking):
        from . import checkpoint

        # The loss of the step saved: a run that resumes at the end reports it as its final loss.
        loss = self.loss
        self.metadata["primus.train"]["loss"] = (float(loss) if loss is not None
                                                 else self.restored_loss)
        result = checkpoint.save(self.state(), at, epoch=self.ds.epoch,
                                 data_cursor=self.ds.state_dict(), metadata=self.metadata,
                                 keep_last=self.keep_last, blocking=blocking)
        self.saved_step = at
        if blocking:
            self.last_committed, self.pending = result, None
        else:
            self.pending = result

    def commit(self):
        if self.pending is not None:
            self.last_committed = self.pending.wait()
            self.pending = None

    def train(self, count):
        """The loop, from one generation of the ranks to the next: with --primus-recover=rejoin a
        peer's failure makes this rank wait for the next generation and go on from its
        checkpoint (primus._rejoin) instead of failing."""
        rejoin = _rejoin.enabled(self.job)
        if rejoin:
            from . import _memory_copy

            _memory_copy.want()
        while True:
            if rejoin:
                _rejoin.announce(self.restore_seconds)
                # In a generation after a rejoin rank 0 says when its first step is done (the
                # rejoin's last phase, the "rejoin-first-step" event).
                self.first_step_due = _rejoin.generation() > 0 and self.job.rank == 0
            try:
                stopped = self.epochs(count)
            except Exception as error:
                if not (rejoin and _rejoin.is_peer_failure(error)):
                    raise
                # Before this rank says it waits: no write of the old generation goes on.
                self.discard_pending()
                notice = _rejoin.wait_for_notice(error)
                if notice is None or not notice.get("resume"):
                    raise  # primus-launch restarts the ranks (it rejoins from a checkpoint only)
            else:
                if rejoin:  # this rank's loop is over: a peer that fails now cannot be rejoined
                    _control.event("rejoin-off", generation=_rejoin.generation())
                return stopped
            # The failure's traceback is gone: the loop's iterators (a DataLoader's workers) with
            # it.
            self.rejoin(notice)

    def discard_pending(self):
        """The save in flight joined and dropped: a rank that failed cannot commit it."""
        from . import checkpoint

        checkpoint._new_generation()
        self.pending = None

    def rejoin(self, notice):
        """This rank in the notice's generation, as a rank that starts there: the groups made
        again, the model wrapped in primus.ddp again, the generation's checkpoint loaded (the
        same collectives in the same order as the replacement's start)."""
        import primus

        _rejoin.enter(notice)
        self.net = primus.ddp(self.model)
        self.restore()

    def train_step(self, batch, epoch, left):
        """One step on this rank's share of a global batch; `left`: the epoch's steps left after
        it."""
        inputs, targets = _collate(batch, self.job.device)
        self.net.train()
        self.optimizer.zero_grad(set_to_none=True)
        self.loss = loss = self.loss_fn(self.net(inputs), targets)
        loss.backward()
        self.optimizer.step()
        if self.lr_scheduler is not None and (self.scheduler_interval == "step" or left == 0):
            self.lr_scheduler.step()
        self.step += 1
        self.ran += 1
        if self.on_step is not None:
            self.on_step(StepInfo(self.step, epoch, loss.detach(), len(inputs)))

    def epochs(self, count):
        """The loop; True when it ended for a stop (every rank saved the same step)."""
        import torch

        import primus

        ds = self.ds
        self.started = time.perf_counter()
        self.epoch_mark = (self.step, self.started)
        window_start, window_steps = self.started, 0
        for epoch in ds.epochs(count):
            left = len(epoch)
            batches = epoch if self.num_workers == 0 else ds.loader(
                num_workers=self.num_workers, worker_init_fn=primus.worker_init_fn,
                # A generator of its own: the DataLoader draws its workers' seed from it, not
                # from torch's, whose state the checkpoint restores.
                generator=torch.Generator().manual_seed(_seed_of(self.seed, ds.epoch)))
            for batch in batches:
                left -= 1
                self.train_step(batch, epoch.epoch, left)
                if self.first_step_due:
                    self.first_step_due = False
                    _control.event("first-step", generation=_rejoin.generation())
                step = self.step
                window_steps += 1
                if self.log_every and step % self.log_every == 0:
                    now = time.perf_counter()
                    rate = window_steps * ds.global_batch_size / max(now - window_start, 1e-9)
                    primus.log(step, loss=float(self.loss), samples_per_second=rate)
                    window_start, window_steps = now, 0
                if self.pending is not None and self.pending.committed():  # by should_stop()
                    self.commit()
                if self.checkpoint_every and step % self.checkpoint_every == 0:
                    self.save(step, blocking=False)
                if primus.should_stop():
                    if self.saved_step != step:
                        self.save(step, blocking=True)
                    self.commit()
                    return True
            self.report_epoch(epoch.epoch, count)
        return False

    def report_epoch(self, epoch, count):
        """Rank 0's line at the end of an epoch: the step of the total, the loss of its last
        batch, the samples per second of all ranks over the epoch, and the time left at the
        rate of this run."""
        now = time.perf_counter()
        (mark_step, mark_time), self.epoch_mark = self.epoch_mark, (self.step, now)
        steps = self.step - mark_step
        if self.job.rank != 0 or steps <= 0:
            return
        rate = steps * self.ds.global_batch_size / max(now - mark_time, 1e-9)
        left = (self.total_steps - self.step) * (now - self.started) / self.ran
        print(f"primus.train: epoch {epoch + 1}/{count}: step {self.step}/{self.total_steps}, "
              f"loss {float(self.loss):.4f}, {rate:,.0f} samples/s, {_duration(left)} left",
              file=sys.stderr, flush=True)

    def finish(self, stopped, exit_on_stop):
        """The last checkpoint committed and the result; SystemExit(EXIT_PREEMPTED) after a stop
        unless exit_on_stop is False."""
        import primus
        from . import checkpoint

        # A run that took no step commits nothing (epochs=0, or resumed at its end).
        if not stopped and self.ran and self.saved_step != self.step:
            self.save(self.step, blocking=True)
        self.commit()
        checkpoint.release_staging()
        elapsed = time.perf_counter() - self.started
        final_loss = self.restored_loss if self.loss is None else float(self.loss)
        rate = self.ran * self.ds.global_batch_size / elapsed if self.ran else 0.0
        result = TrainResult(self.model, self.optimizer, self.lr_scheduler, self.step,
                             self.ds.epoch, final_loss, rate, stopped, self.resumed_from,
                             self.last_committed)
        if stopped:
            if self.job.rank == 0:
                print(f"primus.train: stopped at step {self.step}; checkpoint "
                      f"{self.last_committed}", file=sys.stderr, flush=True)
            if exit_on_stop:
                raise SystemExit(primus.EXIT_PREEMPTED)
        return result
