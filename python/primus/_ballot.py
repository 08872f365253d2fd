"""should_stop()'s vote, carried by primus.ddp's gradient all-reduce (docs/architecture.md, "The
rank-side API").

What a rank says in should_stop()'s agreement is a few flags: whether it received a stop
signal, and how the checkpoint in flight stands (checkpoint._vote_flags()). Every rank calls
should_stop() once per step, and with primus.ddp every rank has just taken part in an all-reduce
of the gradients: primus.ddp adds a four-element tensor of its own to the reducer's parameters
(not to the model's), and sets its gradient to these flags as the backward pass reaches the
model's first parameter. The reducer sums it with the gradients, in the same bucket, and
should_stop() reads the count of ranks behind each flag from it: no all-reduce of its own, and
no second point per step at which every rank waits for the slowest.

The flags are those of the moment the backward pass voted: a stop signal that arrives later in
the step is agreed on at the next step's backward pass. The vote also records which checkpoint
was in flight when it was cast (its subject), so that a save started between the backward pass
and should_stop() is never committed on a vote about the one before it.
"""

# The last vote counted by a synchronising backward pass, not yet taken by should_stop():
# (flags, subject), flags being the number of ranks behind [stop, writing, failed,
# commit_failed]. The ranks count the same votes: each comes from one all-reduce of every rank.
_counted = None
# primus._runtime and primus.checkpoint, imported at the first vote (they import this module;
# paper() runs at every step, where an import statement costs more than the vote itself).
_modules = None


def paper():
    """What this rank votes now, and about which save: ([stop, writing, failed,
    commit_failed], the checkpoint in flight or None)."""
    global _modules
    if _modules is None:
        from . import _runtime, checkpoint

        _modules = (_runtime, checkpoint)
    runtime, checkpoint = _modules
    writing, failed, commit_failed = checkpoint._vote_flags()
    return ([0 if runtime._stop_signal is None else 1, writing, failed, commit_failed],
            checkpoint._in_flight)


def counted(flags, subject):
    """Called at the end of a synchronising backward pass with the summed flags (ints)."""
    global _counted
    _counted = (flags, subject)


def take():
    """The vote counted since the last call (and forgets it), or None: should_stop() then
    agrees through an all-reduce of its own."""
    global _counted
    vote, _counted = _counted, None
    return vote

