"""primus.ddp's gradient all-reduce on the CPU: DDP's buckets summed by primus.comm instead of
gloo (docs/architecture.md, "The rank-side API").

Gloo all-reduces a small bucket with a ring of 2(n-1) steps, each a message handed between its
own threads and the peer's; primus.comm uses recursive doubling up to 64 KiB (log2 n steps) and
a ring above, on the calling thread, and its sums are bitwise the same on every rank and in
every run at the same rank count (docs/collectives.md), which the exact resume needs. At the CNN
example's 8 ranks on this machine's two cores a step took 2.4 times less wall time and half the
CPU (docs/performance.md).

The hook keeps DDP's overlap of the all-reduce with the rest of the backward pass: a bucket
that is not the backward pass's last goes to one worker thread, which sums the buckets in the
order the reducer hands them out (the same on every rank); the last bucket, when nothing is
still queued, is summed at once on the backward pass's thread (a model whose gradients fit one
bucket never hands over to the thread). DDP divides by the world size itself only without a
hook; the hook divides before summing, as torch's own allreduce_hook does."""

import atexit
import queue
import threading

from . import _control

EXIT_JOIN_SECONDS = 30  # at exit, how long the worker may take to finish the buckets it holds


class GradientAllreduce:
    """The communication hook of one DDP model (register_comm_hook(None, x.hook)): sums its
    buckets through `communicator` (a primus.comm.Communicator)."""

    def __init__(self, communicator, world_size):
        self._communicator = communicator
        self._world_size = world_size
        self._queue = None  # the worker's, started at the first bucket that is not the last
        self._worker = None
        self._last_queued = None  # the future of the last bucket handed to the worker

    def hook(self, state, bucket):  # noqa: ARG002 (no state: the hook's object holds it)
        import torch

        buffer = bucket.buffer()
        future = torch.futures.Future()
        last = self._last_queued
        if bucket.is_last() and (last is None or last.done()):
            self._sum(buffer, future)
            return future
        if self._queue is None:
            self._queue = queue.SimpleQueue()
            self._worker = threading.Thread(target=self._work, name="primus-grad-allreduce",
                                            daemon=True)
            self._worker.start()
            atexit.register(self._stop)
        self._last_queued = future
        self._queue.put((buffer, future))
        return future

    def _sum(self, buffer, future):
        try:
            buffer.div_(self._world_size)
            self._communicator.allreduce(buffer)
        except BaseException as error:  # the reducer raises it on the backward pass's thread
            # torch 1.13's reducer turns it into a RuntimeError of its own text: the lost peer
            # is kept for the report of the exception that follows.
            _control.note_lost_peer(error)
            future.set_exception(error)
        else:
            future.set_result(buffer)

    def _stop(self):
        """At exit, before the interpreter is torn down: the worker ends once it has summed
        what it holds. A torch call of its still returning then (Future.set_result and the
        tensor operations release the GIL through pybind11's guard) would ask for the GIL back
        during the teardown, and Python ends such a thread with pthread_exit, which through that
        guard aborts the process: "terminate called without an active exception" after the
        rank finished (issue 39; seen in CI's run of tests/python/test_exit.py under load). A
        worker held in a collective by a lost peer is not waited for past EXIT_JOIN_SECONDS."""
        self._queue.put(None)
        self._worker.join(EXIT_JOIN_SECONDS)

    def _work(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            buffer, future = item
            self._sum(buffer, future)
