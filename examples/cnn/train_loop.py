#!/usr/bin/env python3
"""The CNN example as an explicit loop: what primus.train does, written out with the same public
calls, for a user who needs to change the loop itself.

    python3 make_data.py data/
    primus-launch --nproc 2 -- python3 train_loop.py
"""

import os
import sys
from pathlib import Path

import torch

import cnn
import primus
import primus.data
from primus import checkpoint

GLOBAL_BATCH = 64
CHECKPOINT_EVERY = 10
HERE = Path(__file__).resolve().parent


def main():
    job = primus.init()                  # rank, world, torch.distributed, stop signals
    torch.manual_seed(1)                 # the same initial weights on every run
    model = cnn.SmallCNN().to(job.device)
    net = primus.ddp(model)              # DDP whose resumed runs are bitwise equal
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.5)
    spec = os.environ.get("PRIMUS_DATA") or str(HERE / "data" / "*.tfrecord")
    data = primus.data.Dataset(spec, global_batch_size=GLOBAL_BATCH, decode=cnn.decode,
                               drop_last=True)
    torch.manual_seed(1000 + job.rank)   # different dropout on every rank, the same every run

    step, loss = 0, None
    restored = checkpoint.load()         # where every rank resumes (None at the first start)
    if restored is not None:
        model.load_state_dict(restored.state["model"])
        optimizer.load_state_dict(restored.state["optimizer"])
        schedule.load_state_dict(restored.state["lr_scheduler"])
        data.load_state_dict(restored.data_cursor)
        restored.restore_rng()
        step = restored.step

    def save(blocking):
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                 "lr_scheduler": schedule.state_dict()}
        return checkpoint.save(state, step, epoch=data.epoch, data_cursor=data.state_dict(),
                               keep_last=2, blocking=blocking)

    for epoch in data.epochs(int(os.environ.get("EPOCHS", "3"))):
        for batch in epoch:              # this rank's share of the next global batch
            images, labels = torch.utils.data.default_collate(batch)
            images, labels = images.to(job.device), labels.to(job.device)
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(net(images), labels)
            loss.backward()
            optimizer.step()
            schedule.step()
            step += 1
            if step % 5 == 0:
                primus.log(step, loss=float(loss))
            if step % CHECKPOINT_EVERY == 0:
                save(blocking=False)     # written in the background, committed by a later
                                         # should_stop() once every rank has written it
            if primus.should_stop():     # every rank agrees on the same step
                if step % CHECKPOINT_EVERY != 0:
                    save(blocking=True)
                checkpoint.wait()
                sys.exit(primus.EXIT_PREEMPTED)   # 75: primus-launch requeues the job
    if step % CHECKPOINT_EVERY != 0:
        save(blocking=True)
    checkpoint.wait()
    if job.rank == 0 and loss is not None:
        print(f"finished: {step} steps, final loss {float(loss):.4f}", flush=True)


if __name__ == "__main__":
    main()
