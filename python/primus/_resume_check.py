"""Whether a checkpoint belongs to the job that would resume from it (primus.train): the model's
parameters and their shapes, the optimizer and its parameter groups, the scheduler, and the
dataset and its order. The command that saved it is shown, never compared: a resume may change
the number of epochs or a flag. A checkpoint of another job is refused before any training, with
what differs and the way out, rather than torch's own error about missing keys."""

_MORE = 3  # differences named per part; the rest are counted


def _shape(value):
    shape = getattr(value, "shape", None)
    return list(shape) if shape is not None else None


def _model(saved, model):
    here = model.state_dict()
    if not isinstance(saved, dict):
        return ["no model state"]
    found = []
    for key in sorted(set(saved) - set(here)):
        found.append(f"{key} is there, not here")
    for key in sorted(set(here) - set(saved)):
        found.append(f"{key} is here, not there")
    for key in sorted(set(here) & set(saved)):
        there, now = _shape(saved[key]), _shape(here[key])
        if there != now:
            found.append(f"{key} is {there} there, {now} here")
    return found


def _optimizer(saved, optimizer, recorded):
    found = []
    name = type(optimizer).__name__
    if recorded is not None and recorded != name:
        found.append(f"{recorded} there, {name} here")
    groups = saved.get("param_groups") if isinstance(saved, dict) else None
    if isinstance(groups, list):
        there = [len(group.get("params", ())) for group in groups]
        now = [len(group["params"]) for group in optimizer.param_groups]
        if there != now:
            found.append(f"parameters per group {there} there, {now} here")
    return found


def _data(cursor, ds):
    if not isinstance(cursor, dict):
        return []
    here = ds.state_dict()
    found = []
    if cursor.get("fingerprint") != here.get("fingerprint"):
        found.append(f"another dataset (its files, their sizes or record counts: "
                     f"{cursor.get('records')} records there, {here.get('records')} here)")
    for key in ("global_batch_size", "shuffle", "shuffle_block", "seed", "drop_last"):
        if key in cursor and cursor[key] != here.get(key):
            found.append(f"{key} {cursor[key]!r} there, {here.get(key)!r} here")
    return found


def differences(restored, model, optimizer, lr_scheduler, ds):
    """[(part, [what differs])] between the checkpoint `restored` and this run; empty when it
    is this job's."""
    state = restored.state if isinstance(restored.state, dict) else {}
    recorded = ((restored.metadata or {}).get("primus.train") or {})
    parts = [("model", _model(state.get("model"), model)),
             ("optimizer", _optimizer(state.get("optimizer"), optimizer,
                                      recorded.get("optimizer"))),
             ("data", _data(restored.data_cursor, ds))]
    if lr_scheduler is not None and "lr_scheduler" not in state:
        parts.append(("lr_scheduler", ["none there, one here"]))
    return [(part, found) for part, found in parts if found]


def check(restored, model, optimizer, lr_scheduler, ds):
    """Raises ValueError naming the checkpoint, what differs, and the way out, when `restored`
    is not this job's."""
    found = differences(restored, model, optimizer, lr_scheduler, ds)
    if not found:
        return
    lines = [f"primus.train: cannot resume from {restored.path}: it was saved by another job"]
    for part, what in found:
        more = len(what) - _MORE
        text = "; ".join(what[:_MORE]) + (f"; and {more} more" if more > 0 else "")
        lines.append(f"  {part}: {text}")
    command = ((restored.metadata or {}).get("primus.train") or {}).get("command")
    if command:
        lines.append(f"  it was saved by: {' '.join(map(str, command))}")
    lines.append("Start afresh with --primus-fresh (PRIMUS_FRESH=1 for a plain script: the old "
                 "checkpoints are moved aside to ckpt.old-TIME), or give this run its own job "
                 "directory (--primus-job-dir).")
    raise ValueError("\n".join(lines))
