"""primus.report's data, pure: the job directory's JSON lines read and checked, the series of
samples/s and user scalars per rank and attempt, the attempts' spans and the summary."""

import json
import math
from datetime import datetime, timezone


INPUTS = ("events.jsonl", "throughput.jsonl", "metrics.jsonl")

# Event kinds by category: (key, legend label, colour, kinds). Unknown kinds fall into "other".
CATEGORIES = (
    ("checkpoint", "checkpoints", "tab:green", ("checkpoint-started", "checkpoint-committed")),
    ("failure", "failures/hangs", "tab:red",
     ("rank-failed", "hang", "failed", "node-lost", "node-excluded")),
    ("restart", "restarts", "tab:blue", ("restarted", "resuming")),
    ("stop", "preemptions/time limits/stops", "tab:orange",
     ("preempted", "time-limit", "stop-requested", "cancelled")),
    ("requeue", "requeues", "tab:purple", ("requeued", "requeue-cap-reached")),
    ("straggler", "stragglers", "tab:brown", ("straggler",)),
    ("other", "launches/finishes/other", "tab:gray", ("launched", "finished")),
)
# Rows of the timeline, top to bottom; kinds not listed follow in alphabetical order.
KIND_ORDER = ("launched", "resuming", "checkpoint-started", "checkpoint-committed", "straggler",
              "rank-failed", "hang", "node-lost", "node-excluded", "restarted", "stop-requested",
              "preempted", "time-limit", "cancelled", "requeued", "requeue-cap-reached",
              "finished", "failed")
# Non-finite numbers as metrics.jsonl spells them, and the spellings read as the same.
NONFINITE = {"nan": "NaN", "+nan": "NaN", "-nan": "NaN", "inf": "+Inf", "+inf": "+Inf",
             "infinity": "+Inf", "+infinity": "+Inf", "-inf": "-Inf", "-infinity": "-Inf"}
MAX_RANK_LABELS = 16  # more ranks than this: lines without a legend entry each


class UsageError(Exception):
    """A job directory that cannot be reported on (exit status 2)."""


# ---- parsing ----------------------------------------------------------------------------------

def parse_time(text):
    """An aware UTC datetime from ISO 8601 text; a trailing Z (or no offset) means UTC."""
    if not isinstance(text, str):
        raise ValueError("'time' is not a string")
    value = text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"'time' is not ISO 8601: {text!r}") from None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def format_time(moment):
    """ISO 8601 UTC with milliseconds and a trailing Z, as the launcher writes it."""
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds")[:-6] + "Z"


def _json_constant(name):
    # Bare NaN/Infinity are not JSON: read them as the strings metrics.jsonl uses instead, so
    # that report.json stays strict JSON.
    return {"NaN": "NaN", "Infinity": "+Inf", "-Infinity": "-Inf"}[name]


def _json_float(text):
    value = float(text)
    return value if math.isfinite(value) else ("+Inf" if value > 0 else "-Inf")  # 1e999


def json_lines(data, source, warn):
    """Yields (line number, object) from JSON-lines bytes. Blank lines are skipped; a malformed
    line is skipped with one warn("source:N: ..."); an unparsable last line with no newline after
    it (still being written) is skipped silently."""
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"), parse_constant=_json_constant,
                             parse_float=_json_float)
        except UnicodeDecodeError:
            reason = "not UTF-8"
        except (ValueError, RecursionError) as error:
            reason = getattr(error, "msg", None) or str(error)
        else:
            yield number, obj
            continue
        if number < len(lines):
            warn(f"{source}:{number}: malformed line skipped ({reason})")


