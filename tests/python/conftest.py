import threading
import time

import pytest

from primus import _env


RANK_DEADLINE = 120  # seconds for every rank of run_ranks to finish: a hang guard only


def run_ranks(world_size, body, deadline=RANK_DEADLINE):
    """Runs body(rank, agree) on world_size threads, as ranks of one job; agree(ok) is a
    barrier that returns True on every rank only when all passed True. Returns the results by
    rank, re-raising the first exception. Ranks still running after `deadline` seconds (a
    deadlock) fail the test, naming them; the barrier is broken so that the others return."""
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

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(world_size)]
    for t in threads:
        t.start()
    end = time.monotonic() + deadline
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    stuck = [rank for rank, t in enumerate(threads) if t.is_alive()]
    if stuck:
        barrier.abort()  # ranks waiting in agree() get BrokenBarrierError and end
        pytest.fail(f"ranks {stuck} of {world_size} did not finish within {deadline} s "
                    "(a deadlock?)", pytrace=False)
    for error in errors:
        if error is not None:
            raise error
    return results


@pytest.fixture
def ranks():
    return run_ranks


@pytest.fixture(autouse=True)
def environment_read_again(monkeypatch):
    """primus reads its variables once (primus._env): each test starts from the environment
    as it is, and a variable a test sets or removes with monkeypatch is read again at once."""
    _env.reread()
    set_variable, remove_variable = monkeypatch.setenv, monkeypatch.delenv

    def setenv(name, value, prepend=None):
        set_variable(name, value, prepend)
        _env.reread()

    def delenv(name, raising=True):
        remove_variable(name, raising)
        _env.reread()

    monkeypatch.setenv, monkeypatch.delenv = setenv, delenv
    yield
    monkeypatch.undo()
    _env.reread()
