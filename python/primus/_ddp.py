"""primus.ddp(model): torch's DistributedDataParallel set up so that a resumed run is bitwise equal
to an uninterrupted one (docs/architecture.md, "The rank-side API").

Plain DDP lays its gradient buckets out in the reverse order of model.parameters(), then, after
the first iteration, rebuilds them in the order the gradients became ready (torch 1.13's reducer:
no rebuild only with find_unused_parameters). A run resumed from a checkpoint starts again with
the first layout, so its first step reduces the gradients in another arrangement than the
uninterrupted run did at that step; above two ranks the ring's partial sums then round
differently, and the bits part. With find_unused_parameters=True the reducer never rebuilds: every
step of every run reduces in the same layout. It costs one traversal of the autograd graph per
step (measured against plain DDP by tests/bench/bench_launch_slurm.py).

The gradients are all-reduced by torch's own allreduce hook (which DDP documents as giving the
results of no hook), wrapped to time the first bucket of every step: how long this rank waits
for the others there is how the monitor sees a rank that is slow before its backward pass
(docs/architecture.md, "The monitor").
"""


def ddp(model, **kwargs):
    """`model` wrapped in DistributedDataParallel for exact resumes (see the module's text); the
    keyword arguments go to DistributedDataParallel. In a world of one (no torch.distributed
    process group) the model comes back as it is. find_unused_parameters=False and
    static_graph=True are refused: both let the reducer rebuild its buckets. Refused in the
    dynamic data mode, whose ranks do not step together."""
    import os

    if os.environ.get("PRIMUS_DATA_MODE") == "dynamic":
        raise RuntimeError("primus.ddp: --primus-data-mode=dynamic has no step that every rank "
                           "takes together, and DDP all-reduces the gradients at every step "
                           "(the ranks would wait for each other forever); use the static "
                           "split for synchronous training")
    import torch
    import torch.distributed as dist

    from . import _runtime

    for name, bad in (("find_unused_parameters", False), ("static_graph", True)):
        if name in kwargs and kwargs[name] is bad:
            raise ValueError(f"primus.ddp: {name}={bad} lets DDP rebuild its gradient buckets "
                             "after the first step, and a resumed run would not be bitwise "
                             "equal to an uninterrupted one; leave it out")
    _runtime.init()
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return model
    kwargs["find_unused_parameters"] = True
    wrapped = torch.nn.parallel.DistributedDataParallel(model, **kwargs)
    wrapped.register_comm_hook(None, _timed_allreduce)
    return wrapped


def _timed_allreduce(state, bucket):
    """torch's allreduce hook; for bucket 0, the first one ready in a step, the time from this
    rank's contribution to the sum goes to the heartbeats."""
    import time

    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    from . import _control

    if bucket.index() != 0:
        return default_hooks.allreduce_hook(state, bucket)
    started = time.perf_counter()

    def timed(future):
        _control.gradient_waited(time.perf_counter() - started)
        return future.value()

    return default_hooks.allreduce_hook(state, bucket).then(timed)
