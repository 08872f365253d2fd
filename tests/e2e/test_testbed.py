"""The Slurm testbed itself: what the Primus end-to-end tests rely on."""

import os
import re

NODES = {"n1", "n2", "n3", "n4"}
PORT_LO, PORT_HI = 12000, 12999


def lines(out, fields):
    """Split task output into rows of exactly `fields` words."""
    rows = [ln.split() for ln in out.splitlines() if ln.strip()]
    for r in rows:
        assert len(r) == fields, f"unexpected task output line {r!r} in:\n{out}"
    return rows


def parse_ports(value):
    """'12001-12003' or '12001,12005-12006' -> set of ints."""
    ports = set()
    for part in value.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        assert m, f"bad SLURM_STEP_RESV_PORTS {value!r}"
        lo = int(m.group(1))
        hi = int(m.group(2) or lo)
        assert lo <= hi, value
        ports.update(range(lo, hi + 1))
    return ports


def test_status_and_env(e2e):
    res = e2e.run([e2e.script, "status"], timeout=30, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    for name in ("munged", "slurmctld", "slurmd-n1", "slurmd-n4"):
        assert re.search(rf"{name}\s+running", res.stdout), res.stdout
    env = e2e.parse_env_lines(e2e.run([e2e.script, "env"], timeout=10).stdout)
    assert env.get("SLURM_CONF", "").endswith("/slurm.conf"), env
    assert env["SLURM_CONF"].startswith(env["PRIMUS_TESTBED_DIR"]), env
    # Slurm read the testbed's mpi.conf: no PMIx direct connections (docs/testbed.md).
    config = e2e.run(["scontrol", "show", "config"], timeout=30,
                     env=dict(os.environ, SLURM_CONF=env["SLURM_CONF"])).stdout
    assert re.search(r"(?m)^PMIxDirectConn\s+= no$", config), config


def test_eight_tasks_on_four_nodes_as_unprivileged_user(testbed):
    out = testbed.srun("-N4", "-n8", "sh", "-c", 'echo "$SLURM_PROCID $SLURMD_NODENAME $(id -u)"')
    rows = lines(out, 3)
    assert sorted(int(r[0]) for r in rows) == list(range(8)), out
    assert {r[1] for r in rows} == NODES, out
    uids = {int(r[2]) for r in rows}
    assert 0 not in uids, f"tasks ran as root: {out}"
    assert uids == {testbed.uid}, out


def test_pmix_ranks_and_namespace(testbed):
    for nodes, tasks in ((2, 4), (4, 8)):
        out = testbed.srun(
            "--mpi=pmix", f"-N{nodes}", f"-n{tasks}", "sh", "-c",
            'echo "$SLURM_PROCID ${PMIX_RANK:-unset} ${PMIX_NAMESPACE:-unset} $SLURMD_NODENAME"',
        )
        rows = lines(out, 4)
        assert len(rows) == tasks, out
        for procid, rank, _, _ in rows:
            assert rank == procid, f"PMIX_RANK != SLURM_PROCID:\n{out}"
        assert sorted(int(r[0]) for r in rows) == list(range(tasks)), out
        namespaces = {r[2] for r in rows}
        assert len(namespaces) == 1 and "unset" not in namespaces, out
        assert len({r[3] for r in rows}) == nodes, out


def step_ports(testbed, *srun_args):
    out = testbed.srun(*srun_args, "sh", "-c", 'echo "$SLURMD_NODENAME ${SLURM_STEP_RESV_PORTS:-unset}"')
    rows = lines(out, 2)
    values = {r[1] for r in rows}
    assert len(values) == 1, f"SLURM_STEP_RESV_PORTS differs between tasks:\n{out}"
    value = values.pop()
    assert value != "unset", f"SLURM_STEP_RESV_PORTS not set:\n{out}"
    ports = parse_ports(value)
    assert all(PORT_LO <= p <= PORT_HI for p in ports), value
    return {r[0] for r in rows}, value, ports


def test_reserved_ports(testbed):
    nodes, v1, p1 = step_ports(testbed, "-N4", "-n8")
    assert nodes == NODES
    # One port per task on the busiest node, plus one.
    _, v2, p2 = step_ports(testbed, "-N4", "--ntasks-per-node=2")
    assert len(p2) == 3, f"--ntasks-per-node=2 reserved {v2}, expected 3 ports"
    assert v1 != v2 and not (p1 & p2), f"consecutive steps share ports: {v1} / {v2}"


def test_reserved_ports_steps_of_one_job(testbed):
    script = testbed.write_script(
        "ports.sh",
        "#!/bin/sh\n"
        "for s in 1 2; do\n"
        "  srun -N2 --ntasks-per-node=1 sh -c 'echo \"$SLURM_STEP_ID $SLURMD_NODENAME ${SLURM_STEP_RESV_PORTS:-unset}\"'\n"
        "done\n",
    )
    jobid = testbed.sbatch("--wait", "-N2", "-n2", "-o", "ports.out", str(script))
    out = testbed.read("ports.out")
    rows = lines(out, 3)
    by_step = {}
    for step, node, value in rows:
        by_step.setdefault(step, set()).add(value)
    assert len(by_step) == 2, f"job {jobid}: expected two steps:\n{out}"
    values = []
    for step, vals in by_step.items():
        assert len(vals) == 1, f"step {step}: ports differ between nodes:\n{out}"
        values.append(vals.pop())
        assert values[-1] != "unset", f"step {step}: SLURM_STEP_RESV_PORTS not set:\n{out}"
    assert not (parse_ports(values[0]) & parse_ports(values[1])), out


def test_fake_gpus(testbed):
    out = testbed.srun(
        "-N2", "--ntasks-per-node=2", "--gpus-per-node=4", "sh", "-c",
        'echo "$SLURMD_NODENAME ${CUDA_VISIBLE_DEVICES:-unset}"',
    )
    rows = lines(out, 2)
    assert len(rows) == 4, out
    assert all(r[1] == "0,1,2,3" for r in rows), out
    out = testbed.srun(
        "-N1", "-n2", "--gpus-per-task=2", "sh", "-c",
        'echo "$SLURM_PROCID ${CUDA_VISIBLE_DEVICES:-unset}"',
    )
    got = {int(r[0]): r[1] for r in lines(out, 2)}
    assert got == {0: "0,1", 1: "2,3"}, out


# Deadlines are hang guards for a loaded 2-core machine (each wait polls for its state).
# The low job prints its restart count from a step, then sleeps in the batch
# shell. At preemption Slurm signals the job's steps, not the batch shell, so
# the job lives through GraceTime (10 s) and is then requeued. (A job that
# ends by itself within the grace time is COMPLETED, not requeued.)
LOW_JOB = """#!/bin/sh
srun -n1 sh -c 'echo "RESTART=${SLURM_RESTART_COUNT:-0} JOB=$SLURM_JOB_ID"'
sleep 300
"""

HIGH_JOB = """#!/bin/sh
srun --ntasks-per-node=1 sh -c 'echo "HIGH $SLURMD_NODENAME"'
sleep 1
"""


def test_preemption_requeues_low_job(testbed):
    low_script = testbed.write_script("low.sh", LOW_JOB)
    high_script = testbed.write_script("high.sh", HIGH_JOB)
    low = high = None
    try:
        low = testbed.sbatch(
            "-p", "low", "--requeue", "-N1", "-n1", "--open-mode=append",
            "-o", "low.out", "-J", "e2e-low", str(low_script),
        )
        testbed.wait_for(
            lambda: "RESTART=0" in testbed.read("low.out"), 120,
            lambda: f"low job {low} to run and print RESTART=0: {testbed.job(low)}")
        assert testbed.job(low).get("JobState") == "RUNNING", testbed.job(low)

        high = testbed.sbatch(
            "-p", "high", "-N4", "--exclusive", "-o", "high.out", "-J", "e2e-high", str(high_script),
        )

        def requeued():
            j = testbed.job(low)
            return j.get("JobState") == "PENDING" and j.get("Restarts") == "1"
        testbed.wait_for(requeued, 120,
                         lambda: f"low job {low} to be preempted and requeued: {testbed.job(low)}")

        testbed.wait_for(
            lambda: testbed.job(high).get("JobState", "gone") in ("COMPLETED", "gone"), 120,
            lambda: f"high job {high} to run and complete: {testbed.job(high)}")
        high_out = testbed.read("high.out")
        assert {ln.split()[1] for ln in high_out.splitlines() if ln.startswith("HIGH ")} == NODES, high_out
        assert testbed.job(low).get("Restarts") == "1", testbed.job(low)

        # A requeued job waits ~120 s (Reason=BeginTime); skip that.
        testbed.root_cmd(["scontrol", "update", f"JobId={low}", "StartTime=now"])
        testbed.wait_for(
            lambda: "RESTART=1" in testbed.read("low.out"), 120,
            lambda: f"requeued job {low} to run again with SLURM_RESTART_COUNT=1: "
                    f"{testbed.job(low)}; low.out: {testbed.read('low.out')!r}")
        out = testbed.read("low.out")
        assert out.index("RESTART=0") < out.index("RESTART=1"), out
        assert f"JOB={low}" in out, out
    finally:
        testbed.cancel(low, high)
