"""One rank of the primus.ddp benchmark (run by bench_launch_slurm.py under primus-launch): the same
model (an MLP of 4 x 512, Adam, batches of 64) trained under plain DistributedDataParallel and
under primus.ddp in the same job, in alternating blocks of STEPS steps after a warm-up; rank 0
prints one JSON line with each side's median seconds per step over the blocks, and the median
of the blocks' paired ratios (plain's time over primus.ddp's in the same pair of blocks), which
drift on this shared machine affects least."""

import json
import os
import statistics
import time

import torch

import primus

BLOCKS = int(os.environ.get("BLOCKS", "16"))
STEPS = int(os.environ.get("STEPS", "5"))


def make():
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(512, 10))
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def main():
    job = primus.init()
    torch.set_num_threads(1)
    plain_model, plain_opt = make()
    ours_model, ours_opt = make()
    sides = {"plain": (torch.nn.parallel.DistributedDataParallel(plain_model), plain_opt),
             "primus.ddp": (primus.ddp(ours_model), ours_opt)}
    x = torch.randn(64, 512)
    y = torch.randint(0, 10, (64,))

    def block(name, steps):
        model, opt = sides[name]
        start = time.perf_counter()
        for _ in range(steps):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        return (time.perf_counter() - start) / steps

    for name in sides:
        block(name, 3)
    times = {name: [] for name in sides}
    for b in range(BLOCKS):
        order = list(sides) if b % 2 == 0 else list(reversed(sides))
        for name in order:
            times[name].append(block(name, STEPS))
    if job.rank == 0:
        paired = [p / o for p, o in zip(times["plain"], times["primus.ddp"])]
        print(json.dumps({"world_size": job.world_size, "paired_ratio": statistics.median(paired),
                          "ddp": {name: {"median_s": statistics.median(v), "min_s": min(v),
                                         "max_s": max(v)} for name, v in times.items()}}),
              flush=True)


if __name__ == "__main__":
    main()
