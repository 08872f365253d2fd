"""primus.data's dynamic mode (--primus-data-mode=dynamic): splits of the dataset handed out by
primus-launch over the control channel (launcher/control/data_tasks.cpp), read by the ranks
that ask, with every checkpoint ordered by the launcher."""

from . import _control, _data

STATE_VERSION = 1  # of a Dataset's state_dict, in both modes


class Dynamic:
    """The dynamic mode of a Dataset: splits (record ranges within files, the same cut on every
    rank) handed out by primus-launch; this rank reads its batches from the splits it holds,
    in order, asking for the next when one runs out. Progress is counted per split as batches
    are yielded; at a checkpoint the splits go back to primus-launch with their progress."""

    def __init__(self, ds):
        self._ds = ds
        self.batch = max(1, ds.global_batch_size // ds.world_size)
        self.split_records = _data.default_split_records(ds.records, ds.world_size)
        self._splits = None
        self._reader = _data.Reader(ds._core)
        self.epoch = 0
        self.held = []          # [id, begin, end, done], in the order received
        self.last_epoch = None  # n - 1 of epochs(n)
        self.finished = []      # ids done and not reported yet
        self.restored = None    # {"epoch", "done", "step"} from load_state_dict
        self.opened = False

    def splits(self):
        if self._splits is None:
            self._splits = _data.cut_splits(self._ds._core, self.split_records)
        return self._splits

    def meta(self):
        ds = self._ds
        return {"version": STATE_VERSION, "mode": "dynamic", "format": ds.format,
                "fingerprint": ds.fingerprint, "records": ds.records,
                "split_records": self.split_records}

    def _open(self):
        if self.opened:
            return
        self.opened = True
        if self._ds.rank == 0:
            _control.data_send({"op": "open", "meta": self.meta(),
                                "sizes": [end - begin for begin, end in self.splits()],
                                "restored": self.restored})

    def _next_split(self):
        """A split of this epoch (appended to held), False at the epoch's end, None when a
        checkpoint was ordered first."""
        self._open()
        finished = self.finished.pop(0) if self.finished else None
        reply = _control.data_request({"op": "next", "epoch": self.epoch, "finished": finished},
                                      interruptible=True)
        if reply is None:
            if finished is not None:
                self.finished.insert(0, finished)  # the request was dropped: report it again
            return None
        if reply.get("op") == "epoch-done":
            return False
        split_id = reply["id"]
        begin, end = self.splits()[split_id]
        self.held.append([split_id, begin, end, reply["done"]])
        return True

    def next_batch(self):
        """This rank's next batch of record numbers: [] when a checkpoint is due first; None at
        the epoch's end."""
        ids = []
        while len(ids) < self.batch:
            if not self.held:
                if _control.data_order() is not None:
                    break
                got = self._next_split()
                if not got:
                    if got is False and not ids:
                        return None
                    break
                continue
            split = self.held[0]
            take = min(self.batch - len(ids), split[2] - split[1] - split[3])
            start = split[1] + split[3]
            ids.extend(range(start, start + take))
            split[3] += take
            if split[1] + split[3] >= split[2]:
                self.finished.append(split[0])
                self.held.pop(0)
        return ids

    def epochs(self, n):
        self.last_epoch = n - 1
        while self.epoch < n:
            yield _DynamicEpoch(self, self.epoch)
            self.epoch += 1

    def leave(self):
        """At the end of the last epoch: True once every rank is there (no checkpoint can be
        ordered any more, so this rank may go); False when a checkpoint was ordered first."""
        self._open()
        reply = _control.data_request({"op": "leave"}, interruptible=True)
        return reply is not None and reply.get("op") == "left"

    def read(self, ids):
        return self._ds._decoded(self._reader.read(ids))

    def state_dict(self):
        order = _control.data_order()
        if order is None:
            raise RuntimeError("in the dynamic mode the data cursor is taken when primus-launch "
                               "orders a checkpoint: save when ds.checkpoint_due() names a step")
        self._open()
        held = [[s[0], s[3]] for s in self.held] + \
            [[i, self.splits()[i][1] - self.splits()[i][0]] for i in self.finished]
        reply = _control.data_request({"op": "release", "step": order["step"], "held": held})
        if reply.get("op") != "table":
            raise RuntimeError(f"primus-launch answered a release with {reply.get('op')!r}")
        self.held, self.finished = [], []
        _control.data_order_done(bool(reply.get("stop")))
        return dict(reply["cursor"])

    def load_state_dict(self, state):
        ds = self._ds
        for key in ("fingerprint", "records"):
            if state.get(key) != getattr(ds, key):
                raise ValueError(f"load_state_dict: the dataset (--primus-data): the cursor was "
                                 f"saved with {key} {state.get(key)!r}, this run has "
                                 f"{getattr(ds, key)!r}")
        self.split_records = int(state["split_records"])
        self._splits = None
        if len(state["done"]) != len(self.splits()):
            raise ValueError("load_state_dict: the cursor's splits do not match the dataset")
        self.epoch = int(state["epoch"])
        self.restored = {"epoch": self.epoch, "done": list(state["done"]),
                         "step": int(state["step"])}


class _DynamicEpoch:
    """One epoch in the dynamic mode: batches of this rank's splits until every split of the
    epoch is done; [] when a checkpoint is due and this rank has nothing in hand."""

    def __init__(self, dynamic, epoch):
        self._dynamic = dynamic
        self.epoch = epoch
        self._over = False

    def __len__(self):
        raise TypeError("len() of an epoch: the number of steps is not known in dynamic mode")

    def __iter__(self):
        return self

    def __next__(self):
        if self._over or self._dynamic.epoch != self.epoch:
            raise StopIteration
        ids = self._dynamic.next_batch()
        if ids is None:
            # The last epoch ends for every rank at once: another rank may still order a
            # checkpoint, whose save needs this one.
            if self.epoch == self._dynamic.last_epoch and not self._dynamic.leave():
                return []
            self._over = True
            raise StopIteration
        self.last_ids = ids
        _control.add_samples(len(ids))
        return self._dynamic.read(ids) if ids else []

    def __repr__(self):
        return f"<primus.data epoch {self.epoch} (dynamic)>"
