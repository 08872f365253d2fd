"""The rank side of a stop, with real processes and real PyTorch: primus.init(),
primus.should_stop() and primus.EXIT_PREEMPTED, alone and under primus-launch --nproc 2, where a
job stopped by SIGTERM at a step that is not a checkpoint step saves there, exits 75, and the
same command in the same directory resumes and ends bitwise equal to an uninterrupted run."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHER = os.environ.get("PRIMUS_LAUNCH", os.path.abspath("primus-launch"))


def run_python(code, env=None):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, **(env or {})))


def test_a_stop_signal_only_raises_the_flag_and_a_second_one_does_not_interrupt():
    code = ("import os, signal, primus\n"
            "job = primus.init(torch=False)\n"
            "print(job.world_size, primus.should_stop(), primus.EXIT_PREEMPTED)\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n"
            "print(primus.should_stop())\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n"  # during a save, say: no interruption
            "os.kill(os.getpid(), signal.SIGUSR2)\n"
            "print('alive', primus.init() is job)\n")
    result = run_python(code, {"PRIMUS_EXIT_PREEMPTED": "76"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "False", "76", "True", "alive", "True"]


def test_dataloader_workers_ignore_the_stop_signals_and_the_rank_decides():
    code = ("import os, signal, torch, primus\n"
            "job = primus.init(torch=False)\n"
            "class Data(torch.utils.data.Dataset):\n"
            "    def __len__(self): return 4\n"
            "    def __getitem__(self, i):\n"
            "        ignored = all(signal.getsignal(s) == signal.SIG_IGN\n"
            "                      for s in (signal.SIGTERM, signal.SIGUSR2))\n"
            "        os.kill(os.getpid(), signal.SIGTERM)\n"  # Slurm signals the workers too
            "        return torch.tensor([int(ignored)])\n"
            "loader = torch.utils.data.DataLoader(Data(), num_workers=2,\n"
            "                                     worker_init_fn=primus.worker_init_fn)\n"
            "print(sum(int(b) for b in loader), primus.stop_requested())\n")
    result = run_python(code, {})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["4", "False"], result.stdout + result.stderr


def test_primus_ddp_refuses_a_static_graph_and_is_the_model_in_a_world_of_one():
    code = ("import torch, primus\n"
            "model = torch.nn.Linear(2, 2)\n"
            "print(primus.ddp(model) is model)\n"
            "try:\n"
            "    primus.ddp(model, static_graph=True)\n"
            "except ValueError as e:\n"
            "    print('refused', str(e).split(' lets ')[0])\n"
            "try:\n"
            "    primus.ddp(model, allreduce='gloo')\n"
            "except ValueError as e:\n"
            "    print('refused', e)\n")
    result = run_python(code, {})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "True", "refused primus.ddp: static_graph=True",
        "refused primus.ddp: allreduce: expected 'primus' or 'torch', got 'gloo'"], result.stdout


# Three ranks (not a power of two: primus.comm pairs ranks up first) train a model whose
# gradients fill several DDP buckets (1.3 MB of them; 0.05 MB buckets after DDP's first of 1 MiB),
# and one whose gradients fit one (0.3 MB, 25 MB buckets); each rank prints
# the hash of its gradients after the backward pass, whether they are the mean of every rank's
# own gradients (summed here in float64), how many allreduce calls primus.comm saw during the
# backward passes, and whether primus.ddp's worker thread ran.
_GRAD_SUM_SCRIPT = """import hashlib, os, sys, threading, numpy as np, torch, primus
from primus import comm
job = primus.init()
torch.set_num_threads(1)
calls = [0]
real = comm.Communicator.allreduce
def counted(self, data, op="sum"):
    calls[0] += 1
    return real(self, data, op)
comm.Communicator.allreduce = counted
def model(width):
    torch.manual_seed(5)
    return torch.nn.Sequential(torch.nn.Linear(40, 300), torch.nn.ReLU(), torch.nn.Linear(300, width),
                               torch.nn.ReLU(), torch.nn.Linear(width, 3))
torch.manual_seed(100 + job.rank)
x = torch.randn(7, 40)
c = primus._runtime._communicator()
for width, cap in ((1000, 0.05), (200, 25)):
    local = model(width)
    local(x).square().mean().backward()
    mine = torch.cat([p.grad.flatten() for p in local.parameters()]).double().numpy()
    mean = c.allgather(mine.copy()).reshape(job.world_size, -1).sum(axis=0) / job.world_size
    m = model(width)
    net = primus.ddp(m, allreduce=os.environ["ALLREDUCE"], bucket_cap_mb=cap)
    for step in range(2):  # the first forward pass is rehearsed; the second uses the rebuilt buckets
        m.zero_grad(set_to_none=True)
        before = calls[0]
        net(x).square().mean().backward()
        during = calls[0] - before
    got = torch.cat([p.grad.flatten() for p in m.parameters()])
    print(cap, hashlib.sha256(got.numpy().tobytes()).hexdigest()[:16],
          bool(np.allclose(got.double().numpy(), mean, rtol=1e-5, atol=1e-7)), during,
          any(t.name == "primus-grad-allreduce" for t in threading.enumerate()), flush=True)
