"""primus.comm with real processes: ranks started as the TCP store expects them (RANK,
WORLD_SIZE, MASTER_ADDR, PRIMUS_PORT, PRIMUS_JOB_SECRET), collectives on numpy arrays and torch
CPU tensors, bitwise equal results on every rank, errors that name what is wrong."""

import inspect
import json
import math
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from primus import comm

SUM, SCATTER, TORCH = 1, 2, 3  # what an input is for
SCATTER_BLOCK = 5


def inputs(rank, purpose, shape, dtype):
    """Rank `rank`'s input for `purpose`, which every rank (and the test) can compute: values
    of mixed magnitudes, not integers, so that float sums round differently in different
    orders."""
    rng = np.random.default_rng([20240611, rank, purpose])
    scale = 10.0 ** rng.integers(-3, 4, size=shape)
    return (rng.standard_normal(shape) * scale).astype(dtype)


INPUTS = (f"import numpy as np\nSUM, SCATTER, TORCH, SCATTER_BLOCK = {SUM}, {SCATTER}, {TORCH}, "
          f"{SCATTER_BLOCK}\n" + inspect.getsource(inputs))

RANK_SCRIPT = INPUTS + r'''
import hashlib, json
from primus import comm
c = comm.connect(timeout=60)
out = {"rank": c.rank, "size": c.size, "integrity": c.integrity}
x = inputs(c.rank, SUM, 1001, np.float32)
c.allreduce(x)
out["sum"] = x.tobytes().hex()
out["sum_digest"] = hashlib.sha256(x.tobytes()).hexdigest()
m = np.array([c.rank * 10, -c.rank], dtype=np.int64)
out["max"] = c.allreduce(m, op="max").tolist()
b = np.full(5, c.rank, dtype=np.float64)
out["bcast"] = c.broadcast(b, root=c.size - 1).tolist()
out["gather"] = c.allgather(np.array([c.rank, c.rank * 2], dtype=np.int32)).tolist()
rs = inputs(c.rank, SCATTER, (c.size, SCATTER_BLOCK), np.float64)  # every block differs
out["scatter"] = c.reduce_scatter(rs).tobytes().hex()
c.barrier()
print(json.dumps(out), flush=True)
'''

TORCH_SCRIPT = INPUTS + r'''
import hashlib, json
import torch
from primus import comm
c = comm.connect(timeout=60)
out = {}
t = torch.ones(7, dtype=torch.bfloat16) * (c.rank + 1)
c.allreduce(t)
out["torch_bf16"] = t.float().tolist()
g = torch.full((2, 3), float(c.rank))
c.allreduce(g, op="min")
out["torch_min"] = g.sum().item()
r = torch.from_numpy(inputs(c.rank, TORCH, 1001, np.float32)).to(torch.bfloat16)
c.allreduce(r)
out["bf16_digest"] = hashlib.sha256(r.view(torch.int16).numpy().tobytes()).hexdigest()
c.barrier()
print(json.dumps(out), flush=True)
'''


def sum_bound(parts, unit):
    # Any order of len(parts)-1 additions, each rounding by at most unit * (sum of magnitudes),
    # and the exact reference's own rounding to float64: a tight bound on the error.
    n = len(parts)
    return ((n - 1) * unit / (1 - (n - 1) * unit) + 2.0 ** -53) * np.sum(np.abs(parts), axis=0)


def exact_sum(parts):
    return np.array([math.fsum(column) for column in np.asarray(parts, np.float64).T])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SECRET = "5e" * 32  # the form the plugin and primus-launch make: 64 lowercase hex digits


