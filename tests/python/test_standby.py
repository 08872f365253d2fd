"""primus._standby, the process primus-launch keeps ready to become a failed rank
(--primus-recover=rejoin): a real `python -m primus._standby`, fed its assignment on standard
input as the launcher feeds it; test_rejoin.py has it under primus-launch."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from job_env import job_environment
from primus import _standby

PROGRAM = """
import json, os, sys
print(json.dumps({"argv": sys.argv, "name": __name__, "x": os.environ.get("X"),
                  "gone": os.environ.get("ONLY_THE_STANDBY"), "stdin": sys.stdin.read()}))
sys.exit(7)
"""


def run_standby(line, cwd, timeout=120):
    env = job_environment(ONLY_THE_STANDBY="1")
    return subprocess.run([sys.executable, "-m", "primus._standby"], input=line, cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout)


def assignment(argv, **variables):
    env = job_environment(**variables)
    return json.dumps({"argv": argv, "env": env}) + "\n"


@pytest.mark.parametrize("line", [
    "not json", "[]", '{"argv": [], "env": {}}', '{"argv": ["-m"], "env": {}}',
    '{"argv": ["x.py"], "env": {"A": 1}}', '{"argv": ["x.py"]}', '{"argv": [3], "env": {}}'])
def test_a_malformed_assignment_is_refused(line):
    with pytest.raises(_standby.Refused):
        _standby.parse(line)


def test_the_standby_becomes_the_script_with_the_ranks_environment_alone(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(PROGRAM)
    result = run_standby(assignment([str(script), "--lr", "0.1"], X="rank 2"), tmp_path)
    assert result.returncode == 7, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {"argv": [str(script), "--lr", "0.1"], "name": "__main__", "x": "rank 2",
                    "gone": None, "stdin": ""}, seen


def test_the_standby_becomes_a_module_run_with_dash_m(tmp_path):
    (tmp_path / "job_main.py").write_text(PROGRAM)
    result = run_standby(assignment(["-m", "job_main", "a"], X="m"), tmp_path)
    assert result.returncode == 7, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["argv"][1:] == ["a"] and seen["argv"][0].endswith("job_main.py"), seen
    assert seen["name"] == "__main__" and seen["x"] == "m", seen


def test_a_standby_never_needed_ends_at_the_end_of_its_input(tmp_path):
    result = run_standby("", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "", result.stdout


def test_a_standby_given_a_bad_line_says_so_and_exits_2(tmp_path):
    result = run_standby('{"argv": []}\n', tmp_path)
    assert result.returncode == 2
    assert "refused the assignment" in result.stderr, result.stderr


class NodeStandby:
    """A real `python -m primus._standby_node NAME`, as a node's first task wrapper starts it
    under srun (its standard input a pipe from its owner), and a wrapper's side of its socket."""

    def __init__(self, tmp_path):
        self.name = f"primus-test-standby.{os.getpid()}.{tmp_path.name}"
        self.log = open(tmp_path / "standby.log", "w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "primus._standby_node", self.name],
                                     stdin=subprocess.PIPE, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=job_environment(),
                                     cwd=tmp_path)
        deadline = time.monotonic() + 120
        while f"@{self.name}" not in Path("/proc/net/unix").read_text():
            assert self.proc.poll() is None, Path(self.log.name).read_text()
            assert time.monotonic() < deadline, "the standby never listened"
            time.sleep(0.05)

    def ask(self, line):
        """Sends one request with the write end of a new pipe: (connection, read end)."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        conn.connect("\0" + self.name)
        read_end, write_end = os.pipe()
        socket.send_fds(conn, [line.encode()], [write_end])
        os.close(write_end)
        return conn, read_end

    def close(self):
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)


def answer(conn):
    conn.settimeout(120)
    return json.loads(conn.recv(65536))


def test_a_node_standby_forks_each_rank_it_is_asked_for_and_reports_its_end(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(PROGRAM)
    node = NodeStandby(tmp_path)
    try:
        for rank in ("5", "1"):
            conn, output = node.ask(assignment([str(script), "--r", rank], X=rank, RANK=rank))
            pid = answer(conn)["pid"]
            assert pid != node.proc.pid
            assert answer(conn) == {"wait_status": 7 << 8}
            with os.fdopen(output) as out:
                seen = json.loads(out.read().strip().splitlines()[-1])
            assert seen == {"argv": [str(script), "--r", rank], "name": "__main__", "x": rank,
                            "gone": None, "stdin": ""}, seen
            conn.close()
        assert node.proc.poll() is None, "one standby serves every request"
    finally:
        assert node.close() == 0
    assert "becomes rank 5" in Path(node.log.name).read_text()


def test_a_node_standby_kills_the_rank_of_a_wrapper_that_went_away(tmp_path):
    script = tmp_path / "sleep.py"
    script.write_text("import time\ntime.sleep(300)\n")
    node = NodeStandby(tmp_path)
    try:
        conn, output = node.ask(assignment([str(script)], RANK="2"))
        pid = answer(conn)["pid"]
        conn.close()
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text(
        ).rsplit(")", 1)[1].split()[0]:
            assert time.monotonic() < deadline, "the rank outlived its wrapper's connection"
            time.sleep(0.05)
        os.close(output)
    finally:
        assert node.close() == 0


def test_a_node_standby_binds_each_fork_to_the_cpus_of_the_task_that_asked(tmp_path):
    script = tmp_path / "cpus.py"
    script.write_text("import os\nprint(sorted(os.sched_getaffinity(0)))\n")
    allowed = sorted(os.sched_getaffinity(0))
    node = NodeStandby(tmp_path)
    try:
        for cpus in ([allowed[-1]], None):
            request = json.loads(assignment([str(script)], RANK="3"))
            if cpus is not None:
                request["cpus"] = cpus
            conn, output = node.ask(json.dumps(request))
            answer(conn)
            assert answer(conn) == {"wait_status": 0}
            with os.fdopen(output) as out:
                assert json.loads(out.read()) == (cpus or allowed)
            conn.close()
    finally:
        assert node.close() == 0


def test_a_node_standby_refuses_a_bad_request_and_stays(tmp_path):
    node = NodeStandby(tmp_path)
    try:
        no_cpus = json.dumps({**json.loads(assignment(["x.py"])), "cpus": []})
        for request, refused in (('{"argv": []}', "argv"), (no_cpus, "cpus")):
            conn, output = node.ask(request)
            assert refused in answer(conn)["error"]
            os.close(output)
            conn.close()
        assert node.proc.poll() is None
    finally:
        assert node.close() == 0
