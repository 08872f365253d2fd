"""primus.so missing on the compute nodes while srun has it, and --primus-verbose. srun reads the
plugstack named by its own slurm.conf: a copy of the testbed's slurm.conf that names another
plugstack lets srun load primus.so while slurmstepd on every node reads the testbed's."""

import re
from contextlib import contextmanager

PROBE = "echo RANK=${RANK:-unset} ENV_VERSION=${PRIMUS_ENV_VERSION:-unset}"


@contextmanager
def nodes_plugstack(testbed, line):
    """srun keeps the real plugstack; slurmstepd on every node reads `line` instead."""
    stack = testbed.dir / "plugstack.conf"
    original = stack.read_text()
    srun_stack = testbed.workdir / "plugstack-srun.conf"
    srun_stack.write_text(original)
    conf = testbed.workdir / "slurm-srun.conf"
    conf.write_text(re.sub(r"(?m)^PlugStackConfig=.*$", f"PlugStackConfig={srun_stack}",
                           (testbed.dir / "slurm.conf").read_text()))
    srun_stack.chmod(0o644)
    conf.chmod(0o644)
    stack.write_text(line + "\n")
    try:
        yield str(conf)
    finally:
        stack.write_text(original)


def srun_with_conf(testbed, conf, *args):
    return testbed.user_cmd(["env", f"SLURM_CONF={conf}", "srun", *args], check=False, timeout=60)


def nodes_idle(testbed):
    out = testbed.root_cmd(["sinfo", "-h", "-p", "low", "-o", "%T %D"]).stdout.split()
    return out == ["idle", "4"]


def test_a_required_plugin_missing_on_the_nodes_fails_the_step_cleanly(testbed):
    missing = testbed.dir / "plugins" / "no-such-primus.so"
    with nodes_plugstack(testbed, f"required {missing}") as conf:
        res = srun_with_conf(testbed, conf, "-N2", "-n2", "--primus", "bash", "-c", PROBE)
    # Slurm 22.05's srun exits 0 after a failed launch; its message is the error the user sees,
    # and the slurmd log names the file.
    assert res.stderr.count("launch failed: Plugin initialization failed") == 2, res.stderr
    assert "RANK=" not in res.stdout
    log = "".join(p.read_text(errors="replace") for p in (testbed.dir / "log").glob("slurmd*"))
    assert f"Failed to load plugin {missing}" in log
    # slurmstepd refused the step; slurmd lives on and the next step runs.
    testbed.wait_for(lambda: nodes_idle(testbed), 120, "all nodes idle again")
    ok = testbed.srun("-N4", "-n4", "--primus", "bash", "-c", PROBE)
    assert ok.count("ENV_VERSION=2") == 4, ok


def test_an_optional_plugin_missing_on_the_nodes_leaves_the_tasks_unset(testbed):
    # What primus.init() tells apart: srun passed the job secret, no plugin set up the rank.
    with nodes_plugstack(testbed, f"optional {testbed.dir / 'plugins' / 'no-such-primus.so'}") as conf:
        res = srun_with_conf(testbed, conf, "-N2", "-n2", "--primus", "bash", "-c",
                             PROBE + " SECRET=${PRIMUS_JOB_SECRET:+set}")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("RANK=unset ENV_VERSION=unset SECRET=set") == 2, res.stdout


def test_verbose_reports_the_step_and_every_rank(testbed):
    res = testbed.user_cmd(["srun", "-N2", "-n4", "--ntasks-per-node=2", "-w", "n2,n3",
                            "--primus", "--primus-verbose", "true"], timeout=60)
    assert re.search(r"srun: primus: step \d+\.\d+: pytorch on n\[2-3\]; MASTER_ADDR=127\.0\.0\.12 "
                     r"\(the NodeAddr of the first node\)", res.stderr), res.stderr
    for rank, node in ((0, "n2"), (1, "n2"), (2, "n3"), (3, "n3")):
        assert re.search(rf"^primus: rank {rank}/4 on {node}: LOCAL_RANK={rank % 2} "
                         rf"MASTER_ADDR=127\.0\.0\.12 MASTER_PORT=\d+ PRIMUS_PORT=\d+ "
                         rf"PRIMUS_BOOTSTRAP=tcp", res.stderr, re.M), res.stderr
    assert "PRIMUS_JOB_SECRET" not in res.stderr
    quiet = testbed.user_cmd(["srun", "-N1", "-n1", "--primus", "true"], timeout=60)
    assert "primus:" not in quiet.stderr
