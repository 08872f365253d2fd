#!/usr/bin/env python3
"""A TensorFlow job under Primus: `srun --primus=tensorflow python3 train.py` (or
`#SBATCH --primus=tensorflow` and `exec primus-launch -- python3 train.py`).

The plugin sets TF_CONFIG, which tf.distribute.MultiWorkerMirroredStrategy reads to find the
other workers; primus.init(torch=False) gives the rank, the stop signal and the checkpoints
without torch. The model here is a small softmax classifier kept in numpy, its gradients
averaged with primus.comm, so that what the example shows is the wiring: the strategy's
cluster, the rank's share of the data (primus.data over a list of samples), should_stop() and
numpy checkpoints that resume exactly. In a Keras program the same calls go around
`strategy.run(train_step)` (docs/user-guide.md, TensorFlow).
"""

import os
import sys

import numpy as np
import tensorflow as tf

import primus
import primus.data
from primus import checkpoint, comm

FEATURES, CLASSES, SAMPLES, GLOBAL_BATCH = 8, 3, 960, 48


def samples():
    rng = np.random.default_rng(5)
    centers = rng.normal(0, 2, (CLASSES, FEATURES))
    labels = rng.integers(CLASSES, size=SAMPLES)
    points = centers[labels] + rng.normal(0, 1, (SAMPLES, FEATURES))
    return [(points[i], int(labels[i])) for i in range(SAMPLES)]


def gradient(weights, points, labels):
    logits = points @ weights
    logits -= logits.max(axis=1, keepdims=True)
    probabilities = np.exp(logits)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    probabilities[np.arange(len(labels)), labels] -= 1
    return points.T @ probabilities / GLOBAL_BATCH


def main():
    job = primus.init(torch=False)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # the cluster from TF_CONFIG
    resolver = strategy.cluster_resolver
    workers = resolver.cluster_spec().as_dict()["worker"]
    if resolver.task_id != job.rank or len(workers) != job.world_size:
        sys.exit(f"TF_CONFIG says worker {resolver.task_id} of {len(workers)}, Primus says rank "
                 f"{job.rank} of {job.world_size}")
    print(f"worker {resolver.task_id} of {strategy.num_replicas_in_sync} "
          f"({resolver.task_type}, {workers[resolver.task_id]})", flush=True)

    data = primus.data.Dataset(samples(), global_batch_size=GLOBAL_BATCH, drop_last=True)
    weights = np.zeros((FEATURES, CLASSES))
    step = 0
    restored = checkpoint.load()
    if restored is not None:
        weights = np.array(restored.state["weights"])
        data.load_state_dict(restored.data_cursor)
        step = restored.step
        print(f"worker {job.rank}: resumed at step {step}", flush=True)
    peers = comm.connect()
    for epoch in data.epochs(int(os.environ.get("EPOCHS", "5"))):
        for batch in epoch:
            points = np.stack([p for p, _ in batch])
            labels = np.array([y for _, y in batch])
            grad = gradient(weights, points, labels)
            peers.allreduce(grad)  # the sum over the workers' shares: the global batch's mean
            weights -= 0.5 * grad
            step += 1
            if primus.should_stop():
                checkpoint.save({"weights": weights}, step, data_cursor=data.state_dict())
                print(f"worker {job.rank}: stopped at step {step}", flush=True)
                sys.exit(primus.EXIT_PREEMPTED)
    checkpoint.save({"weights": weights}, step, data_cursor=data.state_dict(), keep_last=2)
    points = np.stack([p for p, _ in samples()])
    labels = np.array([y for _, y in samples()])
    accuracy = float(((points @ weights).argmax(axis=1) == labels).mean())
    print(f"worker {job.rank}: finished at step {step}, accuracy {accuracy:.3f}, weights "
          f"{weights.tobytes().hex()[:16]}", flush=True)


if __name__ == "__main__":
    main()
