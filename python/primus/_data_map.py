"""primus.data over a map-style source (a sequence with len() and [i], such as a torch Dataset):
the same global order, split and cursor as over files of records."""

import os


def is_map_style(source):
    """A torch map-style dataset (or any sequence of samples): len() and [i], not a path."""
    return (not isinstance(source, (str, bytes, os.PathLike)) and hasattr(source, "__len__")
            and hasattr(source, "__getitem__"))


class MapCore:
    """What a Dataset over a map-style source knows of it in place of files: its length, and a
    fingerprint (the source's class and length) that a cursor must match."""

    format = "map"
    record_size = 0
    files = ()

    def __init__(self, source):
        self.source = source
        self.records = len(source)
        kind = type(source)
        self.fingerprint = f"map:{kind.__module__}.{kind.__qualname__}:{self.records}"


class MapPlan:
    """An epoch's plan over a map-style source: the ids of each share, and its samples."""

    def __init__(self, core, plan):
        self._source = core.source
        self._plan = plan
        self.steps = plan.steps
        self.used_records = plan.used_records
        self.step_at = plan.step_at
        self.consumed_after = plan.consumed_after
        self.share = plan.share

    def read_share(self, step, rank, prefetch=-1):  # noqa: ARG002 (nothing to announce)
        return [self._source[int(i)] for i in self._plan.share(step, rank)]
