"""primus.data: every record of a dataset exactly once per epoch at any number of ranks.

    ds = primus.data.Dataset()              # --primus-data, --primus-global-batch-size, ...
    restored = primus.checkpoint.load()
    if restored is not None:
        ds.load_state_dict(restored.data_cursor)
    for epoch in ds.epochs(10):
        for batch in epoch:                 # this rank's share of the next global batch
            train(batch)
            if primus.should_stop():
                primus.checkpoint.save(state, step, data_cursor=ds.state_dict())

A dataset is a glob, a directory, a file or @MANIFEST (docs/man/primus-data.1) of records in
one format: tfrecord, lines or fixed:N. Each epoch has a global order from (seed, epoch) and is
cut into global batches of `global_batch_size` records; global batch k is the same records in
the same order whatever the world size, and each rank reads its contiguous share of it. A batch
counts as consumed once yielded: train on it, call should_stop(), then save. The cursor
(state_dict) resumes the same order on the same, fewer or more ranks; a cursor saved with another
dataset, global batch size, shuffle, seed or drop_last is refused, naming the difference.

--primus-data-mode=dynamic (under primus-launch only) is for asynchronous or uneven work, with
no collective per step and no DDP: primus-launch hands out splits of the dataset to the ranks
that ask, so faster ranks read more, and orders every checkpoint:

    for epoch in ds.epochs(10):
        for batch in epoch:                 # [] when a checkpoint is due and nothing is in hand
            work(batch)
            step = ds.checkpoint_due()      # a rank asked (ds.request_checkpoint()) or a stop
            if step is not None:
                primus.checkpoint.save(state, step, data_cursor=ds.state_dict())
            if primus.should_stop():        # after a stop's checkpoint
                sys.exit(primus.EXIT_PREEMPTED)

With torch installed, a Dataset is a torch.utils.data.IterableDataset: DataLoader(ds,
batch_size=None) iterates the current epoch in the rank's process (num_workers=0). For worker
processes use ds.loader(num_workers=N): worker w reads every N-th batch (decode runs there), the
batches come out in order, the cursor counts what the loop received, and the workers ignore the
stop signals so that only the rank decides when to stop.

Every batch handed to the loop counts its records once in the heartbeats' "samples" (whichever
way it is iterated), so a loop over primus.data does not pass samples to should_stop().
"""

import importlib.util
import os

from . import _control, _data, _env
from . import _data_dynamic as _dynamic
from . import _data_map as _map
from . import _data_settings as _settings
from ._data import DataError

__all__ = ["Dataset", "DataError", "write_tfrecord"]


if importlib.util.find_spec("torch") is not None:
    from torch.utils.data import IterableDataset as _Base
else:  # pragma: no cover (torch is optional)
    _Base = object


def write_tfrecord(path, records):
    """Writes `records` (an iterable of bytes) to the TFRecord file `path` (length, masked
    CRC32C of the length, data, masked CRC32C of the data: TensorFlow's framing). The file
    appears whole or not at all: it is written under a temporary name and renamed. Returns the
    number of records written."""
    path = os.fspath(path)
    temporary = f"{path}.tmp-{os.getpid()}"
    count = 0
    try:
        with open(temporary, "wb") as out:
            for record in records:
                if not isinstance(record, (bytes, bytearray, memoryview)):
                    raise TypeError(f"write_tfrecord: record {count}: expected bytes, got "
                                    f"{type(record).__name__}")
                out.write(_data.tfrecord_frame(bytes(record)))
                count += 1
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    return count


def index_cache_dir():
    """Where indexes go that cannot go beside their data (a read-only data directory): the job
    directory's index/, else the user's cache."""
    return _data.default_index_cache_dir()


