"""primus.log(): user scalars (a loss, an accuracy) for the monitor and the report.

Under primus-launch the scalars go over the control channel as
    {"type": "scalars", "step": 120, "time": 1764683651.123, "values": {"loss": 0.31}}
and the launcher appends them to the job directory's metrics.jsonl (and serves them as the
Prometheus metrics primus_user_<name>). Without a launcher the rank appends the same line as the
launcher would itself:
    {"time":"2026-12-01T21:54:11.123Z","allocation":0,"attempt":0,"rank":0,"step":120,
     "values":{"loss":0.31}}
A value that is not finite is written as the string "NaN", "+Inf" or "-Inf" (Prometheus's
spelling; JSON has no such numbers).
"""

import json
import math
import numbers
import os
import re
import sys
import time

from . import _control, _env, _runtime

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What primus-launch takes in one scalars message; it ignores a line beyond these.
_MAX_NAME = 128
_MAX_SCALARS = 256

_fd = None         # metrics.jsonl when this rank writes it itself
_warned = False


def _step(step):
    return _env.count(step, "primus.log: step")


def _is_bool(value):
    # bool, numpy.bool_ and a boolean tensor or array: a truth value is not a measurement.
    return isinstance(value, bool) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool")


def _check(name, value):
    """Raises when name is not a metric name or value not a real number (before anything is
    read: a tensor's value is read only where the call counts)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > _MAX_NAME:
        raise ValueError(f"primus.log: {name!r}: a scalar's name must match "
                         f"[A-Za-z_][A-Za-z0-9_]*, at most {_MAX_NAME} characters (it becomes "
                         "the metric primus_user_<name>)")
    if _is_bool(value):
        raise TypeError(f"primus.log: {name}: expected a real number, got the truth value "
                        f"{value!r}")
    if isinstance(value, numbers.Real):
        return
    if getattr(value, "shape", None) == () or getattr(value, "ndim", None) == 0:
        return  # a 0-d tensor or array, read with float()
    raise TypeError(f"primus.log: {name}: expected a real number (int, float, a numpy scalar or "
                    f"a 0-d tensor), got {type(value).__name__}")


def _value(name, value):
    """The value as JSON writes it: a finite float (an int too, as the launcher keeps every
    scalar as a double), or "NaN", "+Inf", "-Inf"."""
    try:
        number = float(value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"primus.log: {name}: expected a real number, got "
                        f"{type(value).__name__} ({error})") from None
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    return number


def utc_text(unix_time):
    """ISO 8601 UTC with milliseconds and a Z, as events.jsonl and metrics.jsonl spell time."""
    milliseconds = int(unix_time * 1000)
    seconds, fraction = divmod(milliseconds, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{fraction:03d}Z"


def metrics_line(unix_time, rank, step, values):
    """One line of metrics.jsonl, as the launcher writes it: these keys in this order, no
    spaces."""
    entry = {"time": utc_text(unix_time), "allocation": _env.count_variable("SLURM_RESTART_COUNT"),
             "attempt": _env.count_variable("PRIMUS_LAUNCH_RESTARTS"), "rank": rank, "step": step,
             "values": values}
    return json.dumps(entry, separators=(",", ":"), allow_nan=False) + "\n"


def _warn_once(error):
    global _warned
    if not _warned:
        _warned = True
        print(f"primus: warning: primus.log cannot append to metrics.jsonl ({error}); the "
              "scalars of this rank are not kept", file=sys.stderr)


def _append(job_dir, line):
    """Appends line to job_dir/metrics.jsonl with one write (O_APPEND: the lines of ranks
    writing at once never mix)."""
    global _fd
    try:
        if _fd is None:
            os.makedirs(job_dir, mode=0o700, exist_ok=True)
            _fd = os.open(os.path.join(job_dir, "metrics.jsonl"),
                          os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                          0o600)
        data = line.encode()
        if os.write(_fd, data) != len(data):
            raise OSError("a short write")
    except OSError as error:
        _warn_once(error)


def log(step, *, all_ranks=False, **scalars):
    """Records user scalars for training step `step` (an integer >= 0), such as
    primus.log(step, loss=0.31, accuracy=0.92), for the monitor (the Prometheus metrics
    primus_user_<name>) and primus-launch report.

    Only rank 0's call counts, unless all_ranks=True (each rank's values then count, tagged with
    its rank). Up to 256 scalars; a name must match [A-Za-z_][A-Za-z0-9_]* (128 characters at
    most); a value is a real number: an int, a float, a numpy scalar or a 0-d tensor (read with
    float(), which waits for a GPU tensor, only on the ranks whose call counts); True and False
    are refused. NaN and infinities are kept, as "NaN", "+Inf" and "-Inf".

    Under primus-launch the launcher appends them to the job directory's metrics.jsonl; without
    it the rank appends its line there itself. Bad arguments raise TypeError or ValueError
    naming them; a file that cannot be written is one warning, never an exception."""
    step = _step(step)
    if not scalars:
        raise ValueError("primus.log: no scalars: pass them as name=value (loss=0.31)")
    if len(scalars) > _MAX_SCALARS:
        raise ValueError(f"primus.log: {len(scalars)} scalars in one call; at most "
                         f"{_MAX_SCALARS}")
    for name, value in scalars.items():
        _check(name, value)
    job = _runtime.init(torch=False)
    if job.rank != 0 and not all_ranks:
        return
    values = {name: _value(name, value) for name, value in scalars.items()}
    now = time.time()
    if _control.connected():
        _control.send({"type": "scalars", "step": step, "time": round(now, 3), "values": values})
    else:
        _append(job.job_dir, metrics_line(now, job.rank, step, values))
