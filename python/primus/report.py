"""A picture of every run of a job, from its job directory.

    python3 -m primus.report JOBDIR [--out DIR]        (what `primus-launch report` runs)

Reads events.jsonl, throughput.jsonl and metrics.jsonl (JSON lines; a missing file means no such
data) across all attempts and allocations, and writes into DIR (default JOBDIR/report, created
0700): report.json (the data as read and the series built from it), throughput.png (samples/s per
rank over wall time with every event marked), events.png (a timeline of the events), scalars.png
(the user scalars, when there are any) and report.html (a self-contained page showing them all).

Parsing, series building and the summary are pure functions; only the draw_* functions import
matplotlib (Agg, through matplotlib.figure: no pyplot state), so importing this module is cheap.
"""

import argparse
import contextlib
import html
import json
import math
import os
import sys
import tempfile
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

def _figure(width, height):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _date_axis(ax, label="time (UTC)"):
    from matplotlib import dates

    locator = dates.AutoDateLocator(tz=timezone.utc)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(dates.ConciseDateFormatter(locator, tz=timezone.utc))
    ax.set_xlabel(label)


SHADED = "time (UTC); shaded: a<allocation>.<attempt>"


def _num(iso):
    from matplotlib import dates

    return dates.date2num(parse_time(iso))


def _shade_attempts(ax, attempts):
    """Shades each attempt's span (one tone per allocation) and labels it a<allocation>.<attempt>
    at the top of the axes."""
    tones = ("#dde6f2", "#f2e6d5")
    transform = ax.get_xaxis_transform()
    for span in attempts:
        start, end = _num(span["start"]), _num(span["end"])
        ax.axvspan(start, end, color=tones[span["allocation"] % 2], alpha=0.6, lw=0, zorder=0)
        ax.axvline(start, color="0.5", lw=0.6, zorder=0.5)
        ax.text(start, 1.0, f" a{span['allocation']}.{span['attempt']}", transform=transform,
                va="bottom", ha="left", fontsize=7, color="0.3", clip_on=False)


def _mark_events(ax, events):
    """A vertical line per event, coloured by category; returns the legend handles."""
    from matplotlib.lines import Line2D

    used = {}
    for event in events:
        key, label, colour = category(event["event"])
        style = ":" if event["event"] == "checkpoint-started" else "-"
        ax.axvline(_num(event["time"]), color=colour, ls=style, lw=1.0, alpha=0.8, zorder=1)
        used[key] = Line2D([], [], color=colour, lw=1.5, label=label)
    return [used[key] for key, *_ in CATEGORIES if key in used]


def draw_throughput(report, out):
    """throughput.png: samples/s per rank over wall time, events marked, attempts shaded."""
    fig = _figure(11, 5)
    ax = fig.add_subplot()
    _shade_attempts(ax, report["attempts"])
    series = report["throughput"]
    label_ranks = len(series) <= MAX_RANK_LABELS
    lines = []
    for rank, points in series.items():
        xs, ys = broken_line(points, lambda p: _num(p["time"]), lambda p: p["samples_per_second"])
        lines += ax.plot(xs, ys, marker=".", markersize=3, lw=1.2, zorder=2, label=f"rank {rank}")
    kinds = _mark_events(ax, report["events"])
    if not series:
        ax.text(0.5, 0.5, "no throughput data", transform=ax.transAxes, ha="center")
    elif label_ranks:
        fig.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, title="ranks",
                   title_fontsize=8, handles=lines)
    else:
        ax.set_title(f"{len(series)} ranks", fontsize=9, loc="right")
    if kinds:
        fig.legend(handles=kinds, loc="lower left", bbox_to_anchor=(1.0, 0.0), fontsize=8,
                   title="events", title_fontsize=8)
    ax.set_ylabel("samples/s")
    ax.set_ylim(bottom=0)
    _date_axis(ax, SHADED)
    if not report["attempts"]:
        ax.set_xticks([])
    fig.suptitle("Throughput by rank")
    fig.savefig(out, format="png", bbox_inches="tight")


