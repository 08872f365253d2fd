"""When should_stop()'s agreement runs, and what a rank says in it (docs/architecture.md, "The
rank-side API").

The agreement is a max-allreduce through primus.comm: a point where every rank waits for the
slowest, and about 0.35 ms of CPU per rank at 8 ranks on two cores. At every step it cost the
CNN example several per cent of its throughput, so it runs only every few steps: every rank
counts its should_stop() calls alike, and each agreement also fixes how many calls come before
the next one. Each rank proposes enough steps to fill the interval (PRIMUS_STOP_INTERVAL
seconds, 0.5 by default) at the pace of its steps since the last agreement, at least 1 and at
most MAX_STEPS; the ranks take the fewest. A stop signal is therefore agreed on at most about
one interval after it arrived (one step with PRIMUS_STOP_INTERVAL=0). While an asynchronous
checkpoint waits for its commit (the same on every rank: saves are collective) the ranks agree
at every step, so that it commits as soon as every rank has written its file: a crash soon
after a checkpoint finds it committed. Which step a run stops at never changes what it
computes: a resumed run is bitwise equal to an uninterrupted one wherever it stopped.
"""

from . import _env, _saves

DEFAULT_INTERVAL = 0.5  # seconds between agreements
# No more steps than this between two agreements, however fast the steps: should the steps
# then slow down, a stop waits for at most this many of them.
MAX_STEPS = 100


def interval_seconds():
    """PRIMUS_STOP_INTERVAL: seconds (>= 0) between should_stop()'s agreements."""
    text = _env.given("PRIMUS_STOP_INTERVAL") or ""
    if text == "":
        return DEFAULT_INTERVAL
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 3600.0:
        raise ValueError(f"PRIMUS_STOP_INTERVAL: expected seconds between 0 and 3600 (how often "
                         f"the ranks agree on a stop; 0: at every step), got {text!r}")
    return value


def steps_to_propose(interval, elapsed, steps):
    """How many steps this rank proposes until the next agreement: `steps` steps took `elapsed`
    seconds since the last one (elapsed None: there was none yet)."""
    if interval <= 0.0 or elapsed is None or steps <= 0:
        return 1
    if elapsed <= 0.0:
        return MAX_STEPS
    return max(1, min(MAX_STEPS, int(interval * steps / elapsed)))


def paper(stop_signal):
    """What this rank says in the agreement, and about which save: ([stop, writing, failed,
    commit_failed], the checkpoint in flight or None); `stop_signal`: the stop signal this rank
    received, or None."""
    writing, failed, commit_failed = _saves.vote_flags()
    return [0 if stop_signal is None else 1, writing, failed, commit_failed], _saves.in_flight
