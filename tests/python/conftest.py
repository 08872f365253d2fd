import threading

import pytest


def run_ranks(world_size, body):
    """Runs body(rank, agree) on world_size threads, as ranks of one job; agree(ok) is a
    barrier that returns True on every rank only when all passed True. Returns the results by
    rank, re-raising the first exception."""
    barrier = threading.Barrier(world_size)
    flags = [True] * world_size
    lock = threading.Lock()

    def make_agree(rank):
        def agree(ok):
            with lock:
                flags[rank] = bool(ok)
            barrier.wait()
            result = all(flags)
            barrier.wait()  # nobody overwrites a flag before all have read them
            return result
        return agree

    results, errors = [None] * world_size, [None] * world_size

    def run(rank):
        try:
            results[rank] = body(rank, make_agree(rank))
        except BaseException as error:  # noqa: BLE001 (reported below)
            errors[rank] = error

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for error in errors:
        if error is not None:
            raise error
    return results


@pytest.fixture
def ranks():
    return run_ranks
