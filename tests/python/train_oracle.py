"""The exactly-once oracle of the training tests: from the per-step trace lines of every run of a
job (tests/python/train_cnn.py's TRACE), the steps the final model descends from, and whether
they read every record exactly once per epoch.

A run that was interrupted after its last checkpoint trained on some records again in the run
that resumed; only the entry of the run the final model descends from counts. The lineage is
found backwards: the last run covers the steps after its resume step; the checkpoint it resumed
from was written by the latest earlier run that took that step; and so on down to step 0."""

import json
from collections import Counter, defaultdict
from pathlib import Path


def read_trace(directory):
    return [json.loads(line) for path in sorted(Path(directory).glob("rank-*.jsonl"))
            for line in path.read_text().splitlines() if line]


def lineage(entries):
    """{step: {"epoch": e, "ranks": {rank: ids}}} for the steps the final model descends from."""
    runs = {}
    for entry in entries:
        run = runs.setdefault(entry["run"], {"first": entry["time"], "resume": entry["resume"],
                                             "steps": defaultdict(dict), "epochs": {}})
        run["first"] = min(run["first"], entry["time"])
        if run["resume"] != entry["resume"]:
            raise AssertionError(f"run {entry['run']}: ranks resumed from different steps "
                                 f"({run['resume']} and {entry['resume']})")
        run["steps"][entry["step"]][entry["rank"]] = entry["ids"]
        run["epochs"][entry["step"]] = entry["epoch"]
    if not runs:
        raise AssertionError("no trace lines")
    order = sorted(runs, key=lambda name: runs[name]["first"])
    chain, upper, current = {}, None, order[-1]
    while True:
        run = runs[current]
        low = run["resume"] or 0
        for step, ranks in run["steps"].items():
            if step > low and (upper is None or step <= upper):
                chain[step] = {"epoch": run["epochs"][step], "ranks": ranks, "run": current}
        if low == 0:
            return chain
        earlier = [name for name in order[:order.index(current)] if low in runs[name]["steps"]]
        if not earlier:
            raise AssertionError(f"run {current} resumed from step {low}, which no earlier run "
                                 f"took: {order}")
        upper, current = low, earlier[-1]


def check_exactly_once(entries, records, epochs, steps_per_epoch):
    """Raises AssertionError unless the lineage takes steps 1..epochs*steps_per_epoch, each on
    every rank of its run's world (the ranks that run traced), and reads every record number
    below `records` exactly once in each epoch. Returns the lineage."""
    chain = lineage(entries)
    worlds = defaultdict(set)
    for entry in entries:
        worlds[entry["run"]].add(entry["rank"])
    total = epochs * steps_per_epoch
    if sorted(chain) != list(range(1, total + 1)):
        missing = sorted(set(range(1, total + 1)) - set(chain))
        raise AssertionError(f"the lineage does not take every step once: missing {missing[:10]}"
                             f", extra {sorted(set(chain) - set(range(1, total + 1)))[:10]}")
    per_epoch = defaultdict(Counter)
    for step, entry in chain.items():
        ranks = entry["ranks"]
        world = len(worlds[entry["run"]])
        if sorted(ranks) != list(range(world)):
            raise AssertionError(f"step {step} of run {entry['run']}: ranks {sorted(ranks)}, "
                                 f"expected 0..{world - 1}")
        if entry["epoch"] != (step - 1) // steps_per_epoch:
            raise AssertionError(f"step {step} was in epoch {entry['epoch']}, expected "
                                 f"{(step - 1) // steps_per_epoch}")
        for ids in ranks.values():
            per_epoch[entry["epoch"]].update(ids)
    for epoch in range(epochs):
        counts = per_epoch[epoch]
        twice = sorted(i for i, n in counts.items() if n > 1)
        never = sorted(set(range(records)) - set(counts))
        if twice or never or len(counts) != records:
            raise AssertionError(f"epoch {epoch}: records read more than once {twice[:10]}, "
                                 f"never read {never[:10]}, {len(counts)} distinct of {records}")
    return chain
