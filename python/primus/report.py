"""A picture of every run of a job, from its job directory.

    python3 -m primus.report JOBDIR [--out DIR]        (what `primus-launch report` runs)

Reads events.jsonl, throughput.jsonl and metrics.jsonl (JSON lines; a missing file means no such
data) across all attempts and allocations, and writes into DIR (default JOBDIR/report, created
0700): report.json (the data as read and the series built from it), throughput.png (samples/s per
rank over wall time with every event marked), events.png (a timeline of the events), scalars.png
(the user scalars, when there are any) and report.html (a self-contained page showing them all).

Parsing, series building and the summary are pure functions (primus/_report_series.py); the
figures (primus/_report_figures.py) import matplotlib only when drawn (Agg, through
matplotlib.figure: no pyplot state), so importing this module is cheap; the page is
primus/_report_html.py.
"""

import argparse
import contextlib
import json
import os
import sys
import tempfile

# The pure parts (tests/python/test_report.py uses them through this module), the figures and the
# page, each in a module of its own.
from ._report_figures import draw_events, draw_scalars, draw_throughput
from ._report_html import render_html
from ._report_series import (CATEGORIES, INPUTS, KIND_ORDER, UsageError, attempt_spans,
                             broken_line, build_report, category, event_record, format_time,
                             json_lines, metrics_record, parse_time, records, scalar_series,
                             summarize, throughput_record, throughput_series, timeline_rows)

__all__ = ["CATEGORIES", "KIND_ORDER", "attempt_spans", "broken_line", "build_report", "category",
           "draw_events", "draw_scalars", "draw_throughput", "format_time", "json_lines",
           "main", "metrics_record", "parse_time", "read_job_dir", "records", "render_html",
           "scalar_series", "summarize", "throughput_series", "timeline_rows", "write_report"]


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
