"""One rank of the training benchmark (bench_train.py): the CNN example trained one of two ways on
the same TFRecord files, every rank writing what it timed to OUTDIR/SIDE-RUN-rank-R.json.

    primus-launch -- python3 train_cnn_rank.py primus    the example's train.py (primus.train:
                                                        primus.ddp, primus.data, asynchronous
                                                        checkpoints every CHECKPOINT_EVERY steps, should_stop)
    srun python3 train_cnn_rank.py plain                 the same model, optimizer, schedule,
                                                        batch and loop in plain PyTorch: env://
                                                        from Slurm's variables, DDP, a
                                                        DistributedSampler over the records,
                                                        rank 0 torch.save()s as often

Both record the time at the end of every step, before that step's checkpoint, the process's CPU
time there (every thread: gloo's and the checkpoint writer's too), and how long each checkpoint
call held the loop. Environment: EXAMPLE (examples/cnn), DATA (the files' glob),
EPOCHS, OUTDIR, RUN, CHECKPOINT_EVERY (10); for the plain side MASTER_ADDR and MASTER_PORT, and
CKPT_DIR."""

import glob
import json
import os
import struct
import sys
import time
from pathlib import Path

import torch

EXAMPLE = Path(os.environ["EXAMPLE"])
sys.path.insert(0, str(EXAMPLE))
import cnn  # noqa: E402

CHECKPOINT_EVERY = int(os.environ.get("CHECKPOINT_EVERY", "10"))
LOG_EVERY = 5
GLOBAL_BATCH = 64


def report(side, rank, step_ends, step_cpu, saves):
    out = Path(os.environ["OUTDIR"]) / f"{side}-{os.environ['RUN']}-rank-{rank}.json"
    out.write_text(json.dumps({"side": side, "rank": rank, "step_ends": step_ends,
                               "step_cpu": step_cpu, "saves": saves}))


def run_primus():
    import primus
    import primus.checkpoint
    import train as example  # examples/cnn/train.py

    torch.set_num_threads(1)
    saves, step_ends, step_cpu = [], [], []
    save = primus.checkpoint.save

    def timed_save(*args, **kwargs):
        begin = time.perf_counter()
        result = save(*args, **kwargs)
        if not kwargs.get("blocking", True):  # the periodic ones (the last save blocks)
            saves.append(time.perf_counter() - begin)
        return result

    primus.checkpoint.save = timed_save
    os.environ["PRIMUS_DATA"] = os.environ["DATA"]
    def on_step(info):
        step_ends.append(time.perf_counter())
        step_cpu.append(time.process_time())

    example.main(on_step=on_step)
    report("primus", primus.init().rank, step_ends, step_cpu, saves)


class TFRecordFile(torch.utils.data.Dataset):
    """The records of TFRecord files, by number: an index of offsets from one pass over the
    headers, then one pread a record (CRCs are not checked, as most readers do not)."""

    def __init__(self, pattern):
        self.files, self.index = sorted(glob.glob(pattern)), []
        for number, path in enumerate(self.files):
            with open(path, "rb") as f:
                data = f.read()
            at = 0
            while at < len(data):
                (length,) = struct.unpack_from("<Q", data, at)
                self.index.append((number, at + 12, length))
                at += 16 + length
        self.fds = None

    def __len__(self):
        return len(self.index)

    def __getitem__(self, i):
        if self.fds is None:
            self.fds = [os.open(path, os.O_RDONLY) for path in self.files]
        number, offset, length = self.index[i]
        return cnn.decode(os.pread(self.fds[number], length, offset))


def run_plain():
    import torch.distributed as dist

    torch.set_num_threads(1)
    rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    torch.manual_seed(1)
    model = cnn.SmallCNN()
    net = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.5)
    data = TFRecordFile(os.environ["DATA"])
    sampler = torch.utils.data.distributed.DistributedSampler(data, num_replicas=world,
                                                              rank=rank, seed=0, drop_last=True)
    loader = torch.utils.data.DataLoader(data, batch_size=GLOBAL_BATCH // world, sampler=sampler,
                                         drop_last=True)
    torch.manual_seed(1000 + rank)
    ckpt = Path(os.environ["CKPT_DIR"])
    saves, step_ends, step_cpu, step = [], [], [], 0
    for epoch in range(int(os.environ.get("EPOCHS", "3"))):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            net.train()
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(net(images), labels)
            loss.backward()
            optimizer.step()
            schedule.step()
            step += 1
            step_ends.append(time.perf_counter())
            step_cpu.append(time.process_time())
            if step % LOG_EVERY == 0 and rank == 0:
                print(f"step {step} loss {float(loss):.4f}", flush=True)
            if step % CHECKPOINT_EVERY == 0 and rank == 0:
                begin = time.perf_counter()
                state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                         "lr_scheduler": schedule.state_dict(), "step": step, "epoch": epoch}
                torch.save(state, ckpt / "tmp.pt")
                os.replace(ckpt / "tmp.pt", ckpt / f"step-{step}.pt")
                old = ckpt / f"step-{step - 2 * CHECKPOINT_EVERY}.pt"  # keep the last 2
                if old.exists():
                    old.unlink()
                saves.append(time.perf_counter() - begin)
    report("plain", rank, step_ends, step_cpu, saves)
    dist.destroy_process_group()


if __name__ == "__main__":
    {"primus": run_primus, "plain": run_plain}[sys.argv[1]]()
