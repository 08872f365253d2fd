"""The two modulefiles the build makes (modulefiles/<version>.lua for Lmod, modulefiles/<version>
in Tcl for Environment Modules), each alone in a moved tree, as Lmod loads them: the same
settings, relative to where the tree lies (issue 41: only the Lua one was shipped)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

BUILD = Path(os.environ.get("PRIMUS_BUILD_DIR", ".")).resolve()
LMOD = Path("/usr/share/lmod/lmod/init/bash")


def load(tree):
    script = (f". {LMOD}; module use {tree}/share/modulefiles; module load primus; "
              "echo \"ROOT=$PRIMUS_ROOT\"; echo \"PATH=${PATH%%:*}\"; "
              "echo \"PYTHONPATH=${PYTHONPATH%%:*}\"; echo \"MANPATH=${MANPATH%%:*}\"; "
              "echo \"EXAMPLES=$PRIMUS_EXAMPLES\"")
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tree)})
    assert done.returncode == 0, done.stderr
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


@pytest.mark.parametrize("suffix", [".lua", ""], ids=["lua", "tcl"])
def test_each_modulefile_sets_the_moved_trees_paths(tmp_path, suffix):
    if not LMOD.exists():
        pytest.fail("Lmod is not installed (Debian package lmod)")
    made = sorted(p for p in (BUILD / "modulefiles").iterdir()
                  if p.name[:1].isdigit() and p.name.endswith(".lua") == (suffix == ".lua"))
    assert len(made) == 1, f"{BUILD}/modulefiles: {made}"
    where = tmp_path / "share" / "modulefiles" / "primus"
    where.mkdir(parents=True)
    shutil.copy(made[0], where / made[0].name)
    got = load(tmp_path)
    assert got["ROOT"] == str(tmp_path), got
    assert got["PATH"] == f"{tmp_path}/bin", got
    assert got["PYTHONPATH"].startswith(f"{tmp_path}/lib"), got
    assert got["MANPATH"] == f"{tmp_path}/share/man", got
    assert got["EXAMPLES"] == f"{tmp_path}/share/primus/examples", got


def test_the_plugstack_snippet_names_the_plugin_where_it_is_installed():
    snippet = BUILD / "spank" / "primus.conf"
    lines = [line for line in snippet.read_text().splitlines()
             if line and not line.startswith("#")]
    makefile = (BUILD / "Makefile").read_text()
    libdir = next(line.split("=", 1)[1].strip() for line in makefile.splitlines()
                  if line.startswith("libdir ="))
    prefix = next(line.split("=", 1)[1].strip() for line in makefile.splitlines()
                  if line.startswith("prefix ="))
    assert lines == [f"required {libdir.replace('${exec_prefix}', prefix)}/primus/primus.so"], \
        lines


def test_the_examples_install_with_their_modes(tmp_path):
    """Issue 41: every installed example was mode 0644, though salloc.sh's own header says
    ./salloc.sh; the scripts and sbatch files are executable, the rest plain files."""
    targets = ["install-dist_cnnexampleSCRIPTS", "install-dist_cnnexampleDATA",
               "install-dist_exampleDATA", "install-dist_tfexampleSCRIPTS"]
    done = subprocess.run(["make", "-C", str(BUILD), "-s", *targets, f"prefix={tmp_path}"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    examples = tmp_path / "share" / "primus" / "examples"
    modes = {str(p.relative_to(examples)): p.stat().st_mode & 0o777
             for p in examples.rglob("*") if p.is_file()}
    executable = {"cnn/make_data.py", "cnn/train.py", "cnn/train_loop.py", "cnn/plain.sbatch",
                  "cnn/preemptible.sbatch", "cnn/array.sbatch", "cnn/salloc.sh",
                  "tensorflow/train.py"}
    assert {name for name, mode in modes.items() if mode & 0o111} == executable, modes
    assert {"README.md", "cnn/README.md", "cnn/cnn.py"} <= set(modes), modes
