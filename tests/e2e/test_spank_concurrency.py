"""Twenty --primus steps at once across the testbed, in four jobs: every step completes, and no
two steps running at the same time on a node got the same port."""

import re


def test_twenty_concurrent_steps_never_share_a_port(testbed):
    body = ("#!/bin/sh\n"
            "for i in 1 2 3 4 5; do\n"
            "  srun --overlap -N4 -n4 --primus=pytorch sh -c "
            "'echo STEP $SLURM_JOB_ID.$SLURM_STEP_ID $SLURMD_NODENAME $MASTER_PORT $PRIMUS_PORT; sleep 4' &\n"
            "done\n"
            "wait\n")
    script = testbed.write_script("steps.sh", body)
    jobs = [testbed.sbatch("-N4", "--ntasks-per-node=1", "-o", str(testbed.workdir / f"steps-{i}.out"),
                           str(script)) for i in range(4)]
    try:
        testbed.wait_for(lambda: all(not testbed.job(j) or testbed.job(j).get("JobState") in
                                     ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT") for j in jobs),
                         120, "the four jobs to end")
        states = {j: testbed.job(j).get("JobState", "gone") for j in jobs}
        assert all(s in ("COMPLETED", "gone") for s in states.values()), states
    finally:
        testbed.cancel(*jobs)

    ports = {}  # (node, step) -> {ports}
    for i in range(4):
        for line in testbed.read(f"steps-{i}.out").splitlines():
            m = re.match(r"^STEP (\S+) (n\d) (\d+) (\d+)$", line)
            if m:
                ports[(m.group(2), m.group(1))] = {int(m.group(3)), int(m.group(4))}
    steps = {step for _, step in ports}
    assert len(steps) == 20, sorted(steps)
    assert len(ports) == 80, "every step has a task on each of the four nodes"
    for node in ("n1", "n2", "n3", "n4"):
        on_node = [(step, p) for (n, step), p in ports.items() if n == node]
        for a in range(len(on_node)):
            for b in range(a + 1, len(on_node)):
                assert not on_node[a][1] & on_node[b][1], (node, on_node[a], on_node[b])
