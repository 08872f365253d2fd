"""The TensorFlow example (examples/tensorflow/train.py) under `srun --primus=tensorflow` on the
testbed, 2 nodes x 2 ranks. TensorFlow cannot be installed here: the ranks import a stub
`tensorflow` (tests/e2e/tf_stub) that reads TF_CONFIG as TensorFlow's TFConfigClusterResolver
does and has nothing else, so the TF_CONFIG the plugin sets must satisfy TensorFlow's rules and
every primus call runs for real: the workers agree with their Primus ranks, train on their
shares, checkpoint, and a second run resumes from the first one's checkpoint."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parents[1] / "examples" / "tensorflow" / "train.py"
STUB = HERE / "tf_stub"
INIT = "/usr/share/lmod/lmod/init/bash"


def test_the_stub_has_only_what_reads_tf_config():
    code = ("import tensorflow as tf\n"
            "for name in ('keras', 'function'):\n"
            "    try:\n"
            "        getattr(tf, name)\n"
            "    except AttributeError as e:\n"
            "        print(e)\n"
            "try:\n"
            "    tf.distribute.experimental\n"
            "except AttributeError as e:\n"
            "    print(e)\n")
    env = dict(os.environ, PYTHONPATH=str(STUB),
               TF_CONFIG='{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", '
                         '"index": 3}}')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.stdout.splitlines() == ["the test stub of tensorflow has no tf.keras",
                                       "the test stub of tensorflow has no tf.function",
                                       "the test stub of tensorflow has no "
                                       "tf.distribute.experimental"], out.stderr
    bad = subprocess.run([sys.executable, "-c", "import tensorflow as tf; "
                          "tf.distribute.MultiWorkerMirroredStrategy()"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert "task index 3 is not below 1" in bad.stderr


def test_the_tensorflow_example_runs_on_the_plugins_tf_config_and_resumes(testbed, prefix):
    work = testbed.workdir / "tensorflow"
    work.mkdir()
    shutil.copy(EXAMPLE, work / "train.py")
    shutil.copytree(STUB, work / "tf_stub")
    if testbed.as_root:
        os.chown(work, testbed.uid, testbed.gid)
    ckpt = work / "ckpt"

    def run(epochs):
        script = (f". {INIT}; module use {prefix}/share/modulefiles; module load primus; "
                  f"export PYTHONPATH={work}/tf_stub:$PYTHONPATH EPOCHS={epochs}; "
                  f"srun -N2 --ntasks-per-node=2 --primus=tensorflow --primus-ckpt-dir={ckpt} "
                  f"/usr/bin/python3 {work}/train.py")
        return testbed.user_cmd(["bash", "-c", script], timeout=180, cwd=work)

    first = run(5).stdout
    seen = sorted(re.findall(r"worker (\d) of (\d) \(worker, (n\d):(\d+)\)", first))
    assert [(w, n) for w, n, _, _ in seen] == [(str(r), "4") for r in range(4)], first
    assert [node for _, _, node, _ in seen] == ["n1", "n1", "n2", "n2"], first
    assert len({(node, port) for _, _, node, port in seen}) == 4, first
    finished = re.findall(r"worker (\d): finished at step (\d+), accuracy ([\d.]+), weights (\w+)",
                          first)
    assert len(finished) == 4 and {s for _, s, _, _ in finished} == {"100"}, first
    assert len({w for _, _, _, w in finished}) == 1, "the workers' weights differ"
    assert all(float(a) > 0.8 for _, _, a, _ in finished), first
    assert (ckpt / "step-000000000100" / "manifest.json").exists()

    second = run(7).stdout
    assert sorted(re.findall(r"worker (\d): resumed at step 100", second)) == \
        [str(r) for r in range(4)], second
    assert len(re.findall(r"finished at step 140", second)) == 4, second
