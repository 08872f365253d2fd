"""The docs as a reader takes them (issue 41): every --primus option and PRIMUS_* variable they
name is one the code knows, and every shell block they show is valid bash. The source tree is
read (the README, docs/, the man pages, the examples), not the installed copy."""

import os
import re
import subprocess
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("PRIMUS_BUILD_DIR", "."))
DOCS = [TOP / "README.md", *sorted((TOP / "docs").glob("*.md")),
        *sorted((TOP / "docs" / "man").glob("*.[0-9]")),
        *sorted((TOP / "docs" / "man").glob("*.[0-9].in")), *sorted((TOP / "examples").rglob("*.md")),
        *sorted((TOP / "examples").rglob("*.sbatch")), *sorted((TOP / "examples").rglob("*.sh"))]
CODE = [*(TOP / d for d in ("common", "spank", "launcher", "ckpt", "collectives", "data"))]
# Options that are no row of the table: primus-launch's own and the tools'.
OWN_OPTIONS = {"primus"}


def text_of(path):
    text = path.read_text()
    return text.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "").replace("\\fI", "")


def option_table():
    rows = re.findall(r'\{"(primus-[a-z-]+|[a-z_]+[a-z-]*)", "(PRIMUS_[A-Z_]*|)"',
                      (TOP / "common" / "option_table.cpp").read_text())
    return {name for name, _ in rows}


def code_variables():
    names = set()
    for root in CODE:
        for path in root.rglob("*"):
            if path.suffix in (".cpp", ".hpp", ".json"):
                names.update(re.findall(r"\bPRIMUS_[A-Z][A-Z0-9_]*\b", path.read_text()))
    for path in (TOP / "python" / "primus").glob("*.py"):
        names.update(re.findall(r"\bPRIMUS_[A-Z][A-Z0-9_]*\b", path.read_text()))
    # The scripts, the modulefiles and the tests and benchmarks (their own knobs).
    for path in [*(TOP / "scripts").rglob("*"), *(TOP / "modulefiles").glob("*"),
                 *(TOP / "tests").rglob("*")]:
        if path.is_file() and path.suffix not in (".pyc", ".h5") and "corpus" not in path.parts \
                and path.name != "test_docs.py":
            names.update(re.findall(r"\bPRIMUS_[A-Z][A-Z0-9_]*\b", path.read_text(errors="replace")))
    return names


def test_the_docs_are_found():
    assert len(DOCS) > 15 and (TOP / "README.md") in DOCS


def test_every_option_the_docs_name_is_a_row_of_the_table():
    table = option_table()
    assert "primus-fresh" in table and "primus-max-restarts" in table, sorted(table)[:5]
    unknown = {}
    for path in DOCS:
        for name in re.findall(r"--(primus(?:-[a-z]+)*)", text_of(path)):
            if name not in table and name not in OWN_OPTIONS:
                unknown.setdefault(name, path.relative_to(TOP))
    assert not unknown, f"options the docs name that no code knows: {unknown}"


def test_every_primus_variable_the_docs_name_is_one_the_code_reads_or_sets():
    known = code_variables()
    assert {"PRIMUS_FRESH", "PRIMUS_RESUME", "PRIMUS_CONTROL"} <= known
    unknown = {}
    for path in DOCS:
        for name in re.findall(r"\bPRIMUS_[A-Z][A-Z0-9_]*\b", text_of(path)):
            if name not in known and not name.endswith("_"):
                unknown.setdefault(name, path.relative_to(TOP))
    assert not unknown, f"variables the docs name that no code knows: {unknown}"


def shell_blocks():
    for path in DOCS:
        if path.suffix != ".md":
            continue
        for number, block in enumerate(re.findall(r"```(?:bash|sh)\n(.*?)```", path.read_text(),
                                                  re.S)):
            yield pytest.param(block, id=f"{path.relative_to(TOP)}#{number}")
    for path in DOCS:
        if path.suffix in (".sbatch", ".sh"):
            yield pytest.param(path.read_text(), id=str(path.relative_to(TOP)))


@pytest.mark.parametrize("block", list(shell_blocks()))
def test_every_shell_block_is_valid_bash(block):
    done = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def build_packages():
    text = (TOP / "scripts" / "lib" / "packages.sh").read_text()
    block = re.search(r"PRIMUS_BUILD_PACKAGES=\((.*?)\)", text, re.S).group(1)
    return set(block.split())


def test_the_package_lists_are_the_scripts_list():
    wanted = build_packages()
    assert {"libgtest-dev", "libcpp-httplib-dev", "libslurm-dev"} <= wanted
    admin = text_of(TOP / "docs" / "admin-guide.md")
    listed = re.search(r"Debian 12 packages to build: `([^`]*)`", admin).group(1).split()
    assert set(listed) == wanted, (sorted(set(listed) - wanted), sorted(wanted - set(listed)))
    readme = text_of(TOP / "README.md")
    missing = sorted(p for p in wanted if p.endswith("-dev") and p not in readme)
    assert not missing, f"README.md's build section lacks {missing}"


def generated_keys(form):
    done = subprocess.run([str(BUILD / "common" / "tools" / "primus-gen-man"), f"--site-keys={form}"],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_every_plugstack_key_of_the_table_is_in_the_admin_guide_and_spank_primus():
    """spank-primus(8)'s site-default keys are generated from the table at build time, and the
    admin guide's row is the generator's (`make update-docs` rewrites it); the site's own keys
    (framework, port_range, ...) have their own rows in both."""
    rows = re.findall(r'\{"([a-z][a-z_-]*)", "(?:PRIMUS_[A-Z_]*|)", "([a-z_]+)"',
                      (TOP / "common" / "option_table.cpp").read_text())
    keys = {key for _, key in rows}
    assert {"framework", "port_range", "metrics_sd_dir", "max_restarts"} <= keys, keys
    markdown = generated_keys("markdown")
    assert "`max_restarts=`" in markdown and "`port_range=`" not in markdown, markdown
    admin = (TOP / "docs" / "admin-guide.md").read_text()
    assert f"\n| {markdown} | site defaults of the options" in admin, \
        f"docs/admin-guide.md's row of site-default keys is not the table's (make update-docs): {markdown}"
    man = BUILD / "spank-primus.8"
    assert generated_keys("man") in man.read_text(), man
    for doc in (TOP / "docs" / "admin-guide.md", man):
        text = text_of(doc)
        missing = sorted(key for key in keys if f"{key}=" not in text)
        assert not missing, f"{doc} lacks the plugstack keys {missing}"
