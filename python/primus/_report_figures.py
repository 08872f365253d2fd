"""primus.report's figures: samples/s per rank, the events' timeline and the user scalars over
wall time (matplotlib's Agg through matplotlib.figure, no pyplot state; imported only when a
report is drawn)."""

from datetime import timezone

from ._report_series import (CATEGORIES, MAX_RANK_LABELS, broken_line, category, parse_time,
                             timeline_rows)


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
