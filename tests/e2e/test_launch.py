"""primus-launch under Slurm on the testbed, with real PyTorch: an sbatch job of 4 nodes x 2
ranks runs tests/python/train_tiny.py (dropout, Adam, a schedule, an RNG-driven data order, a
checkpoint every 5 steps) as one srun step of task wrappers, supervised over the control
channel. Each scenario interrupts it differently (a rank that fails, a rank that hangs, a
preemption, primus-launch stop) and the run must end with the bits of the uninterrupted one;
no process of a job may be left on any node once it has ended."""

import json
import os
import re
import time
from pathlib import Path

import pytest

from slurm_jobs import INIT, Launch, job_processes, start_again


@pytest.fixture(scope="module")
def reference(testbed, prefix):
    """The uninterrupted run: 4 nodes x 2 ranks, to the end."""
    run = Launch(testbed, prefix, "reference")
    run.submit()
    assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    return run


def test_sbatch_runs_eight_ranks_on_four_nodes_as_one_step(reference):
    run = reference
    assert run.exit_code() == "0:0"
    out = run.output()
    assert sorted(set(re.findall(r"rank (\d): finished at step 12", out))) == \
        [str(r) for r in range(8)], out[-4000:]
    events = run.events()
    assert run.milestones() == ["launched", "finished"], events
    # Once every rank returned from primus.init(): one ranks-ready, with the seconds it took.
    ready = [e for e in events if e["event"] == "ranks-ready"]
    assert len(ready) == 1 and float(ready[0]["details"]["seconds"]) > 0, events
    assert [e["details"]["step"] for e in events if e["event"] == "checkpoint-committed"] == \
        ["5", "10"], events
    assert events[0]["details"]["mode"] == "slurm" and events[0]["details"]["ranks"] == "8"
    logs = run.dir / f"primus-{run.job}" / "logs" / "alloc-0" / "attempt-0"
    assert sorted(p.name for p in logs.iterdir()) == [f"rank-{r}.log" for r in range(8)]
    assert "finished at step 12" in (logs / "rank-5.log").read_text()
    status = json.loads((run.dir / f"primus-{run.job}" / "status.json").read_text())
    assert status["state"] == "finished" and len(status["ranks"]) == 8, status
    assert {r["node"] for r in status["ranks"]} == {"n1", "n2", "n3", "n4"}, status
    assert all(r["ended"] == "exit status 0" for r in status["ranks"]), status


def test_a_rank_that_fails_once_restarts_in_the_allocation_and_ends_bitwise_equal(
        testbed, prefix, reference):
    run = Launch(testbed, prefix, "fail-restart")
    run.submit(launch="--primus-max-restarts=1",
               env=f"FAIL_AT=7 FAIL_RANK=3 FAIL_MARKER={run.dir}/failed")
    assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    assert run.exit_code() == "0:0"
    assert run.final() == reference.final()
    assert run.milestones() == ["launched", "rank-failed", "restarted", "resuming", "finished"], \
        run.events()
    resuming = [e for e in run.events() if e["event"] == "resuming"][0]
    assert (resuming["attempt"], resuming["details"]["step"]) == (1, "5"), resuming
    failed = [e for e in run.events() if e["event"] == "rank-failed"][0]
    assert failed["rank"] == 3 and failed["node"] == "n2", failed
    out = run.output()
    assert "rank 3 on n2 failed first: exit status 3 (attempt 0)" in out, out[-4000:]
    assert "rank 0: resumed at step 5" in out, out[-4000:]


def test_a_rank_that_fails_without_restarts_ends_the_job_with_its_status(testbed, prefix):
    run = Launch(testbed, prefix, "fail")
    run.submit(env="FAIL_AT=3 FAIL_RANK=6", exec_="")
    assert run.wait_ended() == "FAILED", run.output()[-4000:]
    assert run.exit_code() == "3:0"
    out = run.output()
    assert "primus-launch: rank 6 on n4 failed first: exit status 3 (attempt 0)" in out, out[-4000:]
    assert "  | rank 6: failing at step 3" in out, out[-4000:]
    assert "note: the batch script runs primus-launch without exec" in out, out[-4000:]
    assert run.milestones() == ["launched", "rank-failed", "failed"], run.events()


