"""primus.comm with real processes: ranks started as the TCP store expects them (RANK,
WORLD_SIZE, MASTER_ADDR, PRIMUS_PORT, PRIMUS_JOB_SECRET), collectives on numpy arrays and torch
CPU tensors, bitwise equal results on every rank, errors that name what is wrong."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from primus import comm

RANK_SCRIPT = r'''
import json, sys
import numpy as np
from primus import comm
c = comm.connect(timeout=60)
out = {"rank": c.rank, "size": c.size}
x = np.arange(1001, dtype=np.float32) * (c.rank + 1)
c.allreduce(x)
out["sum_ok"] = bool(np.array_equal(x, np.arange(1001, dtype=np.float32) * sum(range(1, c.size + 1))))
out["sum_bits"] = x.tobytes().hex()[:64]
m = np.array([c.rank * 10, -c.rank], dtype=np.int64)
out["max"] = c.allreduce(m, op="max").tolist()
b = np.full(5, c.rank, dtype=np.float64)
out["bcast"] = c.broadcast(b, root=c.size - 1).tolist()
out["gather"] = c.allgather(np.array([c.rank, c.rank * 2], dtype=np.int32)).tolist()
rs = np.tile(np.arange(3, dtype=np.float64), (c.size, 1)) + c.rank
out["scatter"] = c.reduce_scatter(rs).tolist()
try:
    import torch
    t = torch.ones(7, dtype=torch.bfloat16) * (c.rank + 1)
    c.allreduce(t)
    out["torch_bf16"] = t.float().tolist()
    g = torch.full((2, 3), float(c.rank))
    c.allreduce(g, op="min")
    out["torch_min"] = g.sum().item()
except ImportError:
    pass
c.barrier()
print(json.dumps(out), flush=True)
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(size, script, secret="py-secret", extra=None):
    port = free_port()
    procs = []
    for rank in range(size):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(size), MASTER_ADDR="127.0.0.1",
                   PRIMUS_PORT=str(port), PRIMUS_JOB_SECRET=secret, PRIMUS_BOOTSTRAP="tcp")
        env.update(extra or {})
        procs.append(subprocess.Popen([sys.executable, "-c", script], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return [(p.wait(timeout=120), *p.communicate()) for p in procs]


@pytest.mark.parametrize("size", [1, 3, 4])
def test_collectives_on_numpy_and_torch_across_processes(size):
    results = launch(size, RANK_SCRIPT)
    outs = []
    for rc, stdout, stderr in results:
        assert rc == 0, stderr
        outs.append(json.loads(stdout))
    total = sum(range(1, size + 1))
    for rank, out in enumerate(outs):
        assert out["rank"] == rank and out["size"] == size
        assert out["sum_ok"]
        assert out["max"] == [10 * (size - 1), 0]
        assert out["bcast"] == [float(size - 1)] * 5
        assert out["gather"] == [[r, 2 * r] for r in range(size)]
        assert out["scatter"] == [float(size * j + sum(range(size))) for j in range(3)]
        if "torch_bf16" in out:
            assert out["torch_bf16"] == [float(total)] * 7
            assert out["torch_min"] == 0.0
    assert len({out["sum_bits"] for out in outs}) == 1  # bitwise equal everywhere


def test_a_rank_without_the_secret_is_told_so():
    rc, _, stderr = launch(1, "from primus import comm; comm.connect()",
                           extra={"PRIMUS_JOB_SECRET": ""})[0]
    assert rc != 0 and "PRIMUS_JOB_SECRET is not set" in stderr


def test_bad_arguments_are_refused_before_anything_is_sent():
    c = comm.Communicator(None)  # no call reaches the native communicator
    with pytest.raises(TypeError, match="expected a numpy array or a torch CPU tensor"):
        c.allreduce([1, 2, 3])
    with pytest.raises(TypeError, match="dtype uint16 is not supported"):
        c.allreduce(np.zeros(3, np.uint16))
    with pytest.raises(ValueError, match="not C-contiguous"):
        c.allreduce(np.zeros((4, 4), np.float32)[:, 1])
    frozen = np.zeros(3, np.float32)
    frozen.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        c.allreduce(frozen)
    with pytest.raises(ValueError, match="op: expected one of sum, max, min, prod"):
        c.allreduce(np.zeros(3, np.float32), op="avg")
    with pytest.raises(ValueError, match="timeout: expected a positive number"):
        comm.connect(timeout=-1)
