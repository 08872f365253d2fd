"""primus.checkpoint as installed (make install, module load primus) in a real multi-node job:
four ranks on four nodes agree through torch.distributed (gloo) and save a sharded and a
replicated tensor into PRIMUS_CKPT_DIR; a second job of two ranks loads it into its new world
size; primus-ckpt verifies it."""

import re

SAVE = r'''
import numpy as np, torch, torch.distributed as dist
from primus import checkpoint
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
rows = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
begin, end = 8 * rank // world, 8 * (rank + 1) // world
state = {"emb": checkpoint.Shard(torch.from_numpy(rows[begin:end].copy()), [8, 3], [begin, 0]),
         "head": torch.full((2, 2), 7.0), "opt": {"lr": 0.5, "step": 3}}
path = checkpoint.save(state, 42, epoch=1, data_cursor={"seen": 96})
print("SAVED", rank, path, flush=True)
dist.destroy_process_group()
'''

LOAD = r'''
import numpy as np, torch
from primus import checkpoint
r = checkpoint.load(full_verify=True)
rank, world = int(__import__("os").environ["RANK"]), int(__import__("os").environ["WORLD_SIZE"])
rows = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
begin, end = 8 * rank // world, 8 * (rank + 1) // world
ok = (r.step == 42 and r.saved_world_size == 4 and r.data_cursor == {"seen": 96}
      and torch.equal(r.state["emb"], torch.from_numpy(rows[begin:end].copy()))
      and torch.equal(r.state["head"], torch.full((2, 2), 7.0)) and r.state["opt"]["lr"] == 0.5)
print("LOADED", rank, r.step, "ok" if ok else "MISMATCH", flush=True)
'''


def run_in_module(testbed, prefix, body):
    init = "/usr/share/lmod/lmod/init/bash"
    return testbed.user_cmd(["bash", "-c", f". {init} && module use {prefix}/share/modulefiles "
                             f"&& module load primus && {body}"], timeout=180)


def test_four_ranks_save_two_ranks_load(testbed, prefix):
    ckpt = testbed.workdir / "ckpt-e2e"
    save = testbed.write_script("save.py", SAVE)
    load = testbed.write_script("load.py", LOAD)
    out = run_in_module(testbed, prefix,
                        f"srun -N4 -n4 --primus --primus-ckpt-dir={ckpt} /usr/bin/python3 {save}")
    saved = re.findall(r"SAVED (\d) (\S+)", out.stdout)
    assert sorted(int(r) for r, _ in saved) == [0, 1, 2, 3], out.stdout + out.stderr
    assert {p for _, p in saved} - {"None"} == {str(ckpt / "step-000000000042")}
    files = sorted(p.name for p in (ckpt / "step-000000000042").iterdir())
    assert files == ["manifest.json", "rank-00000.h5", "rank-00001.h5", "rank-00002.h5",
                     "rank-00003.h5"]

    out = run_in_module(testbed, prefix,
                        f"srun -N2 -n2 --primus --primus-ckpt-dir={ckpt} /usr/bin/python3 {load}")
    assert sorted(re.findall(r"LOADED (\d) 42 (\S+)", out.stdout)) == [("0", "ok"), ("1", "ok")], \
        out.stdout + out.stderr

    out = run_in_module(testbed, prefix, f"primus-ckpt verify {ckpt}")
    assert out.returncode == 0, out.stdout + out.stderr