def test_a_hung_rank_ends_the_attempt_and_is_named(testbed, prefix):
    run = Launch(testbed, prefix, "hang")
    run.submit(launch="--primus-hang-timeout=10 --primus-heartbeat-interval=1",
               env="STEP_SLEEP=0.5 HANG_AT=4 HANG_RANK=2")
    run.wait_step(4)
    hung_at = time.monotonic()
    state = run.wait_ended()
    assert time.monotonic() - hung_at < 30, "the attempt took too long to end"
    assert state == "FAILED", run.output()[-4000:]
    out = run.output()
    assert re.search(r"primus-launch: rank 2 on n2 made no progress for 1\d s", out), out[-4000:]
    assert "primus-launch: rank 2 on n2 hung" in out, out[-4000:]
    hang = [e for e in run.events() if e["event"] == "hang"]
    assert len(hang) == 1 and hang[0]["rank"] == 2, run.events()


@pytest.mark.parametrize("signal", ["", "--signal=USR2@5", "--signal=B:USR2@5"],
                         ids=["sigterm", "user-signal", "batch-shell-signal"])
def test_a_preempted_job_saves_is_requeued_once_and_ends_bitwise_equal(
        testbed, prefix, reference, signal):
    """Without --signal the ranks get SIGTERM; with it (the testbed sets preempt_send_user_signal)
    USR2 first, to the ranks, or with B: to the batch shell alone, which is primus-launch (exec)
    and forwards it."""
    run = Launch(testbed, prefix, "preempt" + signal.replace("=", "-").replace(":", "").replace("@", "-"))
    run.submit(sbatch=f"-p low --requeue {signal}", env="STEP_SLEEP=1")
    high = None
    try:
        run.wait_step(3)
        high = testbed.sbatch("-p", "high", "-N4", "--exclusive", "-o", "/dev/null",
                              "--wrap", "sleep 1")
        testbed.wait_for(lambda: testbed.job(run.job).get("Restarts") == "1"
                         and testbed.job(run.job).get("JobState") == "PENDING", 120,
                         lambda: f"job {run.job} to be requeued: {testbed.job(run.job)}")
        testbed.wait_ended([high], 120)
        start_again(testbed, run)
        assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(high)
    assert testbed.job(run.job).get("Restarts") == "1"
    assert run.final() == reference.final()
    names = [e["event"] for e in run.events()]
    assert names.count("requeued") == 1 and "preempted" in names, run.events()
    assert names[-1] == "finished" and run.events()[-1]["allocation"] == 1, run.events()
    out = run.output()
    assert re.search(r"rank 0: stopped at step \d+", out), out[-4000:]
    assert re.search(r"rank 0: resumed at step \d+", out), out[-4000:]
    # Every rank of the new allocation starts from the checkpoint of the stop step, which the
    # launcher resolved before starting them.
    stopped_at = re.search(r"rank 0: stopped at step (\d+)", out).group(1)
    resuming = [e for e in run.events() if e["event"] == "resuming"]
    assert [(e["allocation"], e["details"]["step"]) for e in resuming] == [(1, stopped_at)], \
        run.events()
    for rank in range(8):
        assert f"rank {rank}: resumed at step {stopped_at}" in out, out[-4000:]
    stops = [e for e in run.events() if e["event"] == "stop-requested"]
    assert len(stops) == 1, run.events()
    expected = {"": "SIGTERM to the ranks", "--signal=USR2@5": "SIGUSR2 to the ranks",
                "--signal=B:USR2@5": "SIGUSR2 to primus-launch"}[signal]
    assert stops[0]["details"]["source"] == expected, stops


def test_a_warning_signal_to_the_batch_shell_is_forwarded_and_the_job_requeued(
        testbed, prefix, reference):
    """--signal=B:USR2@T as the time limit nears: the signal reaches the batch shell only, which
    is primus-launch (exec); it forwards the signal to the step, the ranks save and exit 75, and
    it requeues the job (not preempted: the time-limit rule, below the cap)."""
    run = Launch(testbed, prefix, "batch-signal")
    run.submit(sbatch="--requeue", env="STEP_SLEEP=1")
    run.wait_step(3)
    assert "note: the batch script runs primus-launch without exec" not in run.output()
    testbed.root_cmd(["scancel", "--batch", "--signal=USR2", run.job])
    testbed.wait_for(lambda: testbed.job(run.job).get("Restarts") == "1"
                     and testbed.job(run.job).get("JobState") == "PENDING", 120,
                     lambda: f"job {run.job} to be requeued: {testbed.job(run.job)}")
    start_again(testbed, run)
    assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    assert run.final() == reference.final()
    stops = [e for e in run.events() if e["event"] == "stop-requested"]
    assert stops and stops[0]["details"] == {"source": "SIGUSR2 to primus-launch",
                                             "forwarded": "SIGUSR2"}, run.events()
    names = run.milestones()
    assert "time-limit" in names and names.count("requeued") == 1, run.events()


