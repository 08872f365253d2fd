"""primus.report's page: report.html, self-contained (the figures inline), from the report's
data."""

import html
import json

from ._report_series import (category)


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
