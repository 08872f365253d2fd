"""The environment of a job that a test starts (under primus-launch, or as a plain script): this
process's, without the variables of an enclosing Slurm job or Primus job, with this Python's
import path, one OpenMP thread, quiet glog, and `extra` on top. Shared by test_train.py and the
fault campaign (tests/faults)."""

import os
import sys


def job_environment(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "PRIMUS_", "RANK", "WORLD_SIZE", "LOCAL_"))}
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    env.update(OMP_NUM_THREADS="1", GLOG_minloglevel="2")
    env.update({k: str(v) for k, v in extra.items()})
    return env