def test_an_array_task_is_requeued_as_itself_and_ends_bitwise_equal(testbed, prefix, reference):
    """In an array the launcher requeues <array job>_<task>: `scontrol requeue` of the array
    job's id would requeue every task of the array. The time-limit rule, as with B: above."""
    run = Launch(testbed, prefix, "array")
    run.submit(sbatch="--requeue --array=3", env="STEP_SLEEP=1")
    run.primus_id = f"{run.job}_3"
    task = run.primus_id
    run.wait_step(3)
    testbed.root_cmd(["scancel", "--batch", "--signal=USR2", task])
    testbed.wait_for(lambda: testbed.job(task).get("Restarts") == "1"
                     and testbed.job(task).get("JobState") == "PENDING", 120,
                     lambda: f"array task {task} to be requeued: {testbed.job(task)}")
    assert testbed.job(task).get("ArrayTaskId") == "3", testbed.job(task)
    start_again(testbed, run)
    assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    assert run.final() == reference.final()
    assert [e["details"]["job"] for e in run.events() if e["event"] == "requeued"] == [task], \
        run.events()
    assert run.events()[-1]["event"] == "finished" and run.events()[-1]["allocation"] == 1


def test_under_salloc_the_ranks_take_the_jobs_layout_from_the_shell_or_an_overlapping_step(
        testbed, prefix):
    """primus-launch in the salloc shell, and as the one task of `srun --overlap -N1 -n1` (so that
    it runs on a node of the allocation): both start the job's 3 ranks on its 2 nodes. The step's
    own variables say one task; left to srun, the ranks' step was one task (seen here)."""
    work = testbed.workdir / "salloc"
    work.mkdir()
    script = work / "run.sh"
    rank = "echo rank=$RANK world=$WORLD_SIZE node=$SLURMD_NODENAME"
    script.write_text(
        "#!/bin/bash\n"
        f". {INIT}; module use {prefix}/share/modulefiles; module load primus\n"
        f"primus-launch --primus-job-dir={work}/shell -- bash -c '{rank} shell'\n"
        "echo shell-exit=$?\n"
        # Once recorded, the Comment is not asked again by a later launch in the same job: an
        # scontrol first on PATH that logs each call, then runs the real one.
        f"mkdir -p {work}/bin; printf '#!/bin/sh\\necho \"$*\" >> {work}/scontrol.log\\n"
        f"exec /usr/bin/scontrol \"$@\"\\n' > {work}/bin/scontrol; chmod +x {work}/bin/scontrol\n"
        f"PATH={work}/bin:$PATH primus-launch --primus-job-dir={work}/shell -- true\n"
        "echo again-exit=$?\n"
        f"srun --overlap -N1 -n1 primus-launch --primus-job-dir={work}/step -- bash -c '{rank} step'\n"
        "echo step-exit=$?\n"
        "echo job=$SLURM_JOB_ID\n")
    os.chmod(script, 0o755)
    if testbed.as_root:
        for path in (work, script):
            os.chown(path, testbed.uid, testbed.gid)
    res = testbed.user_cmd(["salloc", "-N2", "-n3", "--primus", str(script)], timeout=120,
                           cwd=work)
    out = res.stdout
    for where in ("shell", "step"):
        assert f"{where}-exit=0" in out, out + res.stderr
        got = sorted(re.findall(rf"rank=(\d) world=(\d) node=(n\d) {where}", out))
        assert got == [("0", "3", "n1"), ("1", "3", "n1"), ("2", "3", "n2")], out
    # The first launcher recorded its job directory, not the default one, in the job's Comment
    # (once its ranks had started), so that `primus-launch status JOBID` finds it from anywhere.
    job = re.search(r"job=(\d+)", out).group(1)
    assert testbed.job(job).get("Comment") == f"primus-job-dir={work}/shell", testbed.job(job)
    assert (work / "shell" / "comment-recorded").read_text().strip() == job
    assert "again-exit=0" in out, out + res.stderr
    calls = (work / "scontrol.log").read_text() if (work / "scontrol.log").exists() else ""
    assert "show job" not in calls and "update" not in calls, calls
    res = testbed.user_cmd([f"{prefix}/bin/primus-launch", "status", "--json", job],
                           cwd=testbed.workdir)
    status = json.loads(res.stdout)
    assert status["state"] == "finished" and status["world_size"] == 3, status


