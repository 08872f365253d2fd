"""The README's first job, as written, on the testbed (issue 41): its train.py and its batch
script are taken from README.md, not copied into this test, so a change to either is run here.
The job is submitted as a user does, from a shell where Lmod is loaded and primus's modulefile
is on the module path (the admin guide's set-up), with the example's model and a small dataset
written by the installed example's make_data.py in data/ beside train.py."""

import json
import re
import shutil
import subprocess
from pathlib import Path

from slurm_jobs import INIT

README = Path(__file__).resolve().parents[2] / "README.md"
RECORDS, EPOCHS, GLOBAL_BATCH = 256, 10, 64


def first_job():
    """(train.py, the batch script) of the README's "A first job"."""
    section = README.read_text().split("## A first job", 1)[1].split("\n## ", 1)[0]
    python = re.findall(r"```python\n(.*?)```", section, re.S)
    bash = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(python) == 1 and python[0].startswith("# train.py\n"), python
    assert len(bash) == 1 and bash[0].startswith("#!/bin/bash\n#SBATCH"), bash
    return python[0], bash[0]


def test_the_readme_names_the_shape_and_epochs_this_test_checks():
    train, script = first_job()
    assert "--nodes=4 --ntasks-per-node=4" in script and "exec primus-launch" in script, script
    assert f"epochs={EPOCHS}" in train and f"global_batch_size={GLOBAL_BATCH}" in train, train


def test_the_readmes_first_job_runs_on_the_testbed(testbed, prefix):
    train, script = first_job()
    job = testbed.workdir / "first-job"
    (job / "data").mkdir(parents=True)
    (job / "train.py").write_text(train)
    (job / "first.sbatch").write_text(script)
    examples = prefix / "share" / "primus" / "examples" / "cnn"
    shutil.copy(examples / "cnn.py", job / "cnn.py")
    made = subprocess.run(
        ["bash", "-c", f". {INIT} && module use {prefix}/share/modulefiles && module load primus"
                       f" && /usr/bin/python3 {examples}/make_data.py {job}/data --records {RECORDS}"],
        capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    if testbed.as_root:
        shutil.chown(job, testbed.uid, testbed.gid)
        for path in job.rglob("*"):
            shutil.chown(path, testbed.uid, testbed.gid)
    submitted = testbed.user_cmd(
        ["bash", "-c", f". {INIT} && module use {prefix}/share/modulefiles && "
                       "sbatch --parsable first.sbatch"], cwd=job, timeout=30)
    jobid = submitted.stdout.strip().split(";")[0]
    state = testbed.wait_ended([jobid], 420)[jobid]
    output = (job / f"slurm-{jobid}.out").read_text()
    assert state == "COMPLETED", output[-4000:]
    steps = RECORDS // GLOBAL_BATCH * EPOCHS
    # Rank 0 of primus.train talks once per epoch; the launcher started 4 x 4 ranks, once.
    epochs = re.findall(r"primus.train: epoch (\d+)/(\d+): step (\d+)/(\d+)", output)
    assert [int(e[0]) for e in epochs] == list(range(1, EPOCHS + 1)), output[-4000:]
    assert epochs[-1][2:] == (str(steps), str(steps)), epochs
    events = [json.loads(line) for line in
              (job / f"primus-{jobid}" / "events.jsonl").read_text().splitlines()]
    launched = [e["details"] for e in events if e["event"] == "launched"]
    assert [(d["ranks"], d["mode"]) for d in launched] == [("16", "slurm")], launched
    assert events[-1]["event"] == "finished", events[-1]
    committed = sorted(p.name for p in (job / f"primus-{jobid}" / "ckpt").glob("step-*"))
    assert committed and committed[-1] == f"step-{steps:012d}", committed