class _Epoch:
    """One epoch of a Dataset: iterating it yields this rank's share of each remaining global
    batch and advances the dataset's cursor; len() is the number of steps left."""

    def __init__(self, dataset, epoch):
        self._ds = dataset
        self.epoch = epoch
        self._plan = dataset._plan(epoch)

    def __len__(self):
        if self._ds.mode != "static":
            raise TypeError("len() of an epoch: the number of steps is not known in dynamic mode")
        if self._ds._epoch != self.epoch:
            return 0
        return self._plan.steps - self._plan.step_at(self._ds._consumed)

    def __iter__(self):
        return self

    def __next__(self):
        ds = self._ds
        if ds._epoch != self.epoch:
            raise StopIteration
        step = self._plan.step_at(ds._consumed)
        if step >= self._plan.steps:
            ds._epoch, ds._consumed = self.epoch + 1, 0
            raise StopIteration
        batch = self._plan.read_share(step, ds.rank, step + 1)
        ds._consumed = self._plan.consumed_after(step)
        ds._last_step = step
        _control.add_samples(len(batch))
        return ds._decoded(batch)

    def __repr__(self):
        return f"<primus.data epoch {self.epoch}>"


class _WorkerView(_Base):
    """What ds.loader() hands to torch's workers: the epoch from the cursor at the start of the
    iteration; worker w of n reads batches start+w, start+w+n, ..."""

    def __init__(self, dataset, epoch, start):
        super().__init__()
        self._ds = dataset
        self._epoch = epoch
        self._start = start

    def __iter__(self):
        import torch.utils.data

        from . import _runtime

        info = torch.utils.data.get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        if info is not None:
            _runtime.worker_init_fn(worker)
        plan = self._ds._plan(self._epoch)
        for step in range(self._start + worker, plan.steps, workers):
            yield self._ds._decoded(plan.read_share(step, self._ds.rank, step + workers))


