"""A small data-parallel training program for the tests of primus-launch and the rank side:
dropout, Adam, a learning-rate schedule and an RNG-driven data order, a checkpoint every
SAVE_EVERY steps, and a stop at any step (primus.should_stop(): save, exit EXIT_PREEMPTED).
It resumes from the newest checkpoint. At the end rank 0 writes the final parameters and
optimizer state as hex into $OUT.

STOP_AT=S: at step S, rank 0 sends SIGTERM to its parent (primus-launch), as a preemption would
reach the launcher; the launcher forwards it to every rank.
"""

import json
import os
import signal
import sys
import time

import numpy as np
import torch

import primus
from primus import checkpoint

SAVE_EVERY = 5
EPOCHS = 3
SAMPLES = 256
PER_RANK_BATCH = 8
SEED = 1234


def model_and_optimizer():
    torch.manual_seed(SEED)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                torch.nn.Linear(32, 4))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.5)
    return model, optimizer, schedule


def main():
    job = primus.init()
    torch.set_num_threads(1)
    data_rng = np.random.default_rng(SEED)
    x = torch.tensor(data_rng.standard_normal((SAMPLES, 16)), dtype=torch.float32)
    y = torch.tensor(data_rng.integers(0, 4, SAMPLES), dtype=torch.int64)
    model, optimizer, schedule = model_and_optimizer()
    ddp = torch.nn.parallel.DistributedDataParallel(model) if job.world_size > 1 else model
    global_batch = PER_RANK_BATCH * job.world_size
    steps_per_epoch = SAMPLES // global_batch
    total = EPOCHS * steps_per_epoch
    # Different dropout masks on every rank, the same run after run.
    torch.manual_seed(SEED + 1 + job.rank)

    step = 0
    restored = checkpoint.load(restore_rng=True)
    if restored is not None:
        model.load_state_dict(restored.state["model"])
        optimizer.load_state_dict(restored.state["optim"])
        schedule.load_state_dict(restored.state["schedule"])
        step = restored.step
        print(f"rank {job.rank}: resumed at step {step}", flush=True)
    stop_at = int(os.environ.get("STOP_AT", "-1"))

    def save(at):
        checkpoint.save({"model": model.state_dict(), "optim": optimizer.state_dict(),
                         "schedule": schedule.state_dict()}, at,
                        epoch=at // steps_per_epoch, data_cursor={"step": at}, keep_last=2)

    while step < total:
        epoch, within = divmod(step, steps_per_epoch)
        order = np.random.default_rng([SEED, epoch]).permutation(SAMPLES)
        start = within * global_batch + job.rank * PER_RANK_BATCH
        index = torch.as_tensor(order[start:start + PER_RANK_BATCH])
        ddp.train()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x[index]), y[index])
        loss.backward()
        optimizer.step()
        schedule.step()
        step += 1
        if step == stop_at and job.rank == 0:
            # As a preemption reaches primus-launch; it forwards the signal to every rank. Wait
            # for it to come back, so that the ranks stop at this very step.
            os.kill(os.getppid(), signal.SIGTERM)
            for _ in range(500):
                if primus.stop_requested():
                    break
                time.sleep(0.01)
        if step % SAVE_EVERY == 0:
            save(step)
        if primus.should_stop():
            if step % SAVE_EVERY != 0:
                save(step)
            print(f"rank {job.rank}: stopped at step {step}", flush=True)
            sys.exit(primus.EXIT_PREEMPTED)

    if job.rank == 0:
        result = {name: value.detach().numpy().tobytes().hex()
                  for name, value in model.state_dict().items()}
        for key, state in optimizer.state_dict()["state"].items():
            for name, value in state.items():
                result[f"optim.{key}.{name}"] = torch.as_tensor(value).numpy().tobytes().hex()
        with open(os.environ["OUT"], "w") as out:
            json.dump(result, out)
    print(f"rank {job.rank}: finished at step {step}", flush=True)


if __name__ == "__main__":
    main()
