"""The SPANK plugin primus.so in a real Slurm: options in srun and sbatch, validation before
anything is queued, the rank environment in every task, and nothing for steps without --primus.
scripts/test starts the testbed with PRIMUS_SPANK_PLUGIN pointing at the built plugin."""

import re
from pathlib import Path

import pytest

NODE_ADDR = {"n1": "127.0.0.11", "n2": "127.0.0.12", "n3": "127.0.0.13", "n4": "127.0.0.14"}
RANK_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PRIMUS_JOB_SECRET",
             "PRIMUS_ENV_VERSION", "TF_CONFIG")


@pytest.fixture(scope="module", autouse=True)
def plugin_loaded(testbed):
    plugstack = (testbed.dir / "plugstack.conf").read_text()
    if "primus.so" not in plugstack:
        pytest.fail("the testbed's plugstack does not load primus.so: start it with "
                    "PRIMUS_SPANK_PLUGIN=<build>/spank/.libs/primus.so (scripts/test does)")


def task_envs(out):
    """`srun -l env` output -> {task: {var: value}}."""
    by_task = {}
    for line in out.splitlines():
        m = re.match(r"^\s*(\d+): ([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line)
        if m:
            by_task.setdefault(int(m.group(1)), {})[m.group(2)] = m.group(3)
    return by_task


def check_ranks(by_task, world):
    assert sorted(by_task) == list(range(world)), sorted(by_task)
    secrets = {e["PRIMUS_JOB_SECRET"] for e in by_task.values()}
    assert len(secrets) == 1 and re.fullmatch(r"[0-9a-f]{64}", secrets.pop())
    for task, env in by_task.items():
        assert env["RANK"] == env["SLURM_PROCID"] == str(task)
        assert env["LOCAL_RANK"] == env["SLURM_LOCALID"]
        assert env["NODE_RANK"] == env["SLURM_NODEID"]
        assert env["WORLD_SIZE"] == str(world)
        assert env["PRIMUS_ENV_VERSION"] == "2"
        assert env["MASTER_PORT"] == by_task[0]["MASTER_PORT"]


def test_srun_primus_sets_every_rank(testbed):
    by_task = task_envs(testbed.srun("-l", "-N4", "-n8", "--primus=pytorch", "env"))
    check_ranks(by_task, 8)
    assert {e["MASTER_ADDR"] for e in by_task.values()} == {NODE_ADDR["n1"]}
    first_port = int(by_task[0]["SLURM_STEP_RESV_PORTS"].split("-")[0].split(",")[0])
    assert by_task[0]["MASTER_PORT"] == str(first_port)


def test_master_addr_is_the_first_node_of_the_step(testbed):
    by_task = task_envs(testbed.srun("-l", "-N2", "-n2", "-w", "n3,n4", "--primus", "env"))
    check_ranks(by_task, 2)
    assert {e["MASTER_ADDR"] for e in by_task.values()} == {NODE_ADDR["n3"]}
    # srun asked slurmctld for n3's NodeAddr and handed it to the tasks.
    shown = testbed.root_cmd(["scontrol", "show", "node", "n3"]).stdout
    node_addr = re.search(r"NodeAddr=(\S+)", shown).group(1)
    assert {e["PRIMUS_MASTER_NODE"] for e in by_task.values()} == {f"n3={node_addr}"}


def test_an_enclosing_steps_master_node_never_leaks_into_a_step(testbed):
    # The outer step's first node is n1; its rank 0 starts an inner step on n3 alone.
    out = testbed.srun("-N2", "-n2", "-w", "n1,n3", "--primus", "bash", "-c",
                       "[ $SLURM_PROCID = 0 ] && srun -N1 -n1 -w n3 --overlap --primus "
                       "bash -c 'echo inner $MASTER_ADDR $PRIMUS_MASTER_NODE' || true")
    assert f"inner {NODE_ADDR['n3']} n3={NODE_ADDR['n3']}" in out, out


def test_a_step_without_primus_is_left_alone(testbed):
    by_task = task_envs(testbed.srun("-l", "-N2", "-n4", "env"))
    assert sorted(by_task) == [0, 1, 2, 3]
    for env in by_task.values():
        for name in RANK_VARS:
            assert name not in env, (name, env.get(name))
        assert not [k for k in env if k.startswith("PRIMUS_")], env


def test_bad_option_stops_srun_before_anything_runs(testbed):
    before = testbed.job_ids()
    res = testbed.user_cmd(["srun", "-n1", "--primus-master-port=99999", "true"], check=False)
    assert res.returncode != 0
    assert "--primus-master-port: expected a port number (1-65535) or 'auto', got '99999'" in res.stderr
    assert not testbed.new_jobs(before)


def test_sbatch_options_reach_the_steps_and_the_batch_step_is_no_rank(testbed):
    script = testbed.write_script("job.sh", "#!/bin/sh\n"
                                  "#SBATCH --primus=pytorch\n"
                                  "#SBATCH -N2 --ntasks-per-node=2\n"
                                  "echo \"batch RANK=${RANK:-none} FW=${PRIMUS_FRAMEWORK:-none}\"\n"
                                  "srun -l env\n")
    out_file = testbed.workdir / "job.out"
    job = testbed.sbatch("-o", str(out_file), str(script))
    try:
        states = testbed.wait_ended([job], 180)
    finally:
        testbed.cancel(job)
    assert states[job] in ("COMPLETED", "gone"), states
    testbed.wait_for(lambda: "batch RANK" in testbed.read("job.out"), 30, "the job's output")
    out = testbed.read("job.out")
    assert "batch RANK=none FW=pytorch" in out, out
    check_ranks(task_envs(out), 4)


SECRET_JOB = """#!/bin/sh
#SBATCH --primus
#SBATCH -N2 --ntasks-per-node=1
digest() { printf %s "$PRIMUS_JOB_SECRET" | sha256sum | cut -c1-16; }
echo "SECRET batch - $(digest)"
for s in 1 2; do
  srun sh -c 'echo "SECRET $SLURM_STEP_ID $SLURM_PROCID $(printf %s "$PRIMUS_JOB_SECRET" | sha256sum | cut -c1-16)"'
done
"""
EMPTY_DIGEST = "e3b0c44298fc1c14"  # sha256 of the empty string


def test_one_secret_per_job_shared_by_its_steps(testbed):
    """The secret is made once per job at submission: the batch shell and every task of every
    step of an sbatch job have the same one, and another job has another (compared by digest,
    never printed)."""
    script = testbed.write_script("secret.sh", SECRET_JOB)
    jobs = [testbed.sbatch("-o", str(testbed.workdir / f"secret-{i}.out"), str(script))
            for i in range(2)]
    try:
        states = testbed.wait_ended(jobs, 180)
    finally:
        testbed.cancel(*jobs)
    assert all(s in ("COMPLETED", "gone") for s in states.values()), states
    digests = []
    for i, job in enumerate(jobs):
        out = testbed.read(f"secret-{i}.out")
        rows = [line.split()[1:] for line in out.splitlines() if line.startswith("SECRET ")]
        # two steps of two tasks each, and the batch shell
        assert sorted((step, task) for step, task, _ in rows) == \
            [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1"), ("batch", "-")], out
        found = {digest for _, _, digest in rows}
        assert len(found) == 1, f"job {job}: the steps do not share one secret: {out}"
        digests.append(found.pop())
    assert EMPTY_DIGEST not in digests, digests
    assert digests[0] != digests[1], "two jobs got the same secret"


NESTED_OUTER = """#!/bin/sh
#SBATCH --primus
#SBATCH -N1
digest() {{ printf %s "$PRIMUS_JOB_SECRET" | sha256sum | cut -c1-16; }}
echo "OUTER $(digest)"
sbatch --parsable --primus -N1 -o {inner_out} {inner} > {inner_id}
"""
NESTED_INNER = """#!/bin/sh
digest() { printf %s "$PRIMUS_JOB_SECRET" | sha256sum | cut -c1-16; }
echo "INNER $(digest)"
srun sh -c 'echo "STEP $(printf %s "$PRIMUS_JOB_SECRET" | sha256sum | cut -c1-16)"'
"""


def test_a_job_submitted_from_inside_a_job_gets_its_own_secret(testbed):
    """sbatch always makes a new secret: a job submitted from a job's batch script (which has
    the outer job's PRIMUS_JOB_SECRET in its environment) gets another one, and its steps share
    the new one. Before, the inner job inherited the outer secret, so that the two jobs' ranks
    could authenticate each other."""
    inner = testbed.write_script("nested-inner.sh", NESTED_INNER)
    outer = testbed.write_script("nested-outer.sh", NESTED_OUTER.format(
        inner=inner, inner_out=testbed.workdir / "nested-inner.out",
        inner_id=testbed.workdir / "nested-inner.id"))
    job = testbed.sbatch("-o", str(testbed.workdir / "nested-outer.out"), str(outer))
    inner_job = ""
    try:
        testbed.wait_ended([job], 120)
        inner_job = testbed.wait_for(lambda: testbed.read("nested-inner.id").strip(), 30,
                                     "the inner job's id")
        testbed.wait_ended([inner_job], 120)
    finally:
        testbed.cancel(job, inner_job)
    outer_out = testbed.read("nested-outer.out")
    inner_out = testbed.wait_for(lambda: "STEP" in testbed.read("nested-inner.out")
                                 and testbed.read("nested-inner.out"), 30, "the inner output")
    outer_digest = re.search(r"^OUTER (\S+)", outer_out, re.M).group(1)
    inner_digest = re.search(r"^INNER (\S+)", inner_out, re.M).group(1)
    step_digest = re.search(r"^STEP (\S+)", inner_out, re.M).group(1)
    assert EMPTY_DIGEST not in (outer_digest, inner_digest), (outer_out, inner_out)
    assert inner_digest != outer_digest, "the inner job inherited the outer job's secret"
    assert step_digest == inner_digest, "the inner job's step does not share its secret"


def test_bad_sbatch_option_queues_nothing(testbed):
    before = testbed.job_ids()
    script = testbed.write_script("bad.sh", "#!/bin/sh\n#SBATCH --primus=jax\ntrue\n")
    res = testbed.user_cmd(["sbatch", str(script)], check=False)
    assert res.returncode != 0
    assert "--primus: expected one of pytorch, tensorflow, none, got 'jax'" in res.stderr
    assert not testbed.new_jobs(before)


def test_pytorch_allreduce_over_four_nodes(testbed):
    code = ("import torch, torch.distributed as dist\n"
            "dist.init_process_group('gloo')\n"
            "t = torch.tensor([float(dist.get_rank() + 1)])\n"
            "dist.all_reduce(t)\n"
            "print('SUM', dist.get_rank(), int(t.item()), flush=True)\n"
            "dist.destroy_process_group()\n")
    out = testbed.srun("-N4", "-n8", "--primus=pytorch", "/usr/bin/python3", "-c", code, timeout=180)
    sums = sorted(tuple(map(int, line.split()[1:])) for line in out.splitlines() if line.startswith("SUM"))
    assert sums == [(rank, 36) for rank in range(8)], out


def test_cyclic_distribution(testbed):
    by_task = task_envs(testbed.srun("-l", "-N4", "--ntasks-per-node=2", "-m", "cyclic",
                                     "--primus", "env"))
    check_ranks(by_task, 8)
    assert [by_task[r]["SLURMD_NODENAME"] for r in range(8)] == ["n1", "n2", "n3", "n4"] * 2


def test_tensorflow_configs_agree(testbed):
    import json
    by_task = task_envs(testbed.srun("-l", "-N2", "--ntasks-per-node=2", "--primus=tensorflow", "env"))
    configs = {t: json.loads(e["TF_CONFIG"]) for t, e in by_task.items()}
    workers = configs[0]["cluster"]["worker"]
    assert len(set(workers)) == 4
    for task, config in configs.items():
        assert config["cluster"]["worker"] == workers
        assert config["task"] == {"type": "worker", "index": task}
        assert workers[task].startswith(by_task[task]["SLURMD_NODENAME"] + ":")


def test_gpus_per_node_give_disjoint_blocks(testbed):
    by_task = task_envs(testbed.srun("-l", "-N2", "--ntasks-per-node=2", "--gpus-per-node=4",
                                     "--primus", "env"))
    for env in by_task.values():
        assert env["CUDA_VISIBLE_DEVICES"] == ("0,1" if env["LOCAL_RANK"] == "0" else "2,3"), env


def test_pmix_rank_equals_rank(testbed):
    by_task = task_envs(testbed.srun("-l", "--mpi=pmix", "-N2", "-n4", "--primus", "env"))
    check_ranks(by_task, 4)
    for env in by_task.values():
        assert env["PMIX_RANK"] == env["RANK"]
        assert env["PRIMUS_BOOTSTRAP"] == "pmix"


def test_salloc_options_reach_the_steps(testbed):
    out = testbed.user_cmd(["salloc", "-N2", "--ntasks-per-node=1", "--primus=tensorflow",
                            "srun", "-l", "env"], timeout=90).stdout
    by_task = task_envs(out)
    check_ranks(by_task, 2)
    for env in by_task.values():
        assert env["PRIMUS_FRAMEWORK"] == "tensorflow" and "TF_CONFIG" in env
