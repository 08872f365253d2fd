"""primus._standby, the process primus-launch keeps ready to become a failed rank
(--primus-recover=rejoin): a real `python -m primus._standby`, fed its assignment on standard
input as the launcher feeds it; test_rejoin.py has it under primus-launch."""

import json
import subprocess
import sys

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
