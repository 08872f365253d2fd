"""A rank of the dynamic data mode under primus-launch, for the tests: it reads its batches from
the splits primus-launch hands it and logs them, one JSON line per batch (attempt, epoch, ids)
in $OUT/rank-R.jsonl, and a line {"saved": S} after every checkpoint it saved. Records hold
their id as decimal text. It resumes from the newest checkpoint.

SLOW_RANK=r: that rank sleeps SLOW_SECONDS (default 0.02) per batch, the others SLEEP_SECONDS
(default 0). CKPT_EVERY=k: rank 0 asks
for a checkpoint every k of its batches. FAIL_AT=k, FAIL_RANK=r: in attempt 0 that rank exits 3
after its k-th batch. STOP_AT=k: in the first run, rank 0 sends SIGTERM to its process group
after its k-th batch (a preemption).
"""

import faulthandler
import json
import os
import signal
import sys
import time

import primus
import primus.data
from primus import checkpoint

EPOCHS = int(os.environ.get("EPOCHS", "2"))


def number(name, default=0):
    return int(os.environ.get(name, default))


def main():
    faulthandler.register(signal.SIGQUIT, all_threads=True)  # a stack dump for a hang
    job = primus.init(torch=False)
    attempt = number("PRIMUS_LAUNCH_RESTARTS")
    ds = primus.data.Dataset(decode=lambda record: int(record))
    restored = checkpoint.load()
    if restored is not None:
        ds.load_state_dict(restored.data_cursor)
    first_run = restored is None
    out = open(os.path.join(os.environ["OUT"], f"rank-{job.rank}.jsonl"), "a")
    run = os.environ.get("RUN", "")
    batches = 0
    for epoch in ds.epochs(EPOCHS):
        for batch in epoch:
            if batch:
                batches += 1
                out.write(json.dumps({"run": run, "attempt": attempt, "epoch": epoch.epoch,
                                      "ids": batch}) + "\n")
                out.flush()
            if job.rank == number("SLOW_RANK", -1):
                time.sleep(float(os.environ.get("SLOW_SECONDS", "0.02")))
            else:
                time.sleep(float(os.environ.get("SLEEP_SECONDS", "0")))
            if batch and job.rank == 0 and number("CKPT_EVERY") and \
                    batches % number("CKPT_EVERY") == 0:
                ds.request_checkpoint()
            if batch and attempt == 0 and job.rank == number("FAIL_RANK", -1) and \
                    batches == number("FAIL_AT"):
                os._exit(3)
            if batch and first_run and job.rank == 0 and batches == number("STOP_AT"):
                os.killpg(os.getpgid(0), signal.SIGTERM)
            step = ds.checkpoint_due()
            if step is not None:
                checkpoint.save({}, step, data_cursor=ds.state_dict())
                out.write(json.dumps({"run": run, "attempt": attempt, "saved": step}) + "\n")
                out.flush()
            if primus.should_stop():
                print(f"rank {job.rank}: stopped after checkpoint {step}", flush=True)
                sys.exit(primus.EXIT_PREEMPTED)
    print(f"rank {job.rank}: finished, {batches} batches", flush=True)


if __name__ == "__main__":
    main()
