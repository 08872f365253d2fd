"""One rank of the heartbeat-overhead benchmark (run by bench_monitor.py under primus-launch
with --primus-heartbeat-interval=1): a small MLP (3 x 256, SGD, batches of 32) trained with torch
DDP on gloo, primus.should_stop() called at every step, one thread per rank.

The heartbeats are switched on and off within the job, in phases of PHASE seconds, so that the
throughput with and without them is compared in the same processes, placed on the same CPUs:
between two jobs the 4 ranks' placement on 2 cores alone moves the throughput by several
percent, more than the cost being measured. The heartbeat thread runs throughout; in an "off"
phase its heartbeat() returns at once (nothing built, nothing sent, nothing for the launcher to
read). The phases go on, off, off, on, on, off, ... so that each pair of neighbours has one of
each, in alternating order (a drift of the machine's speed within the job cancels).

Rank 0 decides by its clock: WARMUP seconds of warm-up (heartbeats on), then PHASES phases; every
CHECK steps it broadcasts whether to go on and whether heartbeats are on (two ints, the same cost
in either phase), so that every rank runs the same steps and switches at the same step. Rank 0
prints one JSON line: each phase's steps and seconds and whether heartbeats were on, how many
heartbeats it sent in the phases that had them, PRIMUS_HEARTBEAT_INTERVAL as the rank saw it,
whether the rank reports to primus-launch, and what building one heartbeat costs it afterwards
(heartbeat_us: the mean of 200 primus._control.heartbeat_message() calls made into JSON lines,
not sent; rank 0 is its node's local rank 0, so node_stats included)."""

import json
import os
import time

import torch
import torch.distributed as dist

import primus
from primus import _control

WARMUP = float(os.environ.get("WARMUP", "2"))
PHASE = float(os.environ.get("PHASE_SECONDS", "2"))
PHASES = int(os.environ.get("PHASES", "12"))
CHECK = 5


class Gate:
    """heartbeat() as the heartbeat thread calls it, sending only while `on`."""

    def __init__(self):
        self.on = True
        self.sent_while_measured = 0
        self.measuring = False
        self.send = _control.heartbeat

    def __call__(self):
        if self.on:
            if self.measuring:
                self.sent_while_measured += 1
            self.send()


def heartbeats_on(phase):
    return phase % 4 in (0, 3)


def main():
    gate = Gate()
    _control.heartbeat = gate  # the thread looks the name up at each beat
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
    state = torch.tensor([1, 1], dtype=torch.int64)  # [go on, heartbeats on]: rank 0's

    began = time.perf_counter()
    phases = []  # rank 0: {"on", "steps", "seconds"} for each phase
    phase, phase_began, phase_steps = -1, None, 0
    while True:
        for _ in range(CHECK):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            primus.should_stop()
        now = time.perf_counter()
        if job.rank == 0:
            phase_steps += CHECK
            if phase < 0 and now - began >= WARMUP:
                phase, phase_began, phase_steps = 0, now, 0
                gate.measuring = True
            elif phase >= 0 and now - phase_began >= PHASE:
                phases.append({"on": heartbeats_on(phase), "steps": phase_steps,
                               "seconds": now - phase_began})
                phase, phase_began, phase_steps = phase + 1, now, 0
            state[0] = int(phase < PHASES)
            state[1] = int(phase < 0 or heartbeats_on(phase))
        dist.broadcast(state, 0)
        gate.on = bool(state[1])
        if not state[0]:
            break
    gate.measuring = False
    if job.rank == 0:
        start = time.perf_counter()
        for _ in range(200):
            json.dumps(_control.heartbeat_message(), separators=(",", ":"), allow_nan=False)
        heartbeat_us = (time.perf_counter() - start) / 200 * 1e6
        print(json.dumps({"phases": phases, "heartbeats_sent": gate.sent_while_measured,
                          "heartbeat_interval": os.environ.get("PRIMUS_HEARTBEAT_INTERVAL"),
                          "reporting": _control.connected(), "heartbeat_us": heartbeat_us}),
              flush=True)


if __name__ == "__main__":
    main()
