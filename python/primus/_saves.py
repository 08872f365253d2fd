"""The save in flight, between primus.checkpoint, which starts and commits it, and the stop
agreement of primus.should_stop() (primus._runtime, primus._agreement), whose all-reduce carries
its vote and commits it: a leaf module, so that neither side imports the other. checkpoint
registers its vote and its commit at import; before that there is no save, and nothing to
say."""

in_flight = None  # at most one checkpoint.PendingSave per process (checkpoint sets it)

_vote = None  # checkpoint._vote_flags
_on_agreed = None  # checkpoint._agreed


def register(vote_flags, agreed):
    global _vote, _on_agreed
    _vote, _on_agreed = vote_flags, agreed


def vote_flags():
    """[writing, failed, commit_failed] for the agreement (checkpoint._vote_flags)."""
    return _vote() if _vote is not None else [0, 0, 0]


def agreed(writing, failed, commit_failed, subject):
    """After the agreement: checkpoint._agreed (raises a commit's failure on every rank;
    commits the save `subject` once no rank is writing it)."""
    if _on_agreed is not None:
        _on_agreed(writing, failed, commit_failed, subject)


def awaits_agreement():
    """Whether a save waits for should_stop()'s agreement to commit it."""
    pending = in_flight
    return pending is not None and pending._by_should_stop