def _integer(obj, key, default=None, nullable=False):
    """obj[key] when it is an integer (or null, where nullable); default when there is none."""
    if key not in obj or (nullable and obj[key] is None):
        return default
    value = obj[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{key!r} is not an integer")
    return value


def _common(obj):
    """Checks what every record has: an object with a time, allocation and attempt."""
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    parse_time(obj.get("time"))
    return _integer(obj, "allocation", 0), _integer(obj, "attempt", 0)


def event_record(obj, note):
    """An events.jsonl line, verbatim, once it has a time and an event name."""
    _common(obj)
    if not isinstance(obj.get("event"), str):
        raise ValueError("'event' is not a string")
    return obj


def _number_or_none(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def throughput_record(obj, note):
    """A throughput.jsonl line, normalised: parallel arrays as long as "ranks", numbers or None."""
    allocation, attempt = _common(obj)
    ranks = obj.get("ranks")
    if not isinstance(ranks, list) or not all(
            isinstance(r, int) and not isinstance(r, bool) for r in ranks):
        raise ValueError("'ranks' is not a list of integers")
    record = {"time": obj["time"], "allocation": allocation, "attempt": attempt, "ranks": ranks}
    for key in ("steps", "samples", "samples_per_second", "lateness_seconds"):
        values = obj.get(key)
        if values is None:
            values = [None] * len(ranks)
        elif not isinstance(values, list) or len(values) != len(ranks):
            raise ValueError(f"{key!r} is not a list as long as 'ranks'")
        record[key] = [_number_or_none(v) for v in values]
    return record


def scalar_value(value):
    """A finite number as it is, a non-finite one as "NaN", "+Inf" or "-Inf"; else ValueError."""
    if isinstance(value, str) and value.strip().lower() in NONFINITE:
        return NONFINITE[value.strip().lower()]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"not a number: {value!r}")
    return value


def metrics_record(obj, note):
    """A metrics.jsonl line, normalised; a value that is not a number is dropped with note()."""
    allocation, attempt = _common(obj)
    values = obj.get("values")
    if not isinstance(values, dict):
        raise ValueError("'values' is not an object")
    record = {"time": obj["time"], "allocation": allocation, "attempt": attempt,
              "rank": _integer(obj, "rank"), "step": _integer(obj, "step", nullable=True),
              "values": {}}
    if record["rank"] is None:
        raise ValueError("no 'rank'")
    for name, value in values.items():
        try:
            record["values"][name] = scalar_value(value)
        except ValueError as error:
            note(f"scalar {name!r} skipped ({error})")
    return record


def records(data, source, check, warn):
    """The lines of one file that check(obj, note) accepts, as it returns them; a line it
    rejects (ValueError) is skipped with one warning naming the file and line."""
    result = []
    for number, obj in json_lines(data, source, warn):
        def note(message, number=number):
            warn(f"{source}:{number}: {message}")
        try:
            result.append(check(obj, note))
        except ValueError as error:
            note(f"malformed line skipped ({error})")
    return result


# ---- series and summary -----------------------------------------------------------------------

def _run_key(record):
    return record["allocation"], record["attempt"]


def throughput_series(lines):
    """{"<rank>": [point, ...]} from throughput records; a point holds time, allocation, attempt,
    steps, samples, samples_per_second and lateness_seconds, ordered by attempt, then time."""
    series = {}
    for line in lines:
        for i, rank in enumerate(line["ranks"]):
            series.setdefault(rank, []).append({
                "time": line["time"], "allocation": line["allocation"],
                "attempt": line["attempt"], "steps": line["steps"][i],
                "samples": line["samples"][i], "samples_per_second": line["samples_per_second"][i],
                "lateness_seconds": line["lateness_seconds"][i]})
    return {str(rank): _by_attempt_and_time(points) for rank, points in sorted(series.items())}


def scalar_series(lines):
    """{"<name>": [point, ...]} from metrics records; a point holds time, allocation, attempt,
    rank, step and value (a number or "NaN"/"+Inf"/"-Inf"), ordered by attempt, then time."""
    series = {}
    for line in lines:
        for name, value in line["values"].items():
            series.setdefault(name, []).append({
                "time": line["time"], "allocation": line["allocation"],
                "attempt": line["attempt"], "rank": line["rank"], "step": line["step"],
                "value": value})
    return {name: _by_attempt_and_time(points) for name, points in sorted(series.items())}


def _by_attempt_and_time(points):
    return sorted(points, key=lambda p: (_run_key(p), parse_time(p["time"])))


def attempt_spans(*sources):
    """[{"allocation", "attempt", "start", "end"}] by (allocation, attempt): the first and last
    time of any record of that attempt in the given lists of records."""
    spans = {}
    for source in sources:
        for record in source:
            key = _common(record)
            moment = parse_time(record["time"])
            first, last = spans.get(key, (moment, moment))
            spans[key] = min(first, moment), max(last, moment)
    return [{"allocation": a, "attempt": k, "start": format_time(first), "end": format_time(last)}
            for (a, k), (first, last) in sorted(spans.items())]


def summarize(events, attempts):
    """Counts for the summary table, the first and last event by time, and the final state (the
    event name of the last finished or failed event in file order, or None)."""
    def count(kind):
        return sum(1 for e in events if e["event"] == kind)

    timed = [(parse_time(e["time"]), i, e) for i, e in enumerate(events)]
    first = min(timed, key=lambda t: t[:2], default=None)
    last = max(timed, key=lambda t: t[:2], default=None)
    ends = [e["event"] for e in events if e["event"] in ("finished", "failed")]
    return {
        "allocations": len({span["allocation"] for span in attempts}),
        "attempts": len(attempts),
        "restarts": count("restarted"),
        "requeues": count("requeued"),
        "checkpoints_committed": count("checkpoint-committed"),
        "first_event": first and {"time": first[2]["time"], "event": first[2]["event"]},
        "last_event": last and {"time": last[2]["time"], "event": last[2]["event"]},
        "final_state": ends[-1] if ends else None,
    }


def category(kind):
    """(key, label, colour) of an event kind's category."""
    for key, label, colour, kinds in CATEGORIES:
        if kind in kinds:
            return key, label, colour
    return CATEGORIES[-1][:3]


def timeline_rows(events):
    """The event kinds present, in timeline order (KIND_ORDER, then the others sorted)."""
    present = {e["event"] for e in events}
    return [k for k in KIND_ORDER if k in present] + sorted(present - set(KIND_ORDER))


def to_float(value):
    """value as a float to draw: NaN for None and "NaN", infinities for "+Inf" and "-Inf"."""
    if value is None:
        return math.nan
    if isinstance(value, str):
        return {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf}[value]
    return float(value)


def broken_line(points, x_of, y_of):
    """(xs, ys) for one line through points, with a NaN between attempts so that the line breaks
    there; a missing or non-finite y is NaN too (a gap)."""
    xs, ys, previous = [], [], None
    for point in points:
        if previous is not None and _run_key(point) != previous:
            xs.append(math.nan)
            ys.append(math.nan)
        previous = _run_key(point)
        y = to_float(y_of(point))
        xs.append(x_of(point))
        ys.append(y if math.isfinite(y) else math.nan)
    return xs, ys


def build_report(job_dir, events, throughput, metrics):
    """The content of report.json, less "figures"."""
    spans = attempt_spans(events, throughput, metrics)
    return {"job_dir": job_dir, "events": events, "throughput": throughput_series(throughput),
            "scalars": scalar_series(metrics), "attempts": spans,
            "summary": summarize(events, spans)}


# ---- drawing (matplotlib, imported here only) -------------------------------------------------
