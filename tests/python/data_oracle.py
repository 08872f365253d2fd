"""The exactly-once oracle of the dynamic data mode's tests (one machine and the testbed): what
the final state descends from, from the logs of tests/python/read_dynamic.py."""

import json
import os


def kept_records(workdir):
    """({epoch: [ids]}, {rank: records read}): for every run and attempt but the last, what each
    rank read before it saved the checkpoint the next one resumed from (the last one saved in
    that attempt); for the last, everything it read."""
    lines = {}
    for name in os.listdir(workdir):
        if name.startswith("rank-") and name.endswith(".jsonl"):
            with open(os.path.join(workdir, name)) as f:
                lines[int(name[5:-6])] = [json.loads(line) for line in f]
    runs = sorted({(e["run"], e["attempt"]) for entries in lines.values() for e in entries})
    kept, by_rank = {}, {}
    for position, key in enumerate(runs):
        last = position == len(runs) - 1
        saved_steps = [e["saved"] for entries in lines.values() for e in entries
                       if (e["run"], e["attempt"]) == key and "saved" in e]
        resume = max(saved_steps) if saved_steps else None
        for rank, entries in lines.items():
            pending = []
            for e in entries:
                if (e["run"], e["attempt"]) != key:
                    continue
                if "saved" in e:
                    if e["saved"] == resume:
                        for epoch, ids in pending:
                            kept.setdefault(epoch, []).extend(ids)
                        pending = []
                    continue
                pending.append((e["epoch"], e["ids"]))
                by_rank[rank] = by_rank.get(rank, 0) + len(e["ids"])
            if last:
                for epoch, ids in pending:
                    kept.setdefault(epoch, []).extend(ids)
    return kept, by_rank