def draw_events(report, out):
    """events.png: one row per event kind, a marker per event, on one time axis."""
    rows = timeline_rows(report["events"])
    fig = _figure(11, 1.6 + 0.35 * max(len(rows), 1))
    ax = fig.add_subplot()
    _shade_attempts(ax, report["attempts"])
    for y, kind in enumerate(rows):
        times = [_num(e["time"]) for e in report["events"] if e["event"] == kind]
        ax.plot(times, [y] * len(times), ls="none", marker="o", markersize=6,
                color=category(kind)[2], zorder=2)
    if not rows:
        ax.text(0.5, 0.5, "no events", transform=ax.transAxes, ha="center")
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    if rows:
        ax.set_ylim(len(rows) - 0.5, -0.5)
    _date_axis(ax, SHADED)
    if not report["attempts"]:
        ax.set_xticks([])
    fig.suptitle("Events")
    fig.savefig(out, format="png")


def draw_scalars(report, out):
    """scalars.png: one subplot per scalar over step (over time where a point has no step), a
    line per rank when several ranks logged it."""
    names = list(report["scalars"])
    fig = _figure(11, 0.6 + 2.4 * len(names))
    axes = fig.subplots(len(names), 1, squeeze=False)[:, 0]
    for ax, name in zip(axes, names):
        points = report["scalars"][name]
        by_step = all(p["step"] is not None for p in points)
        ranks = sorted({p["rank"] for p in points})
        for rank in ranks:
            xs, ys = broken_line([p for p in points if p["rank"] == rank],
                                 (lambda p: p["step"]) if by_step else (lambda p: _num(p["time"])),
                                 lambda p: p["value"])
            ax.plot(xs, ys, marker=".", markersize=3, lw=1.2,
                    label=f"rank {rank}" if len(ranks) > 1 else None)
        missing = sum(1 for p in points if isinstance(p["value"], str))
        plural = "s" if missing > 1 else ""
        ax.set_title(name + (f" ({missing} non-finite value{plural} not drawn)" if missing else ""),
                     fontsize=10, loc="left")
        if by_step:
            ax.set_xlabel("step")
        else:
            _date_axis(ax)
        if 1 < len(ranks) <= MAX_RANK_LABELS:
            ax.legend(fontsize=8)
    fig.suptitle("Scalars")
    fig.savefig(out, format="png")


# ---- the page ---------------------------------------------------------------------------------

def _cell(value):
    if value is None:
        return ""
    return html.escape(value if isinstance(value, str) else json.dumps(value))


def _details(details):
    if not isinstance(details, dict):
        return _cell(details)
    return "<br>".join(f"{_cell(k)}={_cell(v)}" for k, v in details.items())


def render_html(report):
    """report.html: summary, attempts, figures (relative paths) and events; every string from
    the job directory escaped."""
    s = report["summary"]

    def moment(item):
        return f"{item['time']} ({item['event']})" if item else "none"

    summary = [("allocations", s["allocations"]), ("attempts", s["attempts"]),
               ("restarts", s["restarts"]), ("requeues", s["requeues"]),
               ("checkpoints committed", s["checkpoints_committed"]),
               ("first event", moment(s["first_event"])), ("last event", moment(s["last_event"])),
               ("final state", s["final_state"] or "none yet (no finished or failed event)")]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Primus report: {_cell(report['job_dir'])}</title>",
        "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;"
        "margin-bottom:1.5em}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;"
        "vertical-align:top;font-size:90%}img{max-width:100%;display:block;margin:1em 0}</style>",
        "</head><body>", "<h1>Primus report</h1>",
        f"<p>Job directory: <code>{_cell(report['job_dir'])}</code></p>",
        "<h2>Summary</h2><table>"]
    parts += [f"<tr><th>{_cell(k)}</th><td>{_cell(v)}</td></tr>" for k, v in summary]
    parts.append("</table><h2>Attempts</h2><table><tr><th>allocation</th><th>attempt</th>"
                 "<th>start</th><th>end</th></tr>")
    parts += [f"<tr><td>{_cell(a['allocation'])}</td><td>{_cell(a['attempt'])}</td>"
              f"<td>{_cell(a['start'])}</td><td>{_cell(a['end'])}</td></tr>"
              for a in report["attempts"]]
    parts.append("</table><h2>Figures</h2>")
    parts += [f'<img src="{_cell(name)}" alt="{_cell(name)}">' for name in report["figures"]]
    parts.append("<h2>Events</h2><table><tr><th>time</th><th>event</th><th>allocation</th>"
                 "<th>attempt</th><th>rank</th><th>node</th><th>details</th></tr>")
    for e in report["events"]:
        colour = category(e["event"])[2].replace("tab:", "")
        parts.append(f'<tr><td>{_cell(e["time"])}</td>'
                     f'<td style="border-left:4px solid {colour}">{_cell(e["event"])}</td>'
                     f'<td>{_cell(e.get("allocation"))}</td><td>{_cell(e.get("attempt"))}</td>'
                     f'<td>{_cell(e.get("rank"))}</td><td>{_cell(e.get("node"))}</td>'
                     f'<td>{_details(e.get("details"))}</td></tr>')
    parts.append("</table></body></html>\n")
    return "\n".join(parts)