"""


@pytest.mark.parametrize("allreduce", ["primus", "torch"])
def test_primus_ddp_sums_cpu_gradients_through_primus_comm_alike_on_every_rank(allreduce):
    """allreduce="primus" (the default): DDP's buckets of a CPU model are summed by primus.comm,
    every bucket in one call, several small buckets through the worker thread in order, the
    gradients the mean of the ranks' own and bitwise the same on every rank; "torch" leaves them
    to gloo (primus.comm sees no call)."""
    pytest.importorskip("torch", reason="torch is not installed for this Python")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        master_port = str(s.getsockname()[1])
    results = plain_ranks(3, _GRAD_SUM_SCRIPT, lambda rank: {"MASTER_PORT": master_port,
                                                             "ALLREDUCE": allreduce})
    lines = []
    for code, out, err in results:
        assert code == 0, err
        lines.append([line.split() for line in out.splitlines()])
    for per_model in zip(*lines):
        assert len({hash_ for _, hash_, *_ in per_model}) == 1, per_model  # the same bits
        for cap, _, mean, during, thread in per_model:
            assert mean == "True", per_model
            if allreduce == "torch":
                assert during == "0", per_model
            elif cap == "25":  # one bucket: summed on the backward pass's thread, one call
                assert during == "1", per_model
            else:  # the middle layer's 1.2 MB closes the first bucket, the first layer's
                assert int(during) >= 2, per_model  # fills another
                assert thread == "True", per_model
    if allreduce == "primus":
        assert [line[4] for line in lines[0]] == ["True", "True"]  # started by the first model


def test_a_rank_lost_during_primus_ddps_allreduce_fails_the_backward_pass_naming_it():
    """The worker's or the inline sum's PeerFailure reaches the backward pass's thread: the
    others' loss.backward() raises, naming the rank that went away, within the timeout."""
    pytest.importorskip("torch", reason="torch is not installed for this Python")
    script = ("import os, torch, primus\n"
              "job = primus.init()\n"
              "torch.set_num_threads(1)\n"
              "net = primus.ddp(torch.nn.Linear(4, 2))\n"
              "net(torch.ones(3, 4)).sum().backward()\n"  # the rehearsed first step
              "if job.rank == 1:\n"
              "    os._exit(0)\n"
              "try:\n"
              "    net(torch.ones(3, 4)).sum().backward()\n"
              "except RuntimeError as e:\n"
              "    from primus import _control\n"
              "    print('failed:', e)\n"
              "    print('peer:', _control.lost_peer_of(e))\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        master_port = str(s.getsockname()[1])
    results = plain_ranks(2, script, lambda rank: {"MASTER_PORT": master_port,
                                                   "PRIMUS_COLL_TIMEOUT": "20"})
    code, out, err = results[0]
    assert code == 0, err
    assert out.startswith("failed:") and "rank 1" in out, out + err
    # What the rank's exception report names as the root cause (issue 39: torch's reducer
    # turns the PeerFailure into a RuntimeError of its own; the launcher parsed no text and
    # blamed the reporting rank).
    assert "peer: 1" in out.splitlines(), out + err


def test_a_peer_failure_names_the_lost_rank_in_its_peer_attribute():
    """primus.comm's PeerFailure carries the rank (`peer`) whose connection went."""
    script = ("import os, numpy as np, primus.comm as comm\n"
              "c = comm.connect(timeout=20)\n"
              "c.allreduce(np.ones(4, dtype=np.float32))\n"
              "if c.rank == 2:\n"
              "    os._exit(0)\n"
              "try:\n"
              "    c.allreduce(np.ones(1 << 16, dtype=np.float32))\n"
              "except comm.PeerFailure as e:\n"
              "    print('peer', e.peer, isinstance(e, comm.CollectiveError))\n")
    results = plain_ranks(3, script, lambda rank: {})
    for rank in (0, 1):
        code, out, err = results[rank]
        assert code == 0, err
        assert out.split()[:1] == ["peer"], out + err
    assert {results[r][1].split()[1] for r in (0, 1)} <= {"1", "2", "0"}
    assert "2" in {results[r][1].split()[1] for r in (0, 1)}, results
    assert all(results[r][1].split()[2] == "True" for r in (0, 1)), results


def test_primus_ddp_rehearses_its_first_step_without_a_trace(tmp_path):
    """primus.ddp runs the first forward and backward pass twice and undoes the first (its
    gradients, the batch norm statistics, the dropout generator's draws). At 2 ranks the
    gradients' layout does not change their sums, so 3 steps of a model with batch norm and
    dropout, with gradients already accumulated before the first step, must end with exactly
    plain DDP's parameters, buffers and gradients; and primus.ddp does not take the per-step
    cost of find_unused_parameters."""
    pytest.importorskip("torch", reason="torch is not installed for this Python")
    script = ("import sys, torch, primus\n"
              "job = primus.init()\n"
              "torch.set_num_threads(1)\n"
              "def run(wrap):\n"
              "    torch.manual_seed(3)\n"
              "    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8),\n"
              "                                torch.nn.ReLU(), torch.nn.Dropout(0.5),\n"
              "                                torch.nn.Linear(8, 3))\n"
              "    net = wrap(model)\n"
              "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
              "    torch.manual_seed(10 + job.rank)\n"
              "    for p in model.parameters():\n"
              "        p.grad = torch.full_like(p, 0.5)\n"
              "    for step in range(3):\n"
              "        x = torch.randn(5, 6)\n"
              "        net(x).square().mean().backward()\n"
              "        opt.step()\n"
              "        opt.zero_grad(set_to_none=step == 0)\n"
              "        net(x).sum().backward()\n"
              "    state = [t.detach().clone() for t in model.state_dict().values()]\n"
              "    grads = [p.grad.clone() for p in model.parameters()]\n"
              "    return state + grads + [torch.rand(4)], getattr(net, 'find_unused_parameters', None)\n"
              "plain, _ = run(torch.nn.parallel.DistributedDataParallel)\n"
              "ours, unused = run(primus.ddp)\n"
              "same = len(plain) == len(ours) and all(torch.equal(a, b) for a, b in zip(plain, ours))\n"
              "print(job.rank, same, unused)\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        master_port = str(s.getsockname()[1])
    results = plain_ranks(2, script, lambda rank: {"PRIMUS_CKPT_DIR": str(tmp_path / "ckpt"),
                                                   "MASTER_PORT": master_port})
    for rank, (code, out, err) in enumerate(results):
        assert code == 0, err
        assert out.split() == [str(rank), "True", "False"], out + err


def test_a_plain_script_is_a_world_of_one_with_primus_local(tmp_path):
    code = "import primus; job = primus.init(torch=False); print(job.job_dir, job.ckpt_dir, job.resume)"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PRIMUS_", "RANK", "WORLD_SIZE"))}
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(tmp_path / "primus-local"),
                                     str(tmp_path / "primus-local" / "ckpt"), "None"]


def launch(workdir, out, stop_at=None, options=(), nproc=2, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["OUT"] = str(out)
    # should_stop() agrees at every step: these runs are a few dozen short steps, which would
    # end before an agreement at the default interval took the stop.
    env["PRIMUS_STOP_INTERVAL"] = "0"
    env.update({k: str(v) for k, v in extra.items()})
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    if stop_at is not None:
        env["STOP_AT"] = str(stop_at)
    return subprocess.run([LAUNCHER, "--nproc", str(nproc), "--label", *options, "--",
                           sys.executable, os.path.join(HERE, "train_tiny.py")],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=300)


def test_a_job_stopped_by_sigterm_resumes_bitwise_equal_under_primus_launch(tmp_path):
    pytest.importorskip("torch", reason="torch is not installed for this Python")
    if not os.access(LAUNCHER, os.X_OK):
        pytest.skip(f"{LAUNCHER} is not built")
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    whole.mkdir()
    stopped.mkdir()
    first = launch(whole, whole / "out.json")
    assert first.returncode == 0, first.stdout + first.stderr

    # SIGTERM at step 13 (checkpoints every 5 steps): the ranks save step 13 and exit 75.
    interrupted = launch(stopped, stopped / "out.json", stop_at=13)
    assert interrupted.returncode == 75, interrupted.stdout + interrupted.stderr
    assert "0: rank 0: stopped at step 13" in interrupted.stdout, interrupted.stdout
    assert "1: rank 1: stopped at step 13" in interrupted.stdout, interrupted.stdout
    assert not (stopped / "out.json").exists()
    events = (stopped / "primus-local" / "events.jsonl").read_text()
    assert '"event": "stop-requested"' in events
    # The launcher says where the job stopped and how to go on (issue 41: it said nothing).
    ckpt = stopped / "primus-local" / "ckpt"
    assert (f"primus-launch: stopped at step 13 ({ckpt}/step-000000000013): the same command "
            "resumes from there\n") in interrupted.stderr, interrupted.stderr

    # A copy whose newest checkpoint is torn (a rank file cut short): the launcher resolves the
    # resume point before starting the ranks, names what it skipped, and every rank resumes
    # from step 10.
    torn = tmp_path / "torn"
    shutil.copytree(stopped, torn, symlinks=True)
    rank_file = torn / "primus-local" / "ckpt" / "step-000000000013" / "rank-00001.h5"
    with open(rank_file, "r+b") as f:
        f.truncate(100)

    # The same command in the same directory resumes there.
    resumed = launch(stopped, stopped / "out.json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "0: rank 0: resumed at step 13" in resumed.stdout, resumed.stdout
    assert "1: rank 1: resumed at step 13" in resumed.stdout, resumed.stdout
    assert f"primus-launch: resuming from step 13 ({ckpt}/step-000000000013)\n" in \
        resumed.stderr, resumed.stderr
    assert (stopped / "primus-local" / "logs" / "alloc-1").is_dir()
    events = [json.loads(line) for line in
              (stopped / "primus-local" / "events.jsonl").read_text().splitlines()]
    resuming = [e for e in events if e["event"] == "resuming"]
    assert [(e["allocation"], e["details"]["step"]) for e in resuming] == [(1, "13")], events
    assert resuming[0]["details"]["checkpoint"].endswith("/ckpt/step-000000000013")

    past_torn = launch(torn, torn / "out.json")
    assert past_torn.returncode == 0, past_torn.stdout + past_torn.stderr
    assert re.search(r"primus-launch: not resuming from \S*/step-000000000013/rank-00001\.h5",
                     past_torn.stderr), past_torn.stderr
    assert "0: rank 0: resumed at step 10" in past_torn.stdout, past_torn.stdout
    assert "1: rank 1: resumed at step 10" in past_torn.stdout, past_torn.stdout

    a = json.loads((whole / "out.json").read_text())
    assert len(a) > 4
    for run in (stopped, torn):
        b = json.loads((run / "out.json").read_text())
        assert a.keys() == b.keys()
        different = [name for name in a if a[name] != b[name]]
        assert not different, f"{run.name}: not bitwise equal after the stop and resume: {different}"


def test_primus_fresh_moves_the_old_checkpoints_aside_once_and_a_restart_resumes(tmp_path):
    """--primus-fresh under primus-launch: the earlier run's checkpoints are kept aside and the
    job starts at step 0; its own restart (after a rank fails) resumes from its own checkpoint,
    not afresh; the next run without the option resumes as usual."""
    pytest.importorskip("torch", reason="torch is not installed for this Python")
    if not os.access(LAUNCHER, os.X_OK):
        pytest.skip(f"{LAUNCHER} is not built")
    first = launch(tmp_path, tmp_path / "first.json", stop_at=6)
    assert first.returncode == 75, first.stdout + first.stderr
    ckpt = tmp_path / "primus-local" / "ckpt"
    fresh = launch(tmp_path, tmp_path / "fresh.json", options=("--primus-fresh",),
                   FAIL_AT=8, FAIL_RANK=1, FAIL_MARKER=tmp_path / "failed-once",
                   PRIMUS_MAX_RESTARTS=1)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    aside = [p for p in (tmp_path / "primus-local").iterdir() if p.name.startswith("ckpt.old-")]
    assert len(aside) == 1 and re.fullmatch(r"ckpt\.old-\d{8}T\d{6}Z", aside[0].name), aside
    assert (aside[0] / "step-000000000006").is_dir()
    # The new run's checkpoints alone in ckpt/: the stop's step 6 is only in the old ones.
    assert list(ckpt.glob("step-*")) and not (ckpt / "step-000000000006").exists()
    assert f"primus-launch: --primus-fresh: moved the earlier checkpoints aside to {aside[0]}" \
        in fresh.stderr, fresh.stderr
    # The first attempt started at step 0; the restart after rank 1 failed at step 8 resumed
    # from the job's own step 5, not afresh.
    assert re.findall(r"0: rank 0: resumed at step \d+", fresh.stdout) == [
        "0: rank 0: resumed at step 5"], fresh.stdout
    assert len(list((tmp_path / "primus-local").glob("ckpt.old-*"))) == 1
    again = launch(tmp_path, tmp_path / "again.json")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "--primus-fresh" not in again.stderr
    assert "primus-launch: resuming from step" in again.stderr, again.stderr


def test_primus_fresh_in_a_plain_script_moves_aside_unless_the_job_was_requeued(tmp_path):
    make_checkpoint(tmp_path / "ckpt", 3)
    script = "import primus\njob = primus.init(torch=False)\nprint(job.resume)\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRIMUS_", "SLURM_", "RANK"))}
    env.update(PRIMUS_CKPT_DIR=str(tmp_path / "ckpt"), PRIMUS_FRESH="1", PRIMUS_RESTART_COUNT="1")
    requeued = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, timeout=120)
    assert requeued.returncode == 0, requeued.stderr
    assert requeued.stdout.strip() == str(tmp_path / "ckpt" / "step-000000000003")
    env["PRIMUS_RESTART_COUNT"] = "0"
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "None", first.stdout
    aside = list(tmp_path.glob("ckpt.old-*"))
    assert len(aside) == 1 and (aside[0] / "step-000000000003").is_dir(), aside
    assert f"primus: --primus-fresh: moved the earlier checkpoints aside to {aside[0]}" in \
        first.stderr, first.stderr


