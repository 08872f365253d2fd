"""Bad --primus values through srun, sbatch and salloc: each stops the command with a non-zero
exit and a message naming the option (or variable) and what was expected, and queues no job.
The allowed-roots cases switch the plugstack's arguments for their duration (slurmstepd and srun
read plugstack.conf at every step)."""

import os
from contextlib import contextmanager

import pytest

PORT_EXPECTED = "expected a port number (1-65535) or 'auto'"

CASES = [
    # (command, options, extra environment, expected message)
    ("srun", ["--primus=jax"], {}, "--primus: expected one of pytorch, tensorflow, none, got 'jax'"),
    ("srun", ["--primus-master-port=99999"], {}, f"--primus-master-port: {PORT_EXPECTED}, got '99999'"),
    ("srun", ["--primus-master-port=0"], {}, f"--primus-master-port: {PORT_EXPECTED}, got '0'"),
    ("srun", ["--primus-master-port=12ab"], {}, f"--primus-master-port: {PORT_EXPECTED}, got '12ab'"),
    ("srun", ["--primus-bind-gpus=some"], {}, "--primus-bind-gpus: expected 'auto' or 'none', got 'some'"),
    ("srun", ["--primus", "--primus-ckpt-dir="], {}, "--primus-ckpt-dir: expected a path"),
    ("srun", ["--primus"], {"PRIMUS_MASTER_PORT": "70000"}, f"PRIMUS_MASTER_PORT: {PORT_EXPECTED}, got '70000'"),
    ("srun", ["--primus"], {"PRIMUS_VERBOSE": "maybe"}, "PRIMUS_VERBOSE: expected 1/yes/true or 0/no/false"),
    ("sbatch", ["--primus=jax"], {}, "--primus: expected one of pytorch, tensorflow, none, got 'jax'"),
    ("sbatch", ["--primus-master-port=99999"], {}, f"--primus-master-port: {PORT_EXPECTED}, got '99999'"),
    ("sbatch", ["--primus-bind-gpus=maybe"], {}, "--primus-bind-gpus: expected 'auto' or 'none', got 'maybe'"),
    ("sbatch", ["--primus"], {"PRIMUS_BIND_GPUS": "x"}, "PRIMUS_BIND_GPUS: expected 'auto' or 'none', got 'x'"),
    ("salloc", ["--primus=jax"], {}, "--primus: expected one of pytorch, tensorflow, none, got 'jax'"),
    ("salloc", ["--primus-master-port=-1"], {}, f"--primus-master-port: {PORT_EXPECTED}, got '-1'"),
]


def submit(testbed, command, options, extra_env):
    env = [f"{k}={v}" for k, v in extra_env.items()]
    if command == "srun":
        argv = ["srun", "-n1", *options, "true"]
    elif command == "sbatch":
        script = testbed.write_script("never.sh", "#!/bin/sh\ntrue\n")
        argv = ["sbatch", *options, str(script)]
    else:
        argv = ["salloc", "-n1", *options, "true"]
    return testbed.user_cmd(["env", *env, *argv], check=False, timeout=60)


@pytest.mark.parametrize("command,options,extra_env,message", CASES,
                         ids=[f"{c[0]}:{' '.join(c[1])}:{','.join(c[2])}" for c in CASES])
def test_bad_value_is_refused_before_queueing(testbed, command, options, extra_env, message):
    before = testbed.job_ids()
    res = submit(testbed, command, options, extra_env)
    assert res.returncode != 0, res.stdout + res.stderr
    assert message in res.stderr, res.stderr
    assert not testbed.new_jobs(before)


@contextmanager
def plugstack_arguments(testbed, arguments):
    path = testbed.dir / "plugstack.conf"
    original = path.read_text()
    path.write_text(original.rstrip("\n") + " " + arguments + "\n")
    try:
        yield
    finally:
        path.write_text(original)


def test_bad_plugstack_argument_is_a_clear_error(testbed):
    with plugstack_arguments(testbed, "port_range=1-10"):
        res = testbed.user_cmd(["srun", "-n1", "true"], check=False)
    assert res.returncode != 0
    assert "plugstack argument port_range: expected a port range LO-HI holding at least 32 ports" in res.stderr


@pytest.mark.parametrize("command", ["srun", "sbatch"])
def test_checkpoint_dir_escaping_the_allowed_roots_by_symlink(testbed, command):
    allowed = testbed.workdir / "allowed"
    allowed.mkdir(exist_ok=True)
    link = allowed / "escape"
    if not link.exists():
        os.symlink("/tmp", link)
    os.chown(allowed, testbed.uid, testbed.gid)
    before = testbed.job_ids()
    with plugstack_arguments(testbed, f"ckpt_roots={allowed}"):
        res = submit(testbed, command, ["--primus", f"--primus-ckpt-dir={link}/ckpt"], {})
        queued = testbed.new_jobs(before)
        ok = submit(testbed, "srun", ["--primus", f"--primus-ckpt-dir={allowed}/ckpt"], {})
    assert res.returncode != 0, res.stdout + res.stderr
    assert f"--primus-ckpt-dir: '{link}/ckpt' resolves to '/tmp/ckpt'" in res.stderr, res.stderr
    assert "outside the directories this site allows" in res.stderr
    assert not queued
    assert ok.returncode == 0, ok.stderr
