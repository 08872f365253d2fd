"""Twenty --primus steps at once across the testbed: every step completes, all of them run at the
same time (each task waits until every task of every step has started), and no two of them got
the same port on a node.

scripts/test runs this file on two clusters. With MpiParams=ports (the testbed's default) Slurm
reserves each step's ports, and the steps come from four jobs. Without it
(PRIMUS_TESTBED_RESV_PORTS=none) the plugin derives the ports from the job id and the step id
(docs/architecture.md, "Ports"): the steps of one job take consecutive slots and never collide,
while steps of two unrelated jobs collide with probability 1/slots, so there the twenty steps are
steps of one job. The test reads slurm.conf to know which cluster it runs on, and checks that the
ports came from the path it expects."""

import re

STEPS = 20
NODES = ("n1", "n2", "n3", "n4")
RESERVED = (12000, 12999)  # MpiParams=ports of scripts/slurm-testbed
DERIVED = (20000, 29999)   # the plugin's default port_range

# Every task announces itself in the shared work directory, then waits (polling, at most
# $WAIT s) until all STEPS x 4 tasks of the test have, so that every step is running while every
# other one is: the port comparison below is between steps that really overlapped.
TASK = ("touch \"$W/started.$SLURM_JOB_ID.$SLURM_STEP_ID.$SLURMD_NODENAME\"; "
        "count() { ls \"$W\" | grep -c \"^started\\.\"; }; "
        "i=0; while [ $(count) -lt $ALL ] && [ $i -lt $((WAIT * 5)) ]; do "
        "sleep 0.2; i=$((i + 1)); done; "
        "echo \"STEP $SLURM_JOB_ID.$SLURM_STEP_ID $SLURMD_NODENAME $MASTER_PORT $PRIMUS_PORT "
        "$(count) ${SLURM_STEP_RESV_PORTS:-none}\"; "
        "sleep 1")
assert "'" not in TASK  # it runs inside sh -c '...' 


def batch_script(steps_per_job, barrier_dir):
    return ("#!/bin/sh\n"
            f"export W={barrier_dir} ALL={STEPS * len(NODES)} WAIT=150\n"
            f"for i in $(seq {steps_per_job}); do\n"
            f"  srun --overlap -N4 -n4 --primus=pytorch sh -c '{TASK}' &\n"
            "done\n"
            "wait\n")


def reserved_ports(testbed):
    conf = (testbed.dir / "slurm.conf").read_text()
    return re.search(r"(?m)^MpiParams=ports=", conf) is not None


def test_twenty_concurrent_steps_never_share_a_port(testbed):
    reserved = reserved_ports(testbed)
    jobs_count = 4 if reserved else 1
    barrier = testbed.workdir / "barrier"
    barrier.mkdir()
    barrier.chmod(0o777)
    script = testbed.write_script("steps.sh", batch_script(STEPS // jobs_count, barrier))
    jobs = [testbed.sbatch("-N4", "--ntasks-per-node=1", "-o",
                           str(testbed.workdir / f"steps-{i}.out"), str(script))
            for i in range(jobs_count)]
    try:
        states = testbed.wait_ended(jobs, 300)
    finally:
        testbed.cancel(*jobs)
    assert all(s in ("COMPLETED", "gone") for s in states.values()), states

    ports = {}  # (node, step) -> {ports}
    outputs = "".join(testbed.read(f"steps-{i}.out") for i in range(jobs_count))
    for line in outputs.splitlines():
        m = re.match(r"^STEP (\S+) (n\d) (\d+) (\d+) (\d+) (\S+)$", line)
        if not m:
            continue
        step, node, master, primus, started, resv = m.groups()
        ports[(node, step)] = {int(master), int(primus)}
        # Every task saw all the others started: the twenty steps overlapped in time.
        assert int(started) == STEPS * len(NODES), f"{step} on {node} ran alone: {line}"
        low, high = RESERVED if reserved else DERIVED
        assert all(low <= p <= high for p in ports[(node, step)]), line
        assert (resv != "none") == reserved, line
    steps = {step for _, step in ports}
    assert len(steps) == STEPS, f"{sorted(steps)}\n{outputs}"
    assert len(ports) == STEPS * len(NODES), "every step has a task on each of the four nodes"
    for node in NODES:
        on_node = sorted((step, p) for (n, step), p in ports.items() if n == node)
        for a in range(len(on_node)):
            for b in range(a + 1, len(on_node)):
                assert not on_node[a][1] & on_node[b][1], (node, on_node[a], on_node[b])
