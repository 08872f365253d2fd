"""One rank of the should_stop() benchmark (run by bench_launch_slurm.py under primus-launch):
times CALLS calls of primus.should_stop() and as many torch.distributed (gloo) all_reduce calls of
one int in the same job, interleaved in blocks of 50, after a warm-up; rank 0 prints one JSON line
with each side's median and p99 in microseconds."""

import json
import os
import time

import torch
import torch.distributed as dist

import primus

CALLS = int(os.environ.get("CALLS", "1000"))


def timed(fn, count):
    out = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main():
    job = primus.init()
    torch.set_num_threads(1)
    one = torch.zeros(1, dtype=torch.int32)

    def gloo():
        dist.all_reduce(one, op=dist.ReduceOp.MAX)

    for fn in (primus.should_stop, gloo):
        timed(fn, 100)
    sides = {"should_stop": [], "gloo": []}
    for _ in range(CALLS // 50):
        sides["should_stop"] += timed(primus.should_stop, 50)
        sides["gloo"] += timed(gloo, 50)
    if job.rank == 0:
        print(json.dumps({"world_size": job.world_size,
                          **{name: {"median_us": percentile(v, 0.5) * 1e6,
                                    "p99_us": percentile(v, 0.99) * 1e6}
                             for name, v in sides.items()}}), flush=True)


if __name__ == "__main__":
    main()