def test_under_salloc_a_launcher_killed_with_sigkill_leaves_no_rank_running(testbed, prefix):
    """Not exec'd, the launcher of a salloc shell can die alone: srun dies with it
    (PR_SET_PDEATHSIG) and Slurm then ends the step, so no rank keeps the allocation busy."""
    work = testbed.workdir / "salloc-kill"
    work.mkdir()
    script = work / "run.sh"
    script.write_text(
        "#!/bin/bash\n"
        f". {INIT}; module use {prefix}/share/modulefiles; module load primus\n"
        f"primus-launch --primus-job-dir={work}/j -- bash -c 'sleep 297; true' &\n"
        "launcher=$!\n"
        "ranks() { pgrep -u \"$(id -u)\" -x sleep -a | grep -c 'sleep 297'; }\n"
        "for i in $(seq 100); do [ \"$(ranks)\" -ge 4 ] && break; sleep 0.2; done\n"
        "echo before=$(ranks)\n"
        "kill -9 $launcher\n"
        "for i in $(seq 100); do [ \"$(ranks)\" -eq 0 ] && break; sleep 0.2; done\n"
        "echo after=$(ranks)\n")
    os.chmod(script, 0o755)
    if testbed.as_root:
        for path in (work, script):
            os.chown(path, testbed.uid, testbed.gid)
    res = testbed.user_cmd(["salloc", "-N2", "--ntasks-per-node=2", "--primus", str(script)],
                           timeout=120, cwd=work, check=False)
    assert "before=4" in res.stdout and "after=0" in res.stdout, res.stdout + res.stderr


def test_primus_launch_stop_checkpoints_and_is_not_requeued(testbed, prefix):
    run = Launch(testbed, prefix, "stop")
    run.submit(sbatch="--requeue", launch="--primus-heartbeat-interval=1", env="STEP_SLEEP=1")
    run.wait_step(3)
    time.sleep(2.5)  # a heartbeat, and status.json rewritten since
    module = f". {INIT}; module use {prefix}/share/modulefiles; module load primus; "
    res = testbed.user_cmd(["bash", "-c", module + f"primus-launch status {run.job}"],
                           cwd=run.dir)
    # The ranks' table: the lines that start with a rank number (the nodes' table follows).
    rows = [words for words in map(str.split, res.stdout.splitlines())
            if words and words[0].isdigit()]
    assert len(rows) == 8 and all(row[2] == "running" for row in rows), res.stdout + res.stderr
    assert int(rows[0][3]) >= 3, res.stdout
    res = testbed.user_cmd(["bash", "-c", module + f"primus-launch stop {run.job}"], cwd=run.dir)
    assert "asked the job" in res.stdout, res.stdout + res.stderr
    assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    assert run.exit_code() == "0:0"
    assert testbed.job(run.job).get("Restarts") == "0"
    stopped = re.findall(r"rank 0: stopped at step (\d+)", run.output())
    assert stopped, run.output()[-4000:]
    ckpt = run.dir / f"primus-{run.job}" / "ckpt" / f"step-{int(stopped[0]):012d}"
    assert (ckpt / "manifest.json").exists(), list(ckpt.parent.iterdir())
    names = [e["event"] for e in run.events()]
    assert "stop-requested" in names and "requeued" not in names, run.events()
    # Where it stopped and how to go on, from the launcher (issue 41).
    assert (f"primus-launch: stopped at step {int(stopped[0])} ({ckpt}) as asked (primus-launch "
            "stop); the job is not requeued: submitting it again resumes from there") in \
        run.output(), run.output()[-4000:]


def test_nothing_of_the_job_outlives_a_launcher_killed_with_sigkill(testbed, prefix):
    run = Launch(testbed, prefix, "orphans")
    run.submit(env="STEP_SLEEP=1 CHILD=1")
    run.wait_step(2)
    sleepers = [p for p in job_processes(run.job) if p.endswith(" sleep")]
    assert len(sleepers) == 8, job_processes(run.job)
    launchers = []
    for pid in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if (cmd[0].endswith(b"primus-launch")
                and f"SLURM_JOB_ID={run.job}".encode() in env):
            launchers.append(int(pid))
    assert len(launchers) == 1, launchers
    os.kill(launchers[0], 9)
    run.wait_ended(timeout=60)  # and no process of the job is left on any node


def test_a_cancelled_job_is_never_requeued(testbed, prefix):
    run = Launch(testbed, prefix, "cancel")
    run.submit(sbatch="--requeue", env="STEP_SLEEP=1")
    run.wait_step(2)
    testbed.cancel(run.job)
    assert run.wait_ended(timeout=60) == "CANCELLED"
    time.sleep(2)
    assert testbed.job(run.job).get("Restarts") == "0", testbed.job(run.job)
    assert "requeued" not in run.milestones(), run.events()