class Dataset(_Base):
    """This rank's reader of a dataset. Arguments left None come from the PRIMUS_* settings
    (--primus-data, --primus-data-format, --primus-global-batch-size, --primus-seed,
    --primus-shuffle, --primus-shuffle-block, --primus-drop-last, --primus-data-mode); the
    defaults are tfrecord, seed 0, shuffle records, blocks of 1024 records, no drop_last, static
    mode. A global batch size has no default. `decode`, when given, is applied to each record
    (bytes; a fixed-size record's row as bytes too); without it a batch is a list of bytes, or for
    fixed:N one (n, N) uint8 numpy array.

    Opening checks every file of the dataset (building the indexes that are missing): a bad file
    raises DataError naming it and the byte offset, on every rank alike.

    `spec` may also be a torch map-style dataset (anything with len() and [i]): the same global
    order, split and cursor over its indexes 0..len-1, and a batch is the list of its samples
    (through `decode` when given). Its fingerprint is its class and length. Static mode only."""

    def __init__(self, spec=None, *, format=None, global_batch_size=None, seed=None, shuffle=None,
                 shuffle_block=None, drop_last=None, mode=None, decode=None):
        super().__init__()
        source = spec if _map.is_map_style(spec) else None
        if source is None:
            spec, _ = _settings.setting(spec, "PRIMUS_DATA")
            if spec is None:
                raise ValueError("no dataset: pass spec=... or run with --primus-data=SPEC "
                                 "(PRIMUS_DATA)")
            spec = os.fspath(spec)
        fmt, fmt_from = _settings.setting(format, "PRIMUS_DATA_FORMAT", "tfrecord")
        mode, mode_from = _settings.setting(mode, "PRIMUS_DATA_MODE", "static")
        self.mode = _settings.choice(mode, "mode", mode_from, ("static", "dynamic"))
        if source is not None and self.mode != "static":
            raise ValueError(f"{mode_from or 'mode'}: a map-style dataset has the static split "
                             "only (the dynamic mode hands out splits of files)")
        batch, batch_from = _settings.setting(global_batch_size, "PRIMUS_GLOBAL_BATCH_SIZE")
        if batch is None and self.mode == "static":
            raise ValueError("no global batch size: pass global_batch_size=... or run with "
                             "--primus-global-batch-size=N (PRIMUS_GLOBAL_BATCH_SIZE)")
        self.global_batch_size = None if batch is None else _settings.integer(
            batch, "global_batch_size", batch_from, 1, 1 << 40)
        seed, seed_from = _settings.setting(seed, "PRIMUS_SEED", 0)
        self.seed = _settings.integer(seed, "seed", seed_from, 0, (1 << 64) - 1)
        shuffle, shuffle_from = _settings.setting(shuffle, "PRIMUS_SHUFFLE", "records")
        self.shuffle = _settings.choice(shuffle, "shuffle", shuffle_from, _settings.SHUFFLES)
        block, block_from = _settings.setting(shuffle_block, "PRIMUS_SHUFFLE_BLOCK", 1024)
        self.shuffle_block = _settings.integer(block, "shuffle_block", block_from, 1, 1 << 40)
        drop, drop_from = _settings.setting(drop_last, "PRIMUS_DROP_LAST", False)
        self._drop_last = _settings.boolean(drop, "drop_last", drop_from)
        # Whether drop_last was chosen (argument or PRIMUS_DROP_LAST), not defaulted:
        # primus.train drops the last global batch unless somebody chose otherwise.
        self.drop_last_chosen = drop_last is not None or drop_from is not None
        if decode is not None and not callable(decode):
            raise TypeError(f"decode: expected a callable, got {type(decode).__name__}")
        self._decode = decode
        if self.mode == "dynamic" and not _env.given("PRIMUS_CONTROL"):
            raise ValueError("--primus-data-mode=dynamic needs primus-launch, which hands out "
                             "the splits over its control channel (PRIMUS_CONTROL is not set); "
                             "run the job under primus-launch, or use the static split")
        self.rank, self.world_size = _env.rank_and_world()
        if source is not None:
            self._core = _map.MapCore(source)
            spec = f"<{type(source).__name__} of {self._core.records}>"
        else:
            what = "spec" if _env.given("PRIMUS_DATA") != spec else "--primus-data"
            if fmt_from is not None and not isinstance(fmt, str):
                raise TypeError("format: expected a string")
            self._core = _data.Dataset(spec, fmt if isinstance(fmt, str) else str(fmt),
                                       index_cache_dir(), what)
        self.spec = spec
        self.format = self._core.format
        self._epoch = 0
        self._consumed = 0
        self._last_step = None
        self._plans = {}
        self._dynamic = _dynamic.Dynamic(self) if self.mode == "dynamic" else None

    # What the dataset is.
    @property
    def drop_last(self):
        """Whether the last global batch of an epoch is dropped when it is not full."""
        return self._drop_last

    @drop_last.setter
    def drop_last(self, value):
        value = _settings.boolean(value, "drop_last", None)
        if value != self._drop_last:
            if self._epoch != 0 or self._consumed != 0:
                raise ValueError("drop_last: set it before reading or loading a cursor (it "
                                 "changes every epoch's plan)")
            self._drop_last = value
            self._plans = {}

    @property
    def records(self):
        """The number of records in the dataset."""
        return self._core.records

    @property
    def fingerprint(self):
        """What a cursor must match: the format and every file's name, size and record count."""
        return self._core.fingerprint

    @property
    def files(self):
        """[(path, records, bytes, cached index or '')], in dataset order."""
        return list(self._core.files)

    @property
    def epoch(self):
        """The epoch the cursor is in."""
        self._normalize()
        return self._epoch

    @property
    def steps_per_epoch(self):
        return self._plan(0).steps

    def _plan(self, epoch):
        plan = self._plans.get(epoch)
        if plan is None:
            if isinstance(self._core, _map.MapCore):
                plan = _map.MapPlan(self._core, _data.IndexPlan(
                    self._core.records, self._core.fingerprint, self.global_batch_size,
                    self.shuffle, self.shuffle_block, self.seed, self.drop_last, epoch,
                    self.world_size))
            else:
                plan = _data.Plan(self._core, self.global_batch_size, self.shuffle,
                                  self.shuffle_block, self.seed, self.drop_last, epoch,
                                  self.world_size)
            self._plans = {epoch: plan}  # one epoch at a time
        return plan

    def _normalize(self):
        if self._consumed != 0 and self._consumed == self._plan(self._epoch).used_records:
            self._epoch, self._consumed = self._epoch + 1, 0

    def _decoded(self, batch):
        if self._decode is None:
            return batch
        if self._core.record_size:
            return [self._decode(row.tobytes()) for row in batch]
        return [self._decode(record) for record in batch]

    def share_ids(self, epoch, step, rank=None):
        """The record numbers (files in dataset order, records in file order) of rank `rank`'s
        (default: this rank's) share of global batch `step` of `epoch`, as a list of ints."""
        return [int(i) for i in self._plan(epoch).share(step, self.rank if rank is None else rank)]

    # Iteration.
    def epochs(self, n):
        """Yields the epochs from the cursor's up to n - 1 (n is absolute: a job resumed in
        epoch 3 of epochs(10) gets epochs 3 to 9). Iterate each one it yields."""
        n = _settings.integer(n, "n", None, 0, (1 << 63) - 1)
        if self._dynamic is not None:
            yield from self._dynamic.epochs(n)
            return
        while True:
            self._normalize()
            if self._epoch >= n:
                return
            before = (self._epoch, self._consumed)
            yield _Epoch(self, self._epoch)
            if (self._epoch, self._consumed) == before and len(_Epoch(self, self._epoch)) > 0:
                raise RuntimeError(f"primus.data: epoch {before[0]} was yielded and not read: "
                                   "iterate every epoch that epochs() yields")

    def __iter__(self):
        """The rest of the cursor's epoch (what DataLoader(ds, batch_size=None) iterates)."""
        try:
            import torch.utils.data

            if torch.utils.data.get_worker_info() is not None:
                raise RuntimeError(
                    "primus.data.Dataset in a DataLoader worker: use ds.loader(num_workers=N), "
                    "which splits the batches among the workers without loss or repetition and "
                    "keeps the cursor; a plain DataLoader would give every worker the whole "
                    "share")
        except ImportError:
            pass
        self._normalize()
        return _Epoch(self, self._epoch)

    def checkpoint_due(self):
        """Dynamic mode: the step of the checkpoint primus-launch ordered (a rank asked for one,
        or a stop signal arrived), which every rank saves now with data_cursor=state_dict();
        None when there is none. Call it after every batch. Static mode: always None (the loop
        saves when it chooses, and at primus.should_stop())."""
        if self._dynamic is None:
            return None
        order = _control.data_order()
        return None if order is None else order["step"]

    def request_checkpoint(self):
        """Dynamic mode: asks primus-launch for a checkpoint of every rank (checkpoint_due()
        then names its step on every rank)."""
        if self._dynamic is None:
            raise RuntimeError("request_checkpoint() is for --primus-data-mode=dynamic; in the "
                               "static mode every rank saves at the same step by itself")
        _control.data_send({"op": "checkpoint"})

    def loader(self, num_workers=0, **kwargs):
        """A torch DataLoader over the rest of the cursor's epoch with `num_workers` worker
        processes (batch_size=None: the batches are this rank's shares). The loop receives them
        in order and the cursor advances as it does; workers ignore the stop signals."""
        import torch.utils.data

        if self._dynamic is not None:
            raise RuntimeError("loader(): DataLoader workers are for the static split; in the "
                               "dynamic mode iterate ds.epochs(n) in the rank")
        dataset = self

        class _Loader(torch.utils.data.DataLoader):
            def __iter__(self):
                dataset._normalize()
                epoch = dataset._epoch
                plan = dataset._plan(epoch)
                step = plan.step_at(dataset._consumed)
                self.dataset._epoch, self.dataset._start = epoch, step
                for batch in super().__iter__():
                    dataset._consumed = plan.consumed_after(step)
                    dataset._last_step = step
                    # Counted here, as the loop receives it, not where a worker reads it (in
                    # another process, or in this one through _WorkerView with no workers).
                    _control.add_samples(len(plan.share(step, dataset.rank)))
                    step += 1
                    yield batch
                if dataset._epoch == epoch and step >= plan.steps:
                    dataset._epoch, dataset._consumed = epoch + 1, 0

        self._normalize()
        view = _WorkerView(self, self._epoch, self._plan(self._epoch).step_at(self._consumed))
        if kwargs.get("persistent_workers"):
            raise ValueError("loader(): persistent_workers is not supported (each iteration "
                             "starts its workers at the cursor)")
        kwargs.setdefault("batch_size", None)
        if kwargs["batch_size"] is not None:
            raise ValueError("loader(): batch_size must be None (a batch is this rank's share of "
                             "a global batch; set --primus-global-batch-size)")
        return _Loader(view, num_workers=num_workers, **kwargs)

    # The cursor.
    def _settings(self):
        return {"fingerprint": self.fingerprint, "records": self.records,
                "global_batch_size": self.global_batch_size, "shuffle": self.shuffle,
                "shuffle_block": self.shuffle_block, "seed": self.seed,
                "drop_last": self.drop_last}

    def state_dict(self):
        """The cursor, with what it depends on: a plain dict of numbers and strings, for
        primus.checkpoint.save(..., data_cursor=ds.state_dict()) (or anywhere in the state).

        Dynamic mode: only when a checkpoint is due (checkpoint_due()); this rank gives its
        splits back to primus-launch and gets the whole queue's progress, the same on every
        rank."""
        if self._dynamic is not None:
            return self._dynamic.state_dict()
        self._normalize()
        state = {"version": _dynamic.STATE_VERSION, "epoch": self._epoch,
                 "consumed": self._consumed, "format": self.format, "mode": self.mode}
        state.update(self._settings())
        return state

    def load_state_dict(self, state):
        """Continues from a cursor of state_dict(), on any number of ranks. Raises ValueError
        naming the difference when it was saved with another dataset, global batch size,
        shuffle, seed or drop_last."""
        if not isinstance(state, dict):
            raise TypeError(f"load_state_dict: expected the dict of state_dict(), got "
                            f"{type(state).__name__}")
        if self._dynamic is not None or state.get("mode") == "dynamic":
            if self._dynamic is None or state.get("mode") != "dynamic":
                raise ValueError(f"load_state_dict: the data mode (--primus-data-mode): the "
                                 f"cursor was saved in {state.get('mode', 'static')} mode, this "
                                 f"run is {self.mode}")
            self._dynamic.load_state_dict(state)
            return
        missing = [key for key in ("version", "epoch", "consumed", *self._settings())
                   if key not in state]
        if missing:
            raise ValueError(f"load_state_dict: not a primus.data cursor (no {', '.join(missing)})")
        if state["version"] != _dynamic.STATE_VERSION:
            raise ValueError(f"load_state_dict: a cursor of version {state['version']}; this "
                             f"primus.data reads version {_dynamic.STATE_VERSION}")
        if state.get("mode", "static") != self.mode:
            raise ValueError(f"load_state_dict: the data mode (--primus-data-mode): the cursor "
                             f"was saved in {state.get('mode')} mode, this run is {self.mode}")
        mismatch = _data.cursor_mismatch(state, self._settings())
        if mismatch is not None:
            raise ValueError(f"load_state_dict: {mismatch}")
        epoch = _settings.integer(state["epoch"], "epoch", None, 0, (1 << 63) - 1)
        consumed = _settings.integer(state["consumed"], "consumed", None, 0, (1 << 63) - 1)
        self._plan(epoch).step_at(consumed)  # a position inside a global batch is refused
        self._epoch, self._consumed = epoch, consumed
        self._normalize()

    def __repr__(self):
        return (f"<primus.data.Dataset {self.spec!r}: {self.records} {self.format} records, "
                f"rank {self.rank} of {self.world_size}, epoch {self._epoch}>")