def launch(size, script, secret=SECRET, extra=None, rank_extra=None):
    port = free_port()
    procs = []
    for rank in range(size):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(size), MASTER_ADDR="127.0.0.1",
                   PRIMUS_PORT=str(port), PRIMUS_JOB_SECRET=secret, PRIMUS_BOOTSTRAP="tcp")
        env.update(extra or {})
        env.update((rank_extra or {}).get(rank, {}))
        procs.append(subprocess.Popen([sys.executable, "-c", script], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return [(p.wait(timeout=120), *p.communicate()) for p in procs]


@pytest.mark.parametrize("size", [1, 3, 4])
def test_collectives_on_numpy_across_processes(size):
    results = launch(size, RANK_SCRIPT)
    outs = []
    for rc, stdout, stderr in results:
        assert rc == 0, stderr
        outs.append(json.loads(stdout))
    for rank, out in enumerate(outs):
        assert out["rank"] == rank and out["size"] == size
        assert out["max"] == [10 * (size - 1), 0]
        assert out["bcast"] == [float(size - 1)] * 5
        assert out["gather"] == [[r, 2 * r] for r in range(size)]

    # allreduce: bitwise equal everywhere, over the whole buffer, and within a tight bound of
    # the exact sum; the data is such that the order of the additions shows in the bits.
    assert len({out["sum_digest"] for out in outs}) == 1, "the ranks hold different bits"
    parts = [inputs(r, SUM, 1001, np.float32) for r in range(size)]
    got = np.frombuffer(bytes.fromhex(outs[0]["sum"]), np.float32).astype(np.float64)
    wrong = np.abs(got - exact_sum(parts)) > sum_bound(parts, 2.0 ** -24)
    assert not wrong.any(), f"elements {np.flatnonzero(wrong)[:10].tolist()} are off"
    if size >= 3:
        forward = np.float32(0) + parts[0]
        for part in parts[1:]:
            forward = forward + part
        backward = np.float32(0) + parts[-1]
        for part in parts[-2::-1]:
            backward = backward + part
        assert not np.array_equal(forward, backward), "the data does not tell orders apart"

    # reduce_scatter: rank r ends with the sum of every rank's block r.
    blocks = [inputs(r, SCATTER, (size, SCATTER_BLOCK), np.float64) for r in range(size)]
    for rank, out in enumerate(outs):
        got = np.frombuffer(bytes.fromhex(out["scatter"]), np.float64)
        parts = [block[rank] for block in blocks]
        assert got.shape == (SCATTER_BLOCK,)
        assert np.all(np.abs(got - exact_sum(parts)) <= sum_bound(parts, 2.0 ** -53)), \
            f"rank {rank}: {got.tolist()} is not the sum of every rank's block {rank}"


@pytest.mark.parametrize("size", [1, 3])
def test_collectives_on_torch_tensors_across_processes(size):
    pytest.importorskip("torch", reason="torch is not installed for this Python")
    results = launch(size, TORCH_SCRIPT)
    outs = []
    for rc, stdout, stderr in results:
        assert rc == 0, stderr
        outs.append(json.loads(stdout))
    total = sum(range(1, size + 1))
    for out in outs:
        assert out["torch_bf16"] == [float(total)] * 7
        assert out["torch_min"] == 0.0
    assert len({out["bf16_digest"] for out in outs}) == 1, "the ranks hold different bits"


def test_a_rank_without_the_secret_is_told_so():
    rc, _, stderr = launch(1, "from primus import comm; comm.connect()",
                           extra={"PRIMUS_JOB_SECRET": ""})[0]
    assert rc != 0 and "PRIMUS_JOB_SECRET is not set" in stderr


def test_the_secret_leaves_the_environment_once_read():
    """connect() takes PRIMUS_JOB_SECRET out of the environment and keeps it in memory, so
    that what the rank starts (DataLoader workers, shells) does not inherit it."""
    script = ("import os, subprocess\n"
              "from primus import comm\n"
              "c = comm.connect()\n"
              "print('still' if 'PRIMUS_JOB_SECRET' in os.environ else 'gone')\n"
              "child = subprocess.run(['sh', '-c', 'echo ${PRIMUS_JOB_SECRET:-unset}'],\n"
              "                       capture_output=True, text=True)\n"
              "print(child.stdout.strip())\n"
              "c2 = comm.connect()\n"  # a second communicator still has it
              "print(c2.size)\n")
    rc, stdout, stderr = launch(1, script)[0]
    assert rc == 0, stderr
    assert stdout.split() == ["gone", "unset", "1"]


def test_a_secret_of_another_form_is_refused_without_being_printed():
    rc, _, stderr = launch(1, "from primus import comm; comm.connect()", secret="py-secret")[0]
    assert rc != 0 and "PRIMUS_JOB_SECRET: expected 64 lowercase hexadecimal digits" in stderr
    assert "py-secret" not in stderr


def test_ranks_of_two_array_tasks_sharing_a_secret_never_join_one_world():
    """sbatch --array makes one secret for all of its tasks, whose steps may meet on a port:
    every handshake covers PRIMUS_JOB_ID (<array job>_<task>), the step and the world size, so a
    rank of task 2 is refused by task 1's store, and neither forms a world."""
    results = launch(2, "from primus import comm; comm.connect()",
                     extra={"PRIMUS_COLL_TIMEOUT": "5"},
                     rank_extra={0: {"PRIMUS_JOB_ID": "41_1"}, 1: {"PRIMUS_JOB_ID": "41_2"}})
    (rc0, _, err0), (rc1, _, err1) = results
    assert rc0 != 0 and rc1 != 0, (err0, err1)
    assert "primus: store: refused a connection from 127.0.0.1" in err0, err0
    assert "belongs to another job, step or world size" in err1, err1
    # The same two ranks with one job id form their world.
    results = launch(2, "from primus import comm; print(comm.connect().size)",
                     extra={"PRIMUS_JOB_ID": "41_1"})
    assert [(rc, out.strip()) for rc, out, _ in results] == [(0, "2"), (0, "2")], results


def test_with_integrity_the_results_are_the_same_bits_and_a_mismatch_is_named():
    """PRIMUS_COLL_INTEGRITY=1 (--primus-coll-integrity) authenticates every message: the
    results are the bits of the plain path; a rank that runs otherwise is refused by name."""
    plain = launch(3, RANK_SCRIPT)
    sealed = launch(3, RANK_SCRIPT, extra={"PRIMUS_COLL_INTEGRITY": "1"})
    for rc, _, stderr in plain + sealed:
        assert rc == 0, stderr
    plain_outs = [json.loads(out) for _, out, _ in plain]
    sealed_outs = [json.loads(out) for _, out, _ in sealed]
    assert [o.pop("integrity") for o in plain_outs] == [False] * 3
    assert [o.pop("integrity") for o in sealed_outs] == [True] * 3
    assert sealed_outs == plain_outs
    results = launch(2, "from primus import comm; comm.connect()",
                     extra={"PRIMUS_COLL_TIMEOUT": "5"},
                     rank_extra={1: {"PRIMUS_COLL_INTEGRITY": "1"}})
    (rc0, _, err0), (rc1, _, err1) = results
    assert rc0 != 0 and rc1 != 0, (err0, err1)
    assert "asks for --primus-coll-integrity, which this rank runs without" in err0, err0
    assert "--primus-coll-integrity" in err1, err1


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


ABORT_SCRIPT = r'''
import json, threading, time
import numpy as np
from primus import comm
c = comm.connect(timeout=60)
x = np.ones(1 << 18, np.float32)
c.allreduce(x)
if c.rank == 2:
    time.sleep(15)  # silent: never joins another collective
    print(json.dumps({"woke": time.time()}), flush=True)
    raise SystemExit(0)
if c.rank == 0:
    threading.Timer(0.3, c.abort, args=("the launcher says rank 2 failed",)).start()
try:
    while True:
        c.allreduce(x)
except comm.PeerFailure as e:
    print(json.dumps({"error": str(e), "peer": e.peer, "aborted": c.aborted,
                      "failed": time.time()}), flush=True)
'''


def test_an_abort_from_another_thread_ends_a_call_that_a_silent_peer_holds():
    """Rank 2 goes silent; rank 0's timer thread aborts while its main thread waits in an
    allreduce (the GIL released): the call raises PeerFailure with the reason, and rank 1 learns
    at once that rank 0 left (and aborts in turn), both far inside the 60 s timeout and before
    rank 2 wakes."""
    results = launch(3, ABORT_SCRIPT)
    assert results[2][0] == 0, results[2]
    out = [json.loads(results[r][1]) for r in (0, 1)]
    woke = json.loads(results[2][1])["woke"]
    assert out[0]["error"] == "rank 0: communicator aborted: the launcher says rank 2 failed"
    assert out[0]["peer"] == -1 and out[0]["aborted"] is True
    # rank 1's communicator aborted itself at the lost peer: the ranks behind it fail next
    assert out[1]["peer"] == 0 and out[1]["aborted"] is True, out[1]
    for r in (0, 1):  # both before the silent rank woke, far inside the 60 s timeout
        assert out[r]["failed"] < woke, (out[r], woke)


P2P_SCRIPT = r'''
import json
import numpy as np
from primus import comm
c = comm.connect(timeout=60)
out = {}
big = np.arange(3 << 20, dtype=np.float32)  # 12 MiB: more than a socket buffer holds
if c.rank == 0:
    c.send(big, 2)
    c.send(np.array([7, 8, 9], np.int64), 2)  # a second message, after the first
    c.send(np.full(4, 5.0), 1)
elif c.rank == 2:
    got = c.recv(np.empty_like(big), 0)
    small = c.recv(np.empty(3, np.int64), 0)
    out = {"big": bool(np.array_equal(got, big)), "small": small.tolist()}
elif c.rank == 1:
    out = {"f64": c.recv(np.empty(4), 0).tolist()}
c.barrier()  # the collectives go on after point-to-point messages
for bad in (c.rank, c.size):
    try:
        c.send(np.zeros(1, np.float32), bad)
    except comm.CollectiveError as e:
        out.setdefault("refused", []).append(str(e))
print(json.dumps(out), flush=True)
'''


def test_point_to_point_messages_arrive_whole_and_in_order():
    """Rank 0 sends 12 MiB then a small array to rank 2 and an array to rank 1, rank 3 takes no
    part; a send to itself or to a rank beyond the world is refused, naming what is wrong."""
    results = launch(4, P2P_SCRIPT)
    outs = []
    for rc, stdout, stderr in results:
        assert rc == 0, stderr
        outs.append(json.loads(stdout))
    assert outs[2]["big"] and outs[2]["small"] == [7, 8, 9]
    assert outs[1]["f64"] == [5.0] * 4
    for out in outs:
        assert len(out["refused"]) == 2, out
        assert "to or from this rank itself" in out["refused"][0]
        assert "expected 0 to 3" in out["refused"][1]
