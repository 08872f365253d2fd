"""primus.ddp(model): torch's DistributedDataParallel set up so that a resumed run is bitwise equal
to an uninterrupted one (docs/architecture.md, "The rank-side API").

Plain DDP lays its gradient buckets out in the reverse order of model.parameters(), then, after
the first iteration, rebuilds them in the order the gradients became ready (torch 1.13's reducer:
no rebuild only with find_unused_parameters). A run resumed from a checkpoint starts again with
the first layout, so its first step reduces the gradients in another arrangement than the
uninterrupted run did at that step; above two ranks the ring's partial sums then round
differently, and the bits part. primus.ddp therefore has the reducer rebuild before the first
real step of every run: at the first forward pass that will synchronise gradients it first
rehearses that pass, with a backward pass of the sum of the outputs, and undoes the rehearsal's
effects (the parameters' gradients, the buffers, the random generators). The rebuild follows the order in which that pass made the
gradients ready, which depends on the model's graph, not on the data: every step of every run
reduces in the same layout. It costs one forward and backward pass per run, where keeping the
first layout with find_unused_parameters=True (what primus.ddp did before) costs an all-reduce of
the used-parameter map and a walk of the autograd graph at every step (about 15 % of the CNN
example's throughput at 8 ranks on this machine's two cores; tests/bench/bench_train.py).
find_unused_parameters=True stays available for models that need it: that reducer never
rebuilds.

On the CPU the gradients are summed by primus.comm through a communication hook
(primus/_grad_allreduce.py: fewer rounds than gloo's ring, on the calling thread, bitwise alike
on every rank), and the buffers' broadcast before each forward pass (BatchNorm's statistics)
goes through primus.comm as well, so that every collective of a step can be aborted at a
peer's failure (a rejoin: docs/architecture.md, "Recovery without a restart"); a GPU model, NCCL, a process group of the caller's or allreduce="torch" keep
DDP's own C++ path. No hook ever runs Python on gloo's threads: one that timed the first bucket
there (what primus.ddp had) cost about 3 % of the CPU of the CNN example's steps at 8 ranks on
this machine's two cores. The monitor instead times the gradient all-reduce's wait on the backward pass's own thread: a tensor
hook on the parameter that the backward pass reaches last (the model's first) notes when this
rank computed its last gradient, and a callback of the autograd engine, queued behind the
reducer's own end-of-backward callback (which waits for the all-reduce), notes when the
gradients were summed (docs/architecture.md, "The monitor"). It times a pass at most every
GRADIENT_WAIT_EVERY seconds (every pass of steps longer than that): the monitor wants the
waits' median, which a sample gives as well, and the callbacks cost about 10 us a step.

should_stop()'s agreement is its own all-reduce every few steps (primus/_agreement.py). It
rode the gradients' all-reduce at every step before (a tensor of primus's among the reducer's
parameters, whose gradient the hook set to this rank's flags through a nested backward pass):
that cost primus.ddp about 110 us per rank and step, 2 % of the CNN example's step here, where
an agreement every half second costs a few microseconds a step (docs/performance.md).
"""

import time

_stable_class = None
# The gradient wait is timed at most this often (seconds): the monitor takes a median of the
# waits, which a sample of the steps gives as well as all of them, and the timer's two
# autograd-engine callbacks cost about 10 us of CPU a step (docs/performance.md).
GRADIENT_WAIT_EVERY = 0.1


def ddp(model, *, allreduce="primus", **kwargs):
    """`model` wrapped in DistributedDataParallel for exact resumes (see the module's text); the
    other keyword arguments go to DistributedDataParallel. In a world of one (no
    torch.distributed process group) the model comes back as it is. static_graph=True is
    refused: it lets the reducer rebuild its buckets after the first step. Refused in the
    dynamic data mode, whose ranks do not step together.

    `allreduce`: "primus" (the default) sums the gradients of a CPU model on the default gloo
    process group through primus.comm, faster than gloo and bitwise the same on every rank
    (primus/_grad_allreduce.py; a GPU model, NCCL or a process_group of your own keep torch's
    all-reduce); "torch" keeps torch's (for a communication hook of your own:
    register_comm_hook takes one hook per model)."""
    from . import _env

    if allreduce not in ("primus", "torch"):
        raise ValueError(f"primus.ddp: allreduce: expected 'primus' or 'torch', got "
                         f"{allreduce!r}")

    if _env.given("PRIMUS_DATA_MODE") == "dynamic":
        raise RuntimeError("primus.ddp: --primus-data-mode=dynamic has no step that every rank "
                           "takes together, and DDP all-reduces the gradients at every step "
                           "(the ranks would wait for each other forever); use the static "
                           "split for synchronous training")
    import torch.distributed as dist

    from . import _runtime

    if kwargs.get("static_graph") is True:
        raise ValueError("primus.ddp: static_graph=True lets DDP rebuild its gradient buckets "
                         "after the first step, and a resumed run would not be bitwise equal "
                         "to an uninterrupted one; leave it out")
    _runtime.init()
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return model
    wrapped = _stable_buckets_class()(model, **kwargs)
    if (allreduce == "primus" and kwargs.get("process_group") is None
            and dist.get_backend() == "gloo"
            and all(p.device.type == "cpu" for p in model.parameters())):
        from ._grad_allreduce import GradientAllreduce

        summer = GradientAllreduce(_runtime._communicator(), dist.get_world_size())
        wrapped.register_comm_hook(None, summer.hook)
        wrapped._primus_communicator = _runtime._communicator()
    last = next((p for p in model.parameters() if p.requires_grad), None)
    if last is not None:
        last.register_hook(_last_gradient_hook())
    return wrapped