def make_checkpoint(ckpt_dir, step):
    """A committed checkpoint of one tensor, saved by a world of one."""
    code = ("import sys, numpy as np\n"
            "from primus import checkpoint\n"
            "checkpoint.save({'w': np.arange(4.0) + int(sys.argv[1])}, int(sys.argv[1]))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRIMUS_", "RANK", "WORLD"))}
    env["PRIMUS_CKPT_DIR"] = str(ckpt_dir)
    result = subprocess.run([sys.executable, "-c", code, str(step)], capture_output=True,
                            text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr


def plain_ranks(size, script, rank_env):
    """Ranks started by hand with the plugin's variables (as under a plain srun --primus)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(size):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PRIMUS_", "SLURM_", "RANK", "WORLD"))}
        env.update(RANK=str(rank), WORLD_SIZE=str(size), MASTER_ADDR="127.0.0.1",
                   PRIMUS_PORT=str(port), PRIMUS_JOB_SECRET="5e" * 32, PRIMUS_BOOTSTRAP="tcp",
                   PRIMUS_ENV_VERSION="1")
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
        env.update(rank_env(rank))
        procs.append(subprocess.Popen([sys.executable, "-c", script], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return [(p.wait(timeout=120), *p.communicate()) for p in procs]


def test_every_rank_of_a_plain_srun_resumes_from_the_checkpoint_rank_0_found(tmp_path):
    """Without primus-launch, rank 0 resolves the resume point and every rank takes it: here
    ranks 1 and 2 see an empty checkpoint directory (as a stale attribute cache of a shared file
    system would show them), yet start from rank 0's step 7, and load() loads exactly that."""
    seen, empty = tmp_path / "seen", tmp_path / "empty"
    make_checkpoint(seen, 5)
    make_checkpoint(seen, 7)
    empty.mkdir(mode=0o700)
    script = ("import primus\n"
              "from primus import checkpoint\n"
              "job = primus.init(torch=False)\n"
              "restored = checkpoint.load()\n"
              "print(job.rank, job.resume, restored.step, restored.state['w'].tolist())\n")
    results = plain_ranks(3, script, lambda rank: {
        "PRIMUS_CKPT_DIR": str(seen if rank == 0 else empty)})
    want = str(seen / "step-000000000007")
    for rank, (code, out, err) in enumerate(results):
        assert code == 0, err
        assert out.split() == [str(rank), want, "7", "[7.0,", "8.0,", "9.0,", "10.0]"], out + err


def test_a_resume_point_rank_0_cannot_resolve_is_an_error_on_every_rank(tmp_path):
    shared = tmp_path / "shared"
    make_checkpoint(shared, 3)
    shared.chmod(0o777)  # other users could have put anything there
    script = "import primus\nprimus.init(torch=False)\nprint('started')\n"
    results = plain_ranks(2, script, lambda rank: {"PRIMUS_CKPT_DIR": str(shared)})
    for code, out, err in results:
        assert code != 0 and "started" not in out, out + err
        assert "could not tell which checkpoint to resume from" in err, err
        assert "anyone can write it (mode 0777)" in err, err


def test_a_given_primus_resume_is_where_a_job_without_checkpoints_starts(tmp_path):
    other = tmp_path / "other-run"
    make_checkpoint(other, 4)
    own = tmp_path / "own"
    own.mkdir(mode=0o700)
    script = ("import primus\nfrom primus import checkpoint\n"
              "job = primus.init(torch=False)\nprint(job.resume, checkpoint.load().step)\n")
    given = str(other / "step-000000000004")
    results = plain_ranks(2, script, lambda rank: {"PRIMUS_CKPT_DIR": str(own),
                                                   "PRIMUS_RESUME": given})
    for code, out, err in results:
        assert code == 0, err
        assert out.split() == [given, "4"], out + err
    # Once the job has a checkpoint of its own, that one wins.
    make_checkpoint(own, 9)
    results = plain_ranks(2, script, lambda rank: {"PRIMUS_CKPT_DIR": str(own),
                                                   "PRIMUS_RESUME": given})
    for code, out, err in results:
        assert code == 0, err
        assert out.split() == [str(own / "step-000000000009"), "9"], out + err


def test_no_rank_goes_on_from_a_resume_point_that_another_rank_cannot_load(tmp_path):
    """Issue 39: one bit flipped in rank 1's file of the resume point. Rank 1's load raises
    CorruptCheckpoint; before the fix rank 0 loaded its own file and trained on. Now every rank
    learns of it before any trains, and raises."""
    h5py = pytest.importorskip("h5py", reason="h5py is not installed for this Python")
    saved, own = tmp_path / "saved", tmp_path / "own"
    own.mkdir(mode=0o700)
    save = ("import numpy as np, primus\nfrom primus import checkpoint\n"
            "primus.init(torch=False)\ncheckpoint.save({'w': np.arange(4.0)}, 6)\n")
    for code, out, err in plain_ranks(2, save, lambda rank: {"PRIMUS_CKPT_DIR": str(saved)}):
        assert code == 0, err
    step = saved / "step-000000000006"
    victim = step / "rank-00001.h5"
    with h5py.File(victim, "r") as f:
        tree = f["state/primus.tree"].id
        offset = tree.get_offset() + tree.get_storage_size() // 2
    data = bytearray(victim.read_bytes())
    data[offset] ^= 0x10
    victim.write_bytes(bytes(data))
    load = ("import primus\nfrom primus import checkpoint\nprimus.init(torch=False)\n"
            "try:\n    checkpoint.load()\n    print('loaded')\n"
            "except checkpoint.CorruptCheckpoint as error:\n    print('refused:', error)\n")
    results = plain_ranks(2, load, lambda rank: {"PRIMUS_CKPT_DIR": str(own),
                                                 "PRIMUS_RESUME": str(step)})
    for code, out, err in results:
        assert code == 0, err
        assert out.startswith("refused:"), out + err
    assert "another rank could not load it" in results[0][1], results[0][1]
    assert "rank-00001.h5: /state/primus.tree: checksum mismatch" in results[1][1], results[1][1]


def test_a_hung_rank_is_found_through_its_heartbeats_and_named(tmp_path):
    pytest.importorskip("torch", reason="torch is not installed for this Python")
    if not os.access(LAUNCHER, os.X_OK):
        pytest.skip(f"{LAUNCHER} is not built")
    result = launch(tmp_path, tmp_path / "out.json",
                    options=("--primus-hang-timeout=3", "--primus-heartbeat-interval=1"),
                    STEP_SLEEP="0.1", HANG_AT="4", HANG_RANK="1")
    assert result.returncode == 128 + 9, result.stdout + result.stderr
    assert "primus-launch: rank 1 on " in result.stderr and " hung: killed by signal 9" in \
        result.stderr, result.stderr
    assert re.search(r"made no progress for [34] s", result.stderr), result.stderr
    events = [json.loads(line) for line in
              (tmp_path / "primus-local" / "events.jsonl").read_text().splitlines()]
    assert [e["rank"] for e in events if e["event"] == "hang"] == [1], events


def test_primus_ddp_resumes_bitwise_equal_at_four_ranks_where_plain_ddp_does_not(tmp_path):
    """Plain DDP rebuilds its gradient buckets after the first step, so a resumed run's first
    step reduces in another layout; at 4 ranks the sums round differently. primus.ddp does not."""
    pytest.importorskip("torch", reason="torch is not installed for this Python")
    if not os.access(LAUNCHER, os.X_OK):
        pytest.skip(f"{LAUNCHER} is not built")
    final = {}
    for mode in ("plain", "primus"):
        for run, stop_at in (("whole", None), ("stopped", 7)):
            where = tmp_path / f"{mode}-{run}"
            where.mkdir()
            out = where / "out.json"
            if stop_at is not None:
                first = launch(where, out, stop_at=stop_at, nproc=4, DDP=mode)
                assert first.returncode == 75, first.stdout + first.stderr
            result = launch(where, out, nproc=4, DDP=mode)
            assert result.returncode == 0, result.stdout + result.stderr
            final[mode, run] = json.loads(out.read_text())
    assert final["primus", "whole"] == final["primus", "stopped"]
    assert final["plain", "whole"] != final["plain", "stopped"], \
        "plain DDP resumed bitwise equal: this test no longer shows what primus.ddp is for"


def test_an_uncaught_exception_is_reported_with_its_type_message_and_place(tmp_path):
    if not os.access(LAUNCHER, os.X_OK):
        pytest.skip(f"{LAUNCHER} is not built")
    script = tmp_path / "boom.py"
    script.write_text("import primus\n"
                      "job = primus.init(torch=False)\n"
                      "def train():\n"
                      "    if job.rank == 1:\n"
                      "        raise ValueError('the loss is nan')\n"
                      "train()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    result = subprocess.run([LAUNCHER, "--nproc", "2", "--", sys.executable, str(script)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert (f"primus-launch: rank 1 raised ValueError: the loss is nan ({script}:5 in train)"
            in result.stderr), result.stderr
    assert "rank 1 on " in result.stderr and "failed first: exit status 1" in result.stderr


FOLDED_SAVE = """
import json, sys, time
import numpy as np
import primus
from primus import _ckpt, _runtime, checkpoint

job = primus.init(torch=False)
mode = sys.argv[1] if len(sys.argv) > 1 else "{mode}"
real_writer, real_commit = _ckpt.RankWriter, _ckpt.commit


class Writer:  # rank 1 writes slowly; in 'write-fails' rank 2's write fails
    def __init__(self, *args):
        self._writer = real_writer(*args)

    def __getattr__(self, name):
        return getattr(self._writer, name)

    def finish(self):
        if job.rank == 1:
            time.sleep(0.5)
        if mode == "write-fails" and job.rank == 2:
            raise OSError("no space left on the test's device")
        return self._writer.finish()


def failing_commit(*args):
    raise checkpoint.CheckpointError("the test's commit fails")


def no_agreement(ok):
    raise AssertionError("the save agreed on its own")


_ckpt.RankWriter = Writer
if mode == "commit-fails":
    _ckpt.commit = failing_commit
_runtime.agree = no_agreement
pending = checkpoint.save({{"x": np.arange(4) + job.rank}}, 5, blocking=False)
calls, error = 0, None
try:
    while not pending.committed():
        primus.should_stop()
        calls += 1
        if calls > 500:
            break
        time.sleep(0.01)
    # Rank 0 commits right after the agreement that decided it; the next agreement tells every
    # rank that it did (or raises its failure): only then is it visible to every rank.
    primus.should_stop()
    calls += 1
except Exception as e:
    error = f"{{type(e).__name__}}: {{e}}"
print(json.dumps({{"calls": calls, "error": error, "latest": checkpoint.latest_step()}}))
"""


@pytest.mark.parametrize("mode", ["ok", "write-fails", "commit-fails"])
def test_should_stop_commits_an_asynchronous_save_once_every_rank_wrote_it(tmp_path, mode):
    """Three ranks save step 5 asynchronously (rank 1's write takes 0.5 s) and call only
    should_stop() until the save is committed; the save's own agreement is replaced by one that
    fails the test: should_stop()'s all-reduce commits it on every rank at the same call, after
    several calls, and it is visible to every rank after the next call. A failed write (rank 2)
    raises there on every rank and commits nothing; a failed commit (rank 0) raises at the next
    should_stop() on every rank."""
    results = plain_ranks(3, FOLDED_SAVE.format(mode=mode),  # an agreement at every step
                          lambda rank: {"PRIMUS_CKPT_DIR": str(tmp_path / "ckpt"),
                                        "PRIMUS_STOP_INTERVAL": "0"})
    reports = []
    for code, out, err in results:
        assert code == 0, err
        reports.append(json.loads(out.splitlines()[-1]))
    calls = {r["calls"] for r in reports}
    assert len(calls) == 1 and calls.pop() > 2, reports
    errors = [r["error"] for r in reports]
    if mode == "ok":
        assert errors == [None] * 3, reports
        assert [r["latest"] for r in reports] == [5] * 3
    elif mode == "write-fails":
        assert errors[2] == "OSError: no space left on the test's device", reports
        assert all("another rank failed to write its file" in e for e in errors[:2]), reports
        assert [r["latest"] for r in reports] == [None] * 3
    else:
        assert errors[0] == "CheckpointError: the test's commit fails", reports
        assert all(e == "CheckpointError: rank 0 could not commit the last checkpoint; see "
                   "its error" for e in errors[1:]), reports
        assert [r["latest"] for r in reports] == [None] * 3


EVERY_FEW_STEPS = """
import json, os, signal, time
import torch
import primus
from primus import _ckpt, _runtime, checkpoint

job = primus.init()
comm = _runtime._communicator()
real_allreduce, own_allreduces = comm.allreduce, []


def counting_allreduce(*args, **kwargs):
    own_allreduces.append(1)
    return real_allreduce(*args, **kwargs)


comm.allreduce = counting_allreduce
real_writer = _ckpt.RankWriter


class Writer:  # rank 1 writes slowly
    def __init__(self, *args):
        self._writer = real_writer(*args)

    def __getattr__(self, name):
        return getattr(self._writer, name)

    def finish(self):
        if job.rank == 1:
            time.sleep(0.3)
        return self._writer.finish()


_ckpt.RankWriter = Writer
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
net = primus.ddp(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(6, 4, generator=torch.Generator().manual_seed(job.rank))
y = torch.tensor([0, 1, 0, 1, 0, 1])
pending, committed, stopped_at = None, {{}}, None
in_flight, free = [], []  # the all-reduces of each call with a save in flight, and without
for step in range(1, 200):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(x), y)
    if step == 120 and job.rank == 2:
        os.kill(os.getpid(), signal.SIGTERM)  # this rank alone: the others hear it agreeing
    loss.backward()
    optimizer.step()
    time.sleep(0.01)
    if step in (3, 60):
        pending, saved = checkpoint.save({{"model": model.state_dict()}}, step,
                                         blocking=False), step
    awaiting, before = checkpoint._awaits_agreement(), len(own_allreduces)
    stop = primus.should_stop()
    (in_flight if awaiting else free).append(len(own_allreduces) - before)
    if pending is not None and pending.committed():
        committed[saved], pending = step, None
    if stop:
        stopped_at = step
        break
print(json.dumps({{"stopped_at": stopped_at, "own_allreduces": len(own_allreduces),
                  "in_flight": in_flight, "free": free, "signalled": primus.stop_requested(),
                  "committed": committed, "latest": checkpoint.latest_step(),
                  "model_keys": sorted(model.state_dict()), "ddp_keys": sorted(net.state_dict())}}))
"""


@pytest.mark.parametrize("interval", ["0", "0.1"])
def test_should_stop_agrees_every_few_steps_and_every_rank_stops_and_commits_alike(tmp_path,
                                                                                   interval):
    """Three ranks train under primus.ddp, a step taking at least 10 ms, and call should_stop()
    after every step; rank 2 alone receives SIGTERM in step 120, and saves of steps 3 and 60
    are committed by should_stop() (rank 1 writes each for 0.3 s longer). With
    PRIMUS_STOP_INTERVAL=0 the ranks agree at every step and stop after step 120. With 0.1 s
    they agree about every 10 steps, each agreement fixing how many steps come before the next
    (at most 0.1 s of 10 ms steps: 10), except while a save is in flight, when they agree at
    every step: far fewer all-reduces, yet every rank stops after the same step, at most 9
    steps after the signal, and commits each save at the same step, once rank 1 has finished
    writing it. Nothing of the agreement is in the model's or the DDP module's state."""
    pytest.importorskip("torch", reason="torch is not installed for this Python")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = plain_ranks(3, EVERY_FEW_STEPS.format(), lambda rank: {
        "PRIMUS_CKPT_DIR": str(tmp_path / "ckpt"), "MASTER_PORT": str(port),
        "PRIMUS_STOP_INTERVAL": interval})
    reports = []
    for code, out, err in results:
        assert code == 0, err
        reports.append(json.loads(out.splitlines()[-1]))
    stopped_at = reports[0]["stopped_at"]
    assert [r["stopped_at"] for r in reports] == [stopped_at] * 3, reports
    assert [r["signalled"] for r in reports] == [False, False, True], reports
    allreduces = reports[0]["own_allreduces"]
    assert [r["own_allreduces"] for r in reports] == [allreduces] * 3, reports
    assert all(r["in_flight"] == reports[0]["in_flight"] and r["free"] == reports[0]["free"]
               for r in reports), reports
    in_flight, free = reports[0]["in_flight"], reports[0]["free"]
    assert len(in_flight) > 30 and set(in_flight) == {1}, reports  # 0.3 s of writing, twice
    # The others are primus.ddp's gradient sums: one a step, and the rehearsed first step's.
    agreements = sum(in_flight) + sum(free)
    assert allreduces - agreements == stopped_at + 1, reports
    if interval == "0":
        assert stopped_at == 120 and agreements == 120, reports
    else:
        assert 120 <= stopped_at <= 129, reports
        assert set(free) == {0, 1} and len(free) / 20 < sum(free) < len(free) / 3, reports
    committed = reports[0]["committed"]
    assert all(r["committed"] == committed for r in reports), reports
    # 0.3 s of rank 1's writing is many 10 ms steps.
    assert committed.keys() == {"3", "60"} and 8 < committed["3"] < 60 and \
        65 < committed["60"] < 120, reports
    assert [r["latest"] for r in reports] == [60] * 3, reports
    keys = reports[0]["model_keys"]
    assert keys == ["0.bias", "0.weight", "2.bias", "2.weight"], keys
    assert reports[0]["ddp_keys"] == [f"module.{k}" for k in keys], reports[0]


def test_the_steps_between_agreements_fill_the_interval_within_bounds(monkeypatch):
    """primus/_agreement.py: a rank proposes the steps that fill PRIMUS_STOP_INTERVAL at the
    pace of its last steps, between 1 and MAX_STEPS; a bad interval is an error naming it."""
    from primus import _agreement

    propose = _agreement.steps_to_propose
    assert propose(0.5, None, 0) == 1  # no agreement yet
    assert propose(0.5, 0.25, 5) == 10  # 50 ms steps
    assert propose(0.5, 0.3, 1) == 1  # steps slower than the interval
    assert propose(0.0, 0.001, 10) == 1  # 0: at every step
    assert propose(0.5, 0.001, 10) == _agreement.MAX_STEPS  # 100 us steps: capped
    monkeypatch.delenv("PRIMUS_STOP_INTERVAL", raising=False)
    assert _agreement.interval_seconds() == 0.5
    monkeypatch.setenv("PRIMUS_STOP_INTERVAL", "0.05")
    assert _agreement.interval_seconds() == 0.05
    for bad in ("-1", "soon", "nan", "1e9"):
        monkeypatch.setenv("PRIMUS_STOP_INTERVAL", bad)
        with pytest.raises(ValueError, match="PRIMUS_STOP_INTERVAL: expected seconds"):
            _agreement.interval_seconds()
