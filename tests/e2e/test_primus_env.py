"""primus-env under real srun: the rank environment computed by libprimus-common agrees with
what Slurm says about every task (ranks, nodes, distribution, ports, GPUs, PMIx), and the
installed tree works through Lmod. Needs PRIMUS_BUILD_DIR (scripts/test sets it) to install
Primus into a prefix the testbed's user can read."""

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

NODE_ADDR = {"n1": "127.0.0.11", "n2": "127.0.0.12", "n3": "127.0.0.13", "n4": "127.0.0.14"}


def tasks(testbed, prefix, *srun_args, primus_args=()):
    """Runs primus-env in every task; returns {procid: {var: value}} merging Slurm's own
    variables (prefixed SLURM_) with primus-env's output."""
    script = testbed.write_script(
        "dump.sh",
        "#!/bin/sh\nset -e\n"
        f"out=$({prefix}/bin/primus-env \"$@\")\n"
        "env | grep -E '^(SLURM_|SLURMD_NODENAME=|CUDA_VISIBLE_DEVICES=|PMIX_RANK=)' "
        "| sed 's/^/S_/'\n"
        "printf '%s\\n' \"$out\"\n",
    )
    out = testbed.srun("-l", *srun_args, str(script), *primus_args, timeout=90)
    by_task = {}
    for line in out.splitlines():
        m = re.match(r"^\s*(\d+): (.*)$", line)
        assert m, f"unlabelled line {line!r} in:\n{out}"
        name, _, value = m.group(2).partition("=")
        by_task.setdefault(int(m.group(1)), {})[name] = value
    return by_task


def check_against_slurm(by_task, world):
    assert sorted(by_task) == list(range(world)), by_task.keys()
    first = by_task[0]
    for procid, env in by_task.items():
        assert env["RANK"] == str(procid) == env["S_SLURM_PROCID"]
        assert env["LOCAL_RANK"] == env["S_SLURM_LOCALID"]
        assert env["NODE_RANK"] == env["GROUP_RANK"] == env["S_SLURM_NODEID"]
        assert env["WORLD_SIZE"] == str(world)
        for same in ("MASTER_ADDR", "MASTER_PORT", "PRIMUS_PORT", "PRIMUS_JOB_ID"):
            assert env[same] == first[same], (same, procid)
        assert env["PRIMUS_JOB_SECRET"] == "<redacted>"
        assert env["PRIMUS_ENV_VERSION"] == "2"
    local_sizes = {}
    for env in by_task.values():
        local_sizes.setdefault(env["S_SLURMD_NODENAME"], set()).add(env["LOCAL_WORLD_SIZE"])
    for node, sizes in local_sizes.items():
        count = sum(1 for e in by_task.values() if e["S_SLURMD_NODENAME"] == node)
        assert sizes == {str(count)}, (node, sizes, count)


def test_block_ranks_match_slurm_and_ports_come_from_the_reservation(testbed, prefix):
    by_task = tasks(testbed, prefix, "-N4", "-n8")
    check_against_slurm(by_task, 8)
    env = by_task[0]
    assert env["MASTER_ADDR"] == NODE_ADDR["n1"]
    reserved = env["S_SLURM_STEP_RESV_PORTS"]
    first_port = int(re.match(r"\d+", reserved).group(0))
    assert env["MASTER_PORT"] == str(first_port)
    assert env["PRIMUS_PORT"] == str(first_port + 1)
    assert env["PRIMUS_BOOTSTRAP"] == "tcp"


def test_cyclic_distribution(testbed, prefix):
    by_task = tasks(testbed, prefix, "-N4", "--ntasks-per-node=2", "-m", "cyclic")
    check_against_slurm(by_task, 8)
    nodes = [by_task[r]["S_SLURMD_NODENAME"] for r in range(8)]
    assert nodes == ["n1", "n2", "n3", "n4"] * 2, nodes


def test_master_addr_is_the_first_node_of_the_step(testbed, prefix):
    by_task = tasks(testbed, prefix, "-N2", "-n2", "-w", "n3,n4")
    check_against_slurm(by_task, 2)
    assert {e["MASTER_ADDR"] for e in by_task.values()} == {NODE_ADDR["n3"]}


def test_tensorflow_configs_agree(testbed, prefix):
    by_task = tasks(testbed, prefix, "-N2", "--ntasks-per-node=2", primus_args=["--primus=tensorflow"])
    configs = {r: json.loads(e["TF_CONFIG"]) for r, e in by_task.items()}
    cluster = configs[0]["cluster"]
    workers = cluster["worker"]
    assert len(workers) == 4 and len(set(workers)) == 4, workers
    for rank, config in configs.items():
        assert config["cluster"] == cluster
        assert config["task"] == {"type": "worker", "index": rank}
        host = by_task[rank]["S_SLURMD_NODENAME"]
        assert workers[rank].startswith(host + ":"), (rank, workers)


def test_gpus_per_node_split_into_disjoint_blocks(testbed, prefix):
    by_task = tasks(testbed, prefix, "-N2", "--ntasks-per-node=2", "--gpus-per-node=4")
    per_node = {}
    for env in by_task.values():
        assert env["S_CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
        per_node.setdefault(env["S_SLURMD_NODENAME"], []).append(
            (int(env["LOCAL_RANK"]), env["CUDA_VISIBLE_DEVICES"]))
    for node, blocks in per_node.items():
        assert sorted(blocks) == [(0, "0,1"), (1, "2,3")], (node, blocks)


def test_gpus_bound_per_task_by_slurm_are_left_alone(testbed, prefix):
    by_task = tasks(testbed, prefix, "-N1", "-n2", "--gpus-per-task=2")
    for env in by_task.values():
        assert "CUDA_VISIBLE_DEVICES" not in env, env


def test_pmix_bootstrap(testbed, prefix):
    by_task = tasks(testbed, prefix, "--mpi=pmix", "-N2", "-n4")
    check_against_slurm(by_task, 4)
    for rank, env in by_task.items():
        assert env["S_PMIX_RANK"] == env["RANK"]
        assert env["PRIMUS_BOOTSTRAP"] == "pmix"


def test_bad_option_fails_naming_it(testbed, prefix):
    res = testbed.user_cmd(["srun", "-n1", f"{prefix}/bin/primus-env", "--primus-master-port=99999"],
                           check=False)
    assert res.returncode != 0
    assert "--primus-master-port: expected a port number (1-65535) or 'auto', got '99999'" in res.stderr


def test_module_load_primus_as_the_job_user(testbed, prefix):
    init = "/usr/share/lmod/lmod/init/bash"
    assert Path(init).exists(), "Lmod is not installed (Debian package lmod)"
    res = testbed.user_cmd(["bash", "-c",
                            f". {init} && module use {prefix}/share/modulefiles && module load primus"
                            " && command -v primus-env && echo MANPATH=$MANPATH"
                            " && primus-env --nproc 2 | grep -c '^RANK='"])
    lines = res.stdout.split()
    assert lines[0] == f"{prefix}/bin/primus-env", res.stdout
    assert f"{prefix}/share/man" in lines[1], res.stdout
    assert lines[2] == "2", res.stdout

