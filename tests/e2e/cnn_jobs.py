"""The CNN example's batch jobs, shared by the end-to-end training tests (test_train.py, and
long/test_time_limit.py): its dataset written by the example's make_data.py, a job of the
example under `exec primus-launch` that traces every step (tests/python/train_cnn.py), and the
uninterrupted run that every interrupted one must end bitwise equal to. Import the fixtures
`dataset` and `reference` into a test module to use them."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from slurm_jobs import Launch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
import train_oracle  # noqa: E402

HARNESS = HERE.parent / "python" / "train_cnn.py"
EXAMPLE = HERE.parents[1] / "examples" / "cnn"
RECORDS, GLOBAL_BATCH, EPOCHS = 1024, 64, 3
STEPS_PER_EPOCH = RECORDS // GLOBAL_BATCH


def write_dataset(testbed, prefix, records):
    """The example's dataset of `records` records, written by its make_data.py with the installed
    package into a new folder of the testbed's work directory."""
    where = Path(tempfile.mkdtemp(prefix=f"cnn-data-{records}-", dir=testbed.workdir))
    env = dict(os.environ, PYTHONPATH=str(next(prefix.glob("lib/python3*/*-packages"))),
               LD_LIBRARY_PATH=str(prefix / "lib"))
    result = subprocess.run(["/usr/bin/python3", str(EXAMPLE / "make_data.py"), str(where),
                             "--records", str(records)], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    for path in where.iterdir():
        os.chmod(path, 0o644)
    os.chmod(where, 0o777)  # the ranks write the index beside the data
    return where


@pytest.fixture(scope="module")
def dataset(testbed, prefix):
    """The example's dataset (RECORDS records)."""
    return write_dataset(testbed, prefix, RECORDS)


class CnnJob(Launch):
    def __init__(self, testbed, prefix, name, dataset, layout="-N4 --ntasks-per-node=2"):
        super().__init__(testbed, prefix, name, layout=layout, program=HARNESS)
        self.example = self.dir / "cnn"
        shutil.copytree(EXAMPLE, self.example)
        self.trace = self.dir / "trace"
        self.trace.mkdir()
        self.ckpt_events = self.dir / "ckpt-events"
        if testbed.as_root:
            for path in (self.trace, self.example):
                os.chown(path, testbed.uid, testbed.gid)
        self.dataset = dataset

    def submit(self, *, sbatch="", launch="", env="", exec_="exec "):
        base = (f"EXAMPLE={self.example} PRIMUS_DATA='{self.dataset}/*.tfrecord' "
                f"EPOCHS={EPOCHS} TRACE={self.trace} TRACE_RUN={self.name} "
                f"CKPT_EVENTS={self.ckpt_events}")
        return super().submit(sbatch=sbatch, launch=launch, env=f"{base} {env}", exec_=exec_)

    def checkpoint_started(self, step):
        path = self.ckpt_events
        return path.exists() and f"started {step}\n" in path.read_text()

    def exactly_once(self):
        return train_oracle.check_exactly_once(train_oracle.read_trace(self.trace), RECORDS,
                                               EPOCHS, STEPS_PER_EPOCH)

    def stopped_at(self):
        found = re.findall(r"primus.train: stopped at step (\d+)", self.output())
        return [int(s) for s in found]


@pytest.fixture(scope="module")
def reference(request, testbed, prefix, dataset):
    name = request.module.__name__.rsplit(".", 1)[-1]
    run = CnnJob(testbed, prefix, f"cnn-reference-{name}", dataset)
    run.submit()
    assert run.wait_ended() == "COMPLETED", run.output()[-4000:]
    return run