def _stable_buckets_class():
    """DistributedDataParallel whose reducer rebuilds its buckets before the first real step."""
    global _stable_class
    if _stable_class is not None:
        return _stable_class
    import torch
    from torch.nn.parallel.distributed import _find_tensors

    class StableBucketsDDP(torch.nn.parallel.DistributedDataParallel):
        _primus_rebuild_pending = True
        # primus.comm's communicator where it sums the gradients: the buffers' broadcast at
        # each forward pass goes through it too (below).
        _primus_communicator = None

        def _distributed_broadcast_coalesced(self, tensors, buffer_size, authoritative_rank=0):
            """The buffers' broadcast before each forward pass (BatchNorm's statistics from
            rank 0): through primus.comm where it sums the gradients, so that a peer's failure
            aborts it and raises PeerFailure at once, which a rejoin goes on from; through gloo,
            a lost peer raised gloo's own error (or, for a peer that falls silent, waited for
            gloo's timeout), which no survivor can tell from a failure of its own. The same
            bytes arrive either way: one flat broadcast per dtype, copied back in place."""
            communicator = self._primus_communicator
            if communicator is None:
                return super()._distributed_broadcast_coalesced(tensors, buffer_size,
                                                                authoritative_rank)
            from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

            by_dtype = {}
            for tensor in tensors:
                by_dtype.setdefault(tensor.dtype, []).append(tensor)
            with torch.no_grad():
                for group in by_dtype.values():
                    flat = _flatten_dense_tensors(group)
                    communicator.broadcast(flat, root=authoritative_rank)
                    for tensor, synced in zip(group, _unflatten_dense_tensors(flat, group)):
                        tensor.copy_(synced)
            return None

        def forward(self, *inputs, **kwargs):
            if (self._primus_rebuild_pending and torch.is_grad_enabled()
                    and self.require_backward_grad_sync):
                self._primus_rebuild_pending = False
                if not self.find_unused_parameters:
                    self._rehearse(inputs, kwargs)
            return super().forward(*inputs, **kwargs)

        def _rehearse(self, inputs, kwargs):
            """One forward and backward pass whose effects are undone: the reducer records the
            order in which the gradients become ready and rebuilds its buckets in that order at
            the next forward pass, the first real one."""
            params = [p for p in self.module.parameters() if p.requires_grad]
            grads = [None if p.grad is None else p.grad.detach().clone() for p in params]
            buffers = [b.detach().clone() for b in self.module.buffers()]
            devices = sorted({p.device.index for p in params if p.device.type == "cuda"})
            with torch.random.fork_rng(devices=devices):
                outputs = [t for t in _find_tensors(super().forward(*inputs, **kwargs))
                           if t.requires_grad and t.is_floating_point()]
                if outputs:
                    torch.autograd.backward([t.sum() for t in outputs])
            with torch.no_grad():
                for param, grad in zip(params, grads):
                    if grad is None or param.grad is None:
                        param.grad = grad
                    else:
                        param.grad.copy_(grad)
                for buffer, saved in zip(self.module.buffers(), buffers):
                    buffer.copy_(saved)

    _stable_class = StableBucketsDDP
    return _stable_class


def _last_gradient_hook():
    """The hook on the parameter whose gradient the backward pass computes last (the model's
    first). It runs as the backward pass reaches that parameter and, at most every
    GRADIENT_WAIT_EVERY seconds (every step of steps that long), queues the end of the
    gradient wait's timer. The autograd engine runs its final callbacks in the order they were
    queued, including those queued by a callback: queued from a callback, the timer's end runs
    after DDP's reducer queued its end of backward (whether the reducer did so before this hook
    or after it), which waits for the gradients' all-reduce."""
    import torch

    from . import _control

    engine = torch.autograd.Variable._execution_engine
    perf_counter, gradient_waited = time.perf_counter, _control.gradient_waited
    # When this rank computed its last gradient, and when the next pass is timed (the first
    # pass is). One backward pass at a time per model: the next hook runs after this pass's
    # callbacks.
    ready, next_timed = [0.0], [0.0]

    def summed():
        gradient_waited(perf_counter() - ready[0])

    def queue_summed():
        engine.queue_callback(summed)

    def hook(grad):  # noqa: ARG001 (the gradient stays as it is)
        now = perf_counter()
        if now < next_timed[0]:
            return
        next_timed[0] = now + GRADIENT_WAIT_EVERY
        ready[0] = now
        engine.queue_callback(queue_summed)

    return hook
