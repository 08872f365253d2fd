"""One rank of the heartbeat-overhead benchmark (run by bench_monitor.py under primus-launch): a
small MLP (3 x 256, SGD, batches of 32) trained with torch DDP on gloo, primus.should_stop()
called at every step, one thread per rank. Rank 0 decides by its clock: WARMUP seconds of
warm-up, then SECONDS_MEASURED seconds measured; every CHECK steps it broadcasts whether to go
on (one int, the same cost with and without heartbeats), so that every rank runs the same
steps. Rank 0 prints one JSON line: steps_per_second over the measured part, its steps and
seconds, PRIMUS_HEARTBEAT_INTERVAL as the rank saw it, whether the rank reports to
primus-launch, and what building one heartbeat costs it afterwards (heartbeat_us: the mean of
200 primus._control.heartbeat_message() calls made into JSON lines, not sent; rank 0 is its
node's local rank 0, so node_stats included)."""

import json
import os
import time

import torch
import torch.distributed as dist

import primus
from primus import _control

WARMUP = float(os.environ.get("WARMUP", "2"))
SECONDS = float(os.environ.get("SECONDS_MEASURED", "10"))
CHECK = 5


def main():
    job = primus.init()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers = []
    for _ in range(3):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(*layers, torch.nn.Linear(256, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(32, 256)
    y = torch.randint(0, 10, (32,))
    go_on = torch.zeros(1, dtype=torch.int32)

    done = 0
    began = time.perf_counter()
    measured_from = None  # (time, steps) on rank 0 when the warm-up ended
    while True:
        for _ in range(CHECK):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            primus.should_stop()
        done += CHECK
        now = time.perf_counter()
        if job.rank == 0:
            if measured_from is None and now - began >= WARMUP:
                measured_from = (now, done)
            go_on[0] = int(measured_from is None or now - measured_from[0] < SECONDS)
        dist.broadcast(go_on, 0)
        if not go_on[0]:
            break
    if job.rank == 0:
        start = time.perf_counter()
        for _ in range(200):
            json.dumps(_control.heartbeat_message(), separators=(",", ":"), allow_nan=False)
        heartbeat_us = (time.perf_counter() - start) / 200 * 1e6
        seconds = now - measured_from[0]
        steps = done - measured_from[1]
        print(json.dumps({"steps_per_second": steps / seconds, "steps": steps,
                          "seconds": seconds,
                          "heartbeat_interval": os.environ.get("PRIMUS_HEARTBEAT_INTERVAL"),
                          "reporting": _control.connected(), "heartbeat_us": heartbeat_us}),
              flush=True)


if __name__ == "__main__":
    main()