# ---- files and command line -------------------------------------------------------------------

def read_job_dir(job_dir, warn):
    """(events, throughput, metrics) records of a job directory; UsageError when it cannot be
    read or holds none of the three files."""
    try:
        present = set(os.listdir(job_dir)) & set(INPUTS)
    except OSError as error:
        raise UsageError(f"{job_dir}: {error.strerror}") from None
    if not present:
        raise UsageError(f"{job_dir}: none of {', '.join(INPUTS)} found "
                         "(not a Primus job directory?)")
    checks = {"events.jsonl": event_record, "throughput.jsonl": throughput_record,
              "metrics.jsonl": metrics_record}
    result = []
    for name in INPUTS:
        path = os.path.join(job_dir, name)
        if name not in present:
            result.append([])
            continue
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as error:
            raise UsageError(f"{path}: {error.strerror}") from None
        result.append(records(data, path, checks[name], warn))
    return tuple(result)


def write_atomic(directory, name, write):
    """Writes DIR/name through write(binary file) to a temporary name, then renames it."""
    fd, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        path = os.path.join(directory, name)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return path


def write_report(report, out):
    """Writes the figures, report.json and report.html into out; returns the paths written."""
    if not os.path.isdir(out):
        os.makedirs(out, mode=0o700)
    drawings = [("throughput.png", draw_throughput), ("events.png", draw_events)]
    if report["scalars"]:
        drawings.append(("scalars.png", draw_scalars))
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(out, "scalars.png"))  # left by an earlier report
    report["figures"] = [name for name, _ in drawings]
    paths = [write_atomic(out, name, lambda f, draw=draw: draw(report, f))
             for name, draw in drawings]
    text = json.dumps(report, allow_nan=False) + "\n"
    paths.insert(0, write_atomic(out, "report.json", lambda f: f.write(text.encode())))
    page = render_html(report)
    paths.append(write_atomic(out, "report.html", lambda f: f.write(page.encode())))
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="primus.report",
        description="Draw every run of a Primus job (all attempts and allocations) from its job "
                    "directory: report.json, throughput.png, events.png, scalars.png (when the "
                    "job logged scalars) and report.html, which shows them all.")
    parser.add_argument("job_dir", metavar="JOBDIR",
                        help="the job directory (PRIMUS_JOB_DIR), holding events.jsonl, "
                             "throughput.jsonl and/or metrics.jsonl")
    parser.add_argument("--out", metavar="DIR",
                        help="where to write the report (default JOBDIR/report, created 0700)")
    args = parser.parse_args(argv)

    def warn(message):
        print(f"primus.report: warning: {message}", file=sys.stderr)

    try:
        events, throughput, metrics = read_job_dir(args.job_dir, warn)
    except UsageError as error:
        print(f"primus.report: {error}", file=sys.stderr)
        return 2
    report = build_report(os.path.abspath(args.job_dir), events, throughput, metrics)
    out = args.out if args.out is not None else os.path.join(args.job_dir, "report")
    try:
        paths = write_report(report, out)
    except ImportError as error:
        print(f"primus.report: matplotlib is needed to draw the figures ({error}; Debian: "
              "python3-matplotlib)", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"primus.report: {error.filename or out}: {error.strerror}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
