"""primus._env: every variable the rank side reads is in one table, read once into a snapshot,
and the package reads the environment nowhere else."""

import os
import re
from pathlib import Path

import pytest

import primus
from primus import _env

PACKAGE = Path(primus.__file__).resolve().parent
USES = re.compile(
    r'_env\.(?:given|text|raw|is_set|export|_int_variable|count_variable)\(\s*"([A-Z_]+)"')
SETTINGS = re.compile(r'\bsetting\([^,()]+,\s*"([A-Z_]+)"')


def modules():
    return sorted(PACKAGE.glob("*.py"))


def test_no_module_but_env_reads_or_writes_the_environment():
    offenders = [f"{path.name}:{n}" for path in modules() if path.name != "_env.py"
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if re.search(r"os\.environ|os\.getenv|os\.putenv", line)]
    assert offenders == []


def test_every_variable_read_is_in_the_table():
    names = set()
    for path in modules():
        text = path.read_text()
        names.update(USES.findall(text))
        names.update(SETTINGS.findall(text))
    assert names, "the pattern finds the reads"
    assert names - set(_env.VARIABLES) == set()
    with pytest.raises(KeyError, match="PRIMUS_NO_SUCH"):
        _env.given("PRIMUS_NO_SUCH")


def test_the_variables_are_read_once_and_again_on_request():
    os.environ["PRIMUS_SEED"] = "7"  # not through monkeypatch: no automatic reread
    try:
        _env.reread()
        os.environ["PRIMUS_SEED"] = "8"
        assert _env.given("PRIMUS_SEED") == "7"
        _env.reread()
        assert _env.given("PRIMUS_SEED") == "8"
        os.environ["PRIMUS_SEED"] = ""
        _env.reread()
        assert _env.given("PRIMUS_SEED") is None
        assert _env.is_set("PRIMUS_SEED")
        assert _env.raw("PRIMUS_SEED") == ""
        assert _env.text("PRIMUS_SEED") == "0"  # the table's default
    finally:
        del os.environ["PRIMUS_SEED"]
        _env.reread()
    assert not _env.is_set("PRIMUS_SEED")


def test_export_writes_for_children_and_for_this_process(monkeypatch):
    monkeypatch.delenv("PRIMUS_RESUME", raising=False)
    _env.export("PRIMUS_RESUME", "/ckpt/step-00000004")
    assert os.environ["PRIMUS_RESUME"] == "/ckpt/step-00000004"
    assert _env.given("PRIMUS_RESUME") == "/ckpt/step-00000004"
    _env.export("PRIMUS_RESUME", None)
    assert "PRIMUS_RESUME" not in os.environ
    assert _env.given("PRIMUS_RESUME") is None


def test_the_job_directories_of_a_plain_script_and_of_a_job(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PRIMUS_JOB_DIR", raising=False)
    monkeypatch.delenv("PRIMUS_CKPT_DIR", raising=False)
    assert _env.job_directories() == (str(tmp_path / "primus-local"),
                                      str(tmp_path / "primus-local" / "ckpt"))
    monkeypatch.setenv("PRIMUS_JOB_DIR", "/jobs/primus-42")
    assert _env.job_directories() == ("/jobs/primus-42", "/jobs/primus-42/ckpt")
    monkeypatch.setenv("PRIMUS_CKPT_DIR", "/scratch/ckpt")
    assert _env.job_directories() == ("/jobs/primus-42", "/scratch/ckpt")


def test_a_bad_integer_names_its_variable(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "four")
    with pytest.raises(ValueError, match="WORLD_SIZE: expected an integer, got 'four'"):
        _env.rank_and_world()
