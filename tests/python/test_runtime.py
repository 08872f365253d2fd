"""The rank side of a stop, with real processes and real PyTorch: primus.init(),
primus.should_stop() and primus.EXIT_PREEMPTED, alone and under primus-launch --nproc 2, where a
job stopped by SIGTERM at a step that is not a checkpoint step saves there, exits 75, and the
same command in the same directory resumes and ends bitwise equal to an uninterrupted run."""

import json
import os
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


def launch(workdir, out, stop_at=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["OUT"] = str(out)
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    if stop_at is not None:
        env["STOP_AT"] = str(stop_at)
    return subprocess.run([LAUNCHER, "--nproc", "2", "--label", "--",
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

    # The same command in the same directory resumes there.
    resumed = launch(stopped, stopped / "out.json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "rank 0: resumed at step 13" in resumed.stdout, resumed.stdout
    assert (stopped / "primus-local" / "logs" / "alloc-1").is_dir()
    a = json.loads((whole / "out.json").read_text())
    b = json.loads((stopped / "out.json").read_text())
    assert a.keys() == b.keys() and len(a) > 4
    different = [name for name in a if a[name] != b[name]]
    assert not different, f"not bitwise equal after the stop and resume: {different}"
