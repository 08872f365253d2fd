"""libprimus-coll in a real multi-node job: `srun --mpi=pmix -N4 -n8 --primus` bootstraps
through Slurm's PMIx (PMIx_Put/Commit/Fence/Get), every connection authenticated with the job
secret the plugin made, and primus-bench-collectives --check finds every result right for
each collective; the same through the TCP store (PRIMUS_BOOTSTRAP=tcp, MASTER_ADDR and
PRIMUS_PORT from the plugin)."""

import re

import pytest


def run_in_module(testbed, prefix, body):
    # A stuck collective fails within PRIMUS_COLL_TIMEOUT, naming the peer, and Slurm ends the
    # job after --time: neither outlives this test.
    body = "PRIMUS_COLL_TIMEOUT=60 " + body.replace("srun ", "srun --time=3 ", 1)
    init = "/usr/share/lmod/lmod/init/bash"
    return testbed.user_cmd(["bash", "-c", f". {init} && module use {prefix}/share/modulefiles "
                             f"&& module load primus && {body}"], timeout=240, check=False)


@pytest.mark.parametrize("op", ["allreduce", "broadcast", "allgather", "reduce_scatter"])
def test_pmix_bootstrap_at_eight_ranks_on_four_nodes(testbed, prefix, op):
    out = run_in_module(testbed, prefix,
                        "srun --mpi=pmix -N4 -n8 --primus primus-bench-collectives --check "
                        f"--op {op} -b 8 -e 1M -f 32 -n 20 -w 1")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{op}, 8 ranks, backend tcp" in out.stdout, out.stdout
    assert "# 0 wrong elements" in out.stdout, out.stdout
    # The header and one line per size, once (rank 0 prints).
    assert len(re.findall(r"^\s+\d+\s+\d+\s+float32", out.stdout, re.M)) == 4, out.stdout  # 8 B, 256 B, 8 KiB, 256 KiB


def test_coll_integrity_reaches_every_rank_and_changes_no_result(testbed, prefix):
    """srun --primus-coll-integrity: the plugin exports PRIMUS_COLL_INTEGRITY=1 to every task,
    every message of the mesh and the store is authenticated, and every result is right."""
    out = run_in_module(testbed, prefix,
                        "srun --mpi=pmix -N2 -n4 --primus --primus-coll-integrity "
                        "primus-bench-collectives --check -b 1K -e 4M -f 64 -n 10 -w 1")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "4 ranks, backend tcp (every message authenticated)" in out.stdout, out.stdout
    assert "# 0 wrong elements" in out.stdout, out.stdout


def test_tcp_store_bootstrap_under_srun(testbed, prefix):
    out = run_in_module(testbed, prefix,
                        "srun --mpi=none -N2 -n4 --primus primus-bench-collectives "
                        "--check -b 1K -e 4M -f 64 -n 10 -w 1")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "allreduce, 4 ranks" in out.stdout and "# 0 wrong elements" in out.stdout, out.stdout
