"""Compares the newest checkpoints of two runs (scripts/quickstart): the same step, and every
tensor and value of the state bit for bit. Exits 0 when they are equal, 1 otherwise."""

import sys

import numpy as np

from primus import checkpoint


def leaves(tree, prefix=""):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from leaves(value, f"{prefix}{key}.")
    elif isinstance(tree, (list, tuple)):
        for i, value in enumerate(tree):
            yield from leaves(value, f"{prefix}{i}.")
    else:
        yield prefix[:-1], np.asarray(tree)


def main():
    first, second = (checkpoint.load(dir=d, rank=0, world_size=1) for d in sys.argv[1:3])
    if first is None or second is None:
        print("same-checkpoints: a run has no checkpoint", file=sys.stderr)
        return 1
    a, b = dict(leaves(first.state)), dict(leaves(second.state))
    differ = sorted(k for k in a.keys() | b.keys()
                    if k not in a or k not in b or a[k].tobytes() != b[k].tobytes())
    same = not differ and first.step == second.step
    print(f"final checkpoints: step {first.step} (never interrupted) and step {second.step} "
          f"(preempted, requeued, resumed): {len(a)} tensors and values, "
          f"{'bitwise equal' if same else 'DIFFERENT: ' + ', '.join(differ[:5])}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
