"""A rank that reads its share of a dataset with primus.data under primus-launch and logs what
it received, for the exactly-once tests: one JSON line per batch (run, epoch, step, record ids)
in $OUT/rank-R.jsonl. Records hold their id as decimal text. The cursor is saved with every
checkpoint (every SAVE_EVERY steps, and at a stop); the rank resumes from the newest one.

WORKERS=N: read through ds.loader(num_workers=N). STOP_AT=S: at step S of the first run (no
checkpoint yet), rank 0 sends SIGTERM to the ranks' process group, as Slurm does at a
preemption (the workers get it too). RUN=name: written in every line.
"""

import json
import os
import signal
import sys

import primus
import primus.data
from primus import checkpoint

EPOCHS = int(os.environ.get("EPOCHS", "2"))
SAVE_EVERY = int(os.environ.get("SAVE_EVERY", "4"))
WORKERS = int(os.environ.get("WORKERS", "0"))
STOP_AT = int(os.environ.get("STOP_AT", "0"))


def decode(record):
    return int(record.strip(b" \n\0"))


def main():
    job = primus.init(torch=False)
    ds = primus.data.Dataset(decode=decode)
    step = 0
    restored = checkpoint.load()
    if restored is not None:
        ds.load_state_dict(restored.data_cursor)
        step = restored.step
    first_run = restored is None
    out = open(os.path.join(os.environ["OUT"], f"rank-{job.rank}.jsonl"), "a")
    for epoch in ds.epochs(EPOCHS):
        batches = ds.loader(num_workers=WORKERS) if WORKERS else epoch
        for batch in batches:
            step += 1
            out.write(json.dumps({"run": os.environ.get("RUN", ""), "epoch": epoch.epoch,
                                  "step": step, "world": job.world_size, "ids": batch}) + "\n")
            out.flush()
            if first_run and step == STOP_AT and job.rank == 0:
                os.killpg(os.getpgid(0), signal.SIGTERM)
            if primus.should_stop():
                checkpoint.save({}, step, data_cursor=ds.state_dict())
                print(f"rank {job.rank}: stopped at step {step}", flush=True)
                sys.exit(primus.EXIT_PREEMPTED)
            if step % SAVE_EVERY == 0:
                checkpoint.save({}, step, data_cursor=ds.state_dict())
    print(f"rank {job.rank}: finished at step {step}", flush=True)


if __name__ == "__main__":
    main()
