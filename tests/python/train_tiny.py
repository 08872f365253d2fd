"""A small data-parallel training program for the tests of primus-launch and the rank side:
dropout, Adam, a learning-rate schedule and an RNG-driven data order, a checkpoint every
SAVE_EVERY steps, and a stop at any step (primus.should_stop(): save, exit EXIT_PREEMPTED).
It resumes from the newest checkpoint. At the end rank 0 writes the final parameters and
optimizer state as hex into $OUT.

STOP_AT=S: at step S, before its backward pass, rank 0 sends SIGTERM to its parent
(primus-launch), as a preemption would reach the launcher; the launcher forwards it to every
rank, and the ranks stop after step S (with PRIMUS_STOP_INTERVAL=0; else at the next agreement).
For the testbed's scenarios: STEP_SLEEP=seconds per step; PROGRESS=FILE: rank 0 writes the
step it reached there; FAIL_AT=S (with FAIL_RANK, default 1, and FAIL_MARKER=FILE): that rank
exits 3 at step S once (the marker says it did); FAIL_NODE=NODE (with FAIL_AT=S): on that node
(SLURMD_NODENAME), the rank of local rank 0 exits 3 at step S in every attempt, a bad node's
way; HANG_AT=S (with HANG_RANK): that rank stops
itself with SIGSTOP at step S, once (HANG_MARKER=FILE); CHILD=1: every rank starts a child that
sleeps ten minutes, as a DataLoader worker that outlives its rank would; SLOW_RANK=R with
SLOW_SLEEP=seconds: that rank sleeps so much longer each step, after training on its batch (a
straggler). Rank 0 logs the loss with primus.log at every step.
The model runs under primus.ddp (DDP whose gradient buckets keep their layout after a restart;
plain DDP rebuilds them, and above two ranks the sums then round differently); DDP=plain: plain
DistributedDataParallel.
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
EPOCHS = int(os.environ.get("EPOCHS", "3"))
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
    if os.environ.get("DDP") == "plain" and job.world_size > 1:
        ddp = torch.nn.parallel.DistributedDataParallel(model)
    else:
        ddp = primus.ddp(model)
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
    step_sleep = float(os.environ.get("STEP_SLEEP", "0"))
    if os.environ.get("CHILD") == "1":
        import subprocess

        subprocess.Popen(["sleep", "600"])
    progress = os.environ.get("PROGRESS")
    slow_rank = int(os.environ.get("SLOW_RANK", "-1"))
    slow_sleep = float(os.environ.get("SLOW_SLEEP", "0"))
    fail_node = os.environ.get("FAIL_NODE")

    def once(action, at_name, rank_name, marker_name):
        at = int(os.environ.get(at_name, "-1"))
        marker = os.environ.get(marker_name)
        if step != at or job.rank != int(os.environ.get(rank_name, "1")):
            return
        if marker and os.path.exists(marker):
            return
        if marker:
            open(marker, "w").close()
        action()

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
        if step + 1 == stop_at and job.rank == 0:
            # As a preemption reaches primus-launch; it forwards the signal to every rank. Wait
            # for it to come back: with PRIMUS_STOP_INTERVAL=0 (an agreement at every step) the
            # ranks stop at this very step.
            os.kill(os.getppid(), signal.SIGTERM)
            for _ in range(500):
                if primus.stop_requested():
                    break
                time.sleep(0.01)
        loss.backward()
        optimizer.step()
        schedule.step()
        step += 1
        if step_sleep:
            time.sleep(step_sleep)
        if job.rank == slow_rank:
            time.sleep(slow_sleep)
        primus.log(step, loss=float(loss))
        if progress and job.rank == 0:
            with open(progress + ".tmp", "w") as f:
                f.write(str(step))
            os.replace(progress + ".tmp", progress)
        once(lambda: (print(f"rank {job.rank}: failing at step {step}", flush=True),
                      os._exit(3)), "FAIL_AT", "FAIL_RANK", "FAIL_MARKER")
        once(lambda: os.kill(os.getpid(), signal.SIGSTOP), "HANG_AT", "HANG_RANK", "HANG_MARKER")
        if (fail_node and os.environ.get("SLURMD_NODENAME") == fail_node and job.local_rank == 0
                and step == int(os.environ.get("FAIL_AT", "-1"))):
            print(f"rank {job.rank}: failing on {fail_node} at step {step}", flush=True)
            os._exit(3)
        if step % SAVE_EVERY == 0:
            save(step)
        if primus.should_stop(samples=PER_RANK_BATCH):
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
