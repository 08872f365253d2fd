"""primus.data on the testbed (4 nodes x 2 ranks, installed with make install, module load
primus): the static split through primus-launch reads every record exactly once per epoch; the
dynamic split hands out splits so that faster ranks read more and, after a rank killed mid-split
and a restart, reads every record exactly once relative to the committed checkpoint; a bad
dataset stops primus-launch before any rank starts, and under a plain srun every rank fails with
the same message."""

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

PYTHON_TESTS = Path(__file__).resolve().parents[1] / "python"
sys.path.insert(0, str(PYTHON_TESTS))
from data_oracle import kept_records  # noqa: E402

INIT = "/usr/share/lmod/lmod/init/bash"
RECORDS = 24000


def make_dir(testbed, path):
    path.mkdir(parents=True)
    if testbed.as_root:
        os.chown(path, testbed.uid, testbed.gid)
    return path


def give(testbed, path):
    if testbed.as_root:
        os.chown(path, testbed.uid, testbed.gid)


@pytest.fixture(scope="module")
def lines_dataset(testbed):
    """RECORDS numbered lines in five files of uneven sizes (one empty, one much larger)."""
    data = make_dir(testbed, testbed.workdir / "dataset")
    sizes = [500, 0, 17000, 3000, RECORDS - 20500]
    i = 0
    for f, size in enumerate(sizes):
        path = data / f"part-{f}.txt"
        path.write_text("".join(f"{i + k}\n" for k in range(size)))
        give(testbed, path)
        i += size
    return data


def job(testbed, prefix, name, script, launch, env):
    """Runs `script` under primus-launch in an sbatch job of 4 nodes x 2 ranks; returns
    (state, its directory, its output)."""
    work = make_dir(testbed, testbed.workdir / name)
    shutil.copy(PYTHON_TESTS / script, work / script)
    give(testbed, work / script)
    batch = work / "job.sh"
    batch.write_text(
        "#!/bin/bash\n"
        f"#SBATCH -N4 --ntasks-per-node=2 -o {work}/job.out\n"
        f". {INIT}; module use {prefix}/share/modulefiles; module load primus\n"
        f"export OMP_NUM_THREADS=1 OUT={work} {env}\n"
        f"exec primus-launch {launch} -- /usr/bin/python3 {work}/{script}\n")
    give(testbed, batch)
    jobid = testbed.user_cmd(["sbatch", "--parsable", str(batch)], timeout=30,
                             cwd=work).stdout.strip().split(";")[0]
    state = testbed.wait_ended([jobid], 240)[jobid]
    out = (work / "job.out").read_text() if (work / "job.out").exists() else ""
    return state, work, out, jobid


def test_the_static_split_reads_every_record_once_per_epoch_on_four_nodes(
        testbed, prefix, lines_dataset):
    state, work, out, _ = job(
        testbed, prefix, "data-static", "read_data.py", "",
        f"PRIMUS_DATA={lines_dataset} PRIMUS_DATA_FORMAT=lines PRIMUS_GLOBAL_BATCH_SIZE=1000 "
        "PRIMUS_SEED=5 EPOCHS=2")
    assert state == "COMPLETED", out[-4000:]
    batches = {}
    for rank in range(8):
        for line in (work / f"rank-{rank}.jsonl").read_text().splitlines():
            entry = json.loads(line)
            assert entry["world"] == 8
            batches.setdefault((entry["epoch"], entry["step"]), {})[rank] = entry["ids"]
    steps = {key: len(shares) for key, shares in batches.items()}
    assert set(steps.values()) == {8}, "every rank takes every step"
    for epoch in (0, 1):
        ids = [i for (e, _), shares in batches.items() if e == epoch
               for r in range(8) for i in shares[r]]
        assert sorted(ids) == list(range(RECORDS)), f"epoch {epoch}"
    events = [json.loads(l)["event"] for l in
              (work / next(p.name for p in work.iterdir() if p.name.startswith("primus-")) /
               "events.jsonl").read_text().splitlines()]
    assert "dataset-checked" in events, events


def test_the_dynamic_split_survives_a_rank_killed_mid_split_and_fast_ranks_read_more(
        testbed, prefix, lines_dataset):
    state, work, out, _ = job(
        testbed, prefix, "data-dynamic", "read_dynamic.py", "--primus-max-restarts=1",
        f"PRIMUS_DATA={lines_dataset} PRIMUS_DATA_FORMAT=lines PRIMUS_DATA_MODE=dynamic "
        "PRIMUS_GLOBAL_BATCH_SIZE=80 EPOCHS=2 CKPT_EVERY=10 SLOW_RANK=5 SLOW_SECONDS=0.03 "
        "SLEEP_SECONDS=0.003 "
        "FAIL_RANK=6 FAIL_AT=15")
    assert state == "COMPLETED", out[-4000:]
    assert "rank 6 on n4 failed first: exit status 3 (attempt 0)" in out, out[-4000:]
    kept, by_rank = kept_records(work)
    for epoch in (0, 1):
        assert sorted(kept[epoch]) == list(range(RECORDS)), f"epoch {epoch}"
    slow = by_rank.get(5, 0)
    fast = [by_rank.get(r, 0) for r in (0, 1, 2, 3, 4, 7)]
    assert min(fast) > slow, by_rank


def test_a_bad_dataset_stops_primus_launch_before_any_rank_and_fails_every_plain_rank(
        testbed, prefix):
    bad = make_dir(testbed, testbed.workdir / "bad-dataset")
    (bad / "a.bin").write_bytes(b"x" * 16)
    (bad / "b.bin").write_bytes(b"y" * 10)
    for name in ("a.bin", "b.bin"):
        give(testbed, bad / name)
    expected = f"{bad}/b.bin: byte offset 8: truncated record"
    state, work, out, _ = job(
        testbed, prefix, "data-bad", "read_data.py", "",
        f"PRIMUS_DATA={bad} PRIMUS_DATA_FORMAT=fixed:8 PRIMUS_GLOBAL_BATCH_SIZE=2")
    assert state == "FAILED", out[-4000:]
    assert "cannot be read; no rank was started: " + expected in out, out[-4000:]
    assert not list(work.glob("rank-*.jsonl")), "a rank started"
    # Under a plain srun each rank opens the dataset itself and says the same.
    res = testbed.user_cmd(
        ["bash", "-c",
         f". {INIT}; module use {prefix}/share/modulefiles; module load primus; "
         f"srun -N2 -n4 --primus --primus-data={bad} --primus-data-format=fixed:8 "
         "--primus-global-batch-size=2 /usr/bin/python3 -c "
         "'import primus.data; primus.data.Dataset()'"], timeout=120, check=False)
    assert res.returncode != 0
    assert (res.stdout + res.stderr).count(expected) == 4, res.stdout + res.stderr
