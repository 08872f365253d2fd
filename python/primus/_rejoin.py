"""Recovery without a restart: the ranks that survive a peer's failure stay alive and go on in a
new generation with its replacement (--primus-recover=rejoin; docs/architecture.md, "Recovery
without a restart").

The protocol, with primus-launch:
1. A rank whose groups are up for generation G sends the event "rejoinable" (generation G).
   primus-launch rejoins only when every rank of the generation said so (primus.train, CPU
   ranks: torch 1.13 cannot abort an NCCL group).
2. A rank fails (its process ends, or it hangs and primus-launch kills it). Its connections
   close; primus.comm turns a lost connection into an abort of the whole communicator, so every
   other rank's call fails within milliseconds (PeerFailure).
3. Each survivor leaves its loop: it joins its checkpoint write and discards what was not
   committed, then sends "rejoin-waiting" (generation G) and waits for a notice.
4. Once every survivor waits, primus-launch resolves the newest committed checkpoint, starts the
   replacement with generation G+1, and sends each survivor {"type": "generation",
   "generation": G+1, "master_port", "primus_port", "resume"}.
5. The survivors drop their groups, make gloo and primus.comm again on the new ports (the
   generation is bound into primus.comm's session key: a rank of an older one is refused), wrap
   the model in primus.ddp again and load the checkpoint as the replacement does, in the same
   order of collectives; then every rank sends "rejoinable" for G+1 and training goes on.

A survivor that gets no notice within PRIMUS_REJOIN_DEADLINE seconds raises its failure, and
primus-launch's restart takes over."""

import sys

from . import _control, _env

DEFAULT_DEADLINE = 60.0


def generation():
    """This rank's generation (PRIMUS_GENERATION; 0 at an attempt's start)."""
    return _env._int_variable("PRIMUS_GENERATION", 0)


def deadline_seconds():
    value = _env.text("PRIMUS_REJOIN_DEADLINE")
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"PRIMUS_REJOIN_DEADLINE: expected a number of seconds, got "
                         f"{value!r}") from None
    if not seconds >= 0:
        raise ValueError(f"PRIMUS_REJOIN_DEADLINE: expected a number of seconds, 0 or more, got "
                         f"{value!r}")
    return seconds


def enabled(job):
    """Whether this rank can rejoin after a peer's failure: --primus-recover=rejoin under
    primus-launch (its control channel carries the protocol), above one rank, on the CPU."""
    mode = (_env.text("PRIMUS_RECOVER") or "restart").lower()
    if mode not in ("rejoin", "restart"):
        raise ValueError(f"PRIMUS_RECOVER: expected rejoin or restart, got {mode!r}")
    return (mode == "rejoin" and job.world_size > 1 and job.device == "cpu"
            and _control.connected())


def announce(restore_seconds=None):
    """This rank's groups are up for its generation: it can rejoin after a peer's failure. In a
    generation after the first it also says how long its restore took and where the bulk of it
    came from (primus._memory_copy): "memory" (its own copy), "peer" (another rank's copy),
    or "file"."""
    from . import _runtime

    _control.start_reader(_runtime.abort_collectives)
    fields = {}
    if generation() > 0 and restore_seconds is not None:
        memory_copy = sys.modules.get(__package__ + "._memory_copy")
        report = memory_copy.last_restore if memory_copy is not None else None
        source = "file"
        if report and report["peer_bytes"] > report["memory_bytes"]:
            source = "peer"
        elif report and report["memory_bytes"]:
            source = "memory"
        fields = {"restore_seconds": round(restore_seconds, 4), "restore_source": source}
    _control.event("rejoinable", generation=generation(), **fields)


def is_peer_failure(error):
    """Whether `error` is a lost peer (primus.comm's PeerFailure, in its chain of causes or
    noted by primus.ddp's gradient hook) or an aborted communicator, not this rank's own."""
    from . import comm

    seen = set()
    value = error
    while value is not None and id(value) not in seen:
        seen.add(id(value))
        if isinstance(value, comm.PeerFailure):
            return True
        value = value.__cause__ or value.__context__
    return _control.lost_peer_of(error) is not None


def wait_for_notice(failure):
    """After a peer's failure: says this survivor waits, and returns primus-launch's notice of
    the next generation, or None when none came within the deadline or a stop signal came."""
    from . import _runtime

    current = generation()
    _control.event("rejoin-waiting", generation=current)
    # A stop signal ends the wait: primus-launch gives the rejoin up at a stop.
    notice = _control.wait_generation(current, deadline_seconds(), _runtime.stop_requested)
    if notice is None:
        why = ("a stop signal came" if _runtime.stop_requested() else
               f"no new generation from primus-launch within {deadline_seconds():g} s")
        print(f"primus: rank {_env.text('RANK')}: not rejoining: {why} after a peer's failure "
              f"({type(failure).__name__}: {failure})", file=sys.stderr, flush=True)
    return notice


def enter(notice):
    """The rank's process-wide state for the notice's generation: the environment of the new
    generation, the communicators and groups made again."""
    from . import _runtime

    for name, key in (("MASTER_PORT", "master_port"), ("PRIMUS_PORT", "primus_port")):
        value = notice.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 65536:
            raise RuntimeError(f"primus-launch's generation notice: {key}: expected a port, got "
                               f"{value!r}")
        _env.export(name, str(value))
    _env.export("PRIMUS_GENERATION", str(notice["generation"]))
    # Later generations meet through the TCP store: a PMIx namespace belongs to the step.
    _env.export("PRIMUS_BOOTSTRAP", "tcp")
    resume = notice.get("resume") or None
    _env.export("PRIMUS_RESUME", resume)
    _control.forget_lost_peer()
    _runtime.new_generation(resume)
