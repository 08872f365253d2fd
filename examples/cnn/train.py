#!/usr/bin/env python3
"""The CNN example with primus.train: Adam, a step learning-rate schedule, a checkpoint every
10 steps, and an exact resume after any stop.

    python3 make_data.py data/
    python3 train.py                            # 1 rank here; workers=4 in the call: 4 ranks
    sbatch preemptible.sbatch                   # on a cluster (see the sbatch files)

The dataset is --primus-data when given (PRIMUS_DATA), else data/*.tfrecord beside this file;
EPOCHS (default 3), WORKERS (default: the job's ranks) and CHECKPOINT_EVERY (steps, default 10)
come from the environment; the global batch is --primus-global-batch-size (PRIMUS_GLOBAL_BATCH_SIZE)
when given, else 64.
"""

import os
from pathlib import Path

import torch

import cnn
import primus
import primus.data

GLOBAL_BATCH = 64
HERE = Path(__file__).resolve().parent


def dataset(decode=cnn.decode):
    spec = os.environ.get("PRIMUS_DATA") or str(HERE / "data" / "*.tfrecord")
    batch = int(os.environ.get("PRIMUS_GLOBAL_BATCH_SIZE") or GLOBAL_BATCH)
    return primus.data.Dataset(spec, global_batch_size=batch, decode=decode)


def main(decode=cnn.decode, on_step=None):
    torch.manual_seed(1)  # the same initial weights on every run
    model = cnn.SmallCNN()
    workers = os.environ.get("WORKERS")
    result = primus.train(
        model, dataset(decode), epochs=int(os.environ.get("EPOCHS", "3")),
        workers=int(workers) if workers else None,
        optimizer=lambda params: torch.optim.Adam(params, lr=3e-3),
        lr_scheduler=lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=20, gamma=0.5),
        checkpoint_every=int(os.environ.get("CHECKPOINT_EVERY", "10")), keep_last=2,
        log_every=5, on_step=on_step)
    if primus.init().rank == 0:
        loss = "-" if result.final_loss is None else f"{result.final_loss:.4f}"
        print(f"finished: {result.steps} steps, {result.epochs} epochs, final loss {loss}, "
              f"{result.samples_per_second:.0f} samples/s", flush=True)
    return result


if __name__ == "__main__":
    main()
