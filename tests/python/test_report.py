"""primus.report: `python3 -m primus.report JOBDIR` on a synthetic job directory (two
allocations, a restart in the first, a preemption and requeue, a straggler), real matplotlib."""

import json
import os
import stat
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from primus import report

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
HOSTILE = "<script>alert('x')</script>"
START = datetime(2026, 12, 1, 21, 0, 0, tzinfo=timezone.utc)
# (allocation, attempt, first second, last second) of each attempt of the synthetic job
ATTEMPTS = [(0, 0, 0, 42), (0, 1, 50, 85), (1, 0, 300, 360)]
EVENTS = [  # (second, event, allocation, attempt, extra fields)
    (0, "launched", 0, 0, {"details": {"ranks": "2"}}),
    (5, "checkpoint-started", 0, 0, {"details": {"step": "100"}}),
    (6, "checkpoint-committed", 0, 0, {"details": {"step": "100"}}),
    (40, "rank-failed", 0, 0, {"rank": 1, "node": "n2", "details": {"reason": HOSTILE}}),
    (42, "restarted", 0, 0, {}),
    (50, "launched", 0, 1, {}),
    (70, "straggler", 0, 1, {"rank": 1, "node": "n2", "details": {"lateness_seconds": "12.5"}}),
    (80, "preempted", 0, 1, {}),
    (82, "checkpoint-started", 0, 1, {"details": {"step": "250"}}),
    (83, "checkpoint-committed", 0, 1, {"details": {"step": "250"}}),
    (85, "requeued", 0, 1, {}),
    (300, "launched", 1, 0, {}),
    (301, "resuming", 1, 0, {"details": {"checkpoint": "ckpt/step-250"}}),
    (330, "checkpoint-committed", 1, 0, {"details": {"step": "400"}}),
    (360, "finished", 1, 0, {}),
]


def iso(seconds):
    return (START + timedelta(seconds=seconds)).isoformat(timespec="milliseconds")[:-6] + "Z"


def event_lines():
    return [json.dumps({"time": iso(t), "event": kind, "allocation": a, "attempt": k, **extra})
            for t, kind, a, k, extra in EVENTS]


def throughput_lines():
    """Two ranks, a refresh every 5 s inside each attempt; rank 1 has no rate once."""
    lines = []
    for a, k, first, last in ATTEMPTS:
        for i, t in enumerate(range(first + 2, last, 5)):
            rates = [100.0 + i, None if (a, k, i) == (0, 1, 1) else 90.0 + i]
            lines.append(json.dumps({"time": iso(t), "allocation": a, "attempt": k, "ranks": [0, 1],
                                     "steps": [10 * i, 10 * i], "samples": [320 * i, 320 * i],
                                     "samples_per_second": rates, "lateness_seconds": [0.1, 0.4]}))
    return lines


def metrics_lines():
    lines = []
    for a, k, first, _ in ATTEMPTS:
        for i in range(4):
            acc = "NaN" if (a, k, i) == (0, 1, 2) else 0.5
            values = {"loss": 1.0 / (1 + i + first), "acc": acc}
            lines.append(json.dumps({"time": iso(first + 3 + i), "allocation": a, "attempt": k,
                                     "rank": 0, "step": first + i, "values": values}))
    return lines


def write_job(directory, events=True, throughput=True, metrics=True):
    directory.mkdir(parents=True, exist_ok=True)
    for wanted, name, lines in ((events, "events.jsonl", event_lines()),
                                (throughput, "throughput.jsonl", throughput_lines()),
                                (metrics, "metrics.jsonl", metrics_lines())):
        if wanted:
            (directory / name).write_text("".join(line + "\n" for line in lines))
    return directory


def run_report(*args):
    return subprocess.run([sys.executable, "-m", "primus.report", *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))


def load(path):
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """(job directory, completed process) of one report on the synthetic job."""
    job = write_job(tmp_path_factory.mktemp("report") / "job")
    return job, run_report(job)


def test_report_json_holds_every_event_and_a_series_per_rank_and_attempt(reported):
    job, done = reported
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = job / "report"
    names = ["report.json", "throughput.png", "events.png", "scalars.png", "report.html"]
    assert sorted(done.stdout.split()) == sorted(str(out / n) for n in names)
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    data = load(out / "report.json")
    assert data["job_dir"] == str(job)
    assert data["events"] == [json.loads(line) for line in
                              (job / "events.jsonl").read_text().splitlines()]
    runs = {(a, k) for a, k, _, _ in ATTEMPTS}
    assert sorted(data["throughput"]) == ["0", "1"]
    for rank, points in data["throughput"].items():
        assert {(p["allocation"], p["attempt"]) for p in points} == runs
        assert [p["time"] for p in points] == sorted(p["time"] for p in points)
        expected = [100.0 + i if rank == "0" else (None if (a, k, i) == (0, 1, 1) else 90.0 + i)
                    for a, k, first, last in ATTEMPTS
                    for i, _ in enumerate(range(first + 2, last, 5))]
        assert [p["samples_per_second"] for p in points] == expected
        assert set(points[0]) >= {"time", "allocation", "attempt", "steps", "samples",
                                  "samples_per_second"}
    assert data["attempts"] == [{"allocation": a, "attempt": k, "start": iso(first),
                                 "end": iso(last)} for a, k, first, last in ATTEMPTS]
    assert sorted(data["scalars"]) == ["acc", "loss"]
    assert len(data["scalars"]["loss"]) == 12
    assert {p["rank"] for p in data["scalars"]["acc"]} == {0}
    assert [p["value"] for p in data["scalars"]["acc"]].count("NaN") == 1
    assert data["figures"] == ["throughput.png", "events.png", "scalars.png"]
    assert data["summary"] == {
        "allocations": 2, "attempts": 3, "restarts": 1, "requeues": 1,
        "checkpoints_committed": 3, "first_event": {"time": iso(0), "event": "launched"},
        "last_event": {"time": iso(360), "event": "finished"}, "final_state": "finished"}


def test_the_figures_are_png_images(reported):
    from matplotlib import image

    job, done = reported
    assert done.returncode == 0, done.stderr
    for name in ("throughput.png", "events.png", "scalars.png"):
        path = job / "report" / name
        assert path.read_bytes()[:8] == PNG_SIGNATURE, name
        pixels = image.imread(str(path))
        assert pixels.shape[0] > 100 and pixels.shape[1] > 100, name
        assert pixels.std() > 0, f"{name} is blank"


def test_the_timeline_marks_each_kind_of_event_in_its_colour(reported):
    from matplotlib import colors, image

    job, done = reported
    assert done.returncode == 0, done.stderr
    pixels = image.imread(str(job / "report" / "events.png"))[..., :3]
    for kind in {kind for _, kind, *_ in EVENTS}:
        rgb = colors.to_rgb(report.category(kind)[2])
        assert (abs(pixels - rgb) < 0.02).all(axis=-1).any(), f"no {kind} marker"


def test_the_page_shows_the_figures_and_escapes_what_it_read(reported):
    job, done = reported
    assert done.returncode == 0, done.stderr
    page = (job / "report" / "report.html").read_text()
    for name in ("throughput.png", "events.png", "scalars.png"):
        assert f'src="{name}"' in page
    assert "<script" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "http://" not in page and "https://" not in page
    assert page.count("<tr><td>") >= len(EVENTS)


def test_out_names_another_directory_and_without_metrics_there_is_no_scalars_figure(tmp_path):
    job = write_job(tmp_path / "job", metrics=False)
    done = run_report(job, "--out", tmp_path / "elsewhere")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "elsewhere"
    assert sorted(os.listdir(out)) == ["events.png", "report.html", "report.json",
                                       "throughput.png"]
    assert not (job / "report").exists()
    data = load(out / "report.json")
    assert data["scalars"] == {} and data["figures"] == ["throughput.png", "events.png"]
    assert "scalars.png" not in (out / "report.html").read_text()


def test_a_directory_without_job_files_is_an_error_and_nothing_is_written(tmp_path):
    done = run_report(tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"primus.report: {tmp_path}: ")
    assert "events.jsonl" in done.stderr and "metrics.jsonl" in done.stderr
    assert os.listdir(tmp_path) == []


def test_a_missing_job_directory_is_an_error(tmp_path):
    done = run_report(tmp_path / "nowhere", "--out", tmp_path / "out")
    assert done.returncode == 2
    assert done.stderr.startswith(f"primus.report: {tmp_path / 'nowhere'}: ")
    assert done.stdout == "" and os.listdir(tmp_path) == []


def test_a_malformed_line_is_skipped_with_one_warning(tmp_path):
    job = write_job(tmp_path / "job")
    lines = event_lines()
    (job / "events.jsonl").write_text("\n".join(lines[:2] + ["{not json", "", '"a string"']
                                                 + lines[2:]) + "\n")
    done = run_report(job)
    assert done.returncode == 0, done.stderr
    warnings = done.stderr.splitlines()
    assert len(warnings) == 2, done.stderr
    assert f"{job / 'events.jsonl'}:3:" in warnings[0]
    assert f"{job / 'events.jsonl'}:5:" in warnings[1]
    assert load(job / "report" / "report.json")["events"] == [json.loads(x) for x in lines]


def test_a_truncated_last_line_is_tolerated(tmp_path):
    job = write_job(tmp_path / "job")
    for name in ("events.jsonl", "throughput.jsonl", "metrics.jsonl"):
        with open(job / name, "a") as f:
            f.write('{"time": "2026-12-01T21:0')
    done = run_report(job)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    data = load(job / "report" / "report.json")
    assert len(data["events"]) == len(EVENTS)
    assert sum(len(points) for points in data["throughput"].values()) == 2 * len(throughput_lines())
    assert len(data["scalars"]["loss"]) == len(metrics_lines())


def test_help_and_a_cheap_import():
    done = run_report("--help")
    assert done.returncode == 0 and "JOBDIR" in done.stdout and "--out" in done.stdout
    done = subprocess.run([sys.executable, "-c", "import sys, primus, primus.report; "
                           "print('matplotlib' in sys.modules)"],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert done.stdout.strip() == "False", done.stderr


# ---- the pure parts, without matplotlib ---------------------------------------------------------

def test_times_with_a_trailing_z_are_utc():
    moment = report.parse_time("2026-12-01T21:54:11.123Z")
    assert moment == datetime(2026, 12, 1, 21, 54, 11, 123000, tzinfo=timezone.utc)
    assert report.parse_time("2026-12-01T22:54:11.123+01:00") == moment
    assert report.format_time(moment) == "2026-12-01T21:54:11.123Z"
    with pytest.raises(ValueError):
        report.parse_time("yesterday")


def test_a_line_breaks_between_attempts_and_at_missing_values():
    points = [{"allocation": 0, "attempt": 0, "x": 1, "y": 5.0},
              {"allocation": 0, "attempt": 0, "x": 2, "y": None},
              {"allocation": 0, "attempt": 1, "x": 3, "y": "NaN"},
              {"allocation": 1, "attempt": 0, "x": 4, "y": 7}]
    xs, ys = report.broken_line(points, lambda p: p["x"], lambda p: p["y"])
    assert len(xs) == len(ys) == 6
    assert [x == x for x in xs] == [True, True, False, True, False, True]  # NaN != NaN
    assert ys[0] == 5.0 and ys[5] == 7.0 and all(y != y for y in ys[1:5])


def test_records_normalise_values_and_warn_once_per_bad_line():
    warnings = []
    data = (b'{"time": "2026-12-01T21:00:00Z", "rank": 0, "step": 1, "values": '
            b'{"loss": NaN, "acc": "-inf", "x": "high", "y": 2}}\n'
            b'{"time": "2026-12-01T21:00:01Z", "rank": "0", "step": 2, "values": {}}\n'
            b'{"time": "2026-12-01T21:00:02Z", "rank": 0, "values": {"loss": 1e999}}\n'
            b'{"time": "2026-12-')
    lines = report.records(data, "m.jsonl", report.metrics_record, warnings.append)
    assert [line["values"] for line in lines] == [{"loss": "NaN", "acc": "-Inf", "y": 2},
                                                  {"loss": "+Inf"}]
    assert lines[1]["step"] is None and lines[0]["allocation"] == 0
    assert len(warnings) == 2
    assert warnings[0].startswith("m.jsonl:1: scalar 'x' skipped")
    assert warnings[1].startswith("m.jsonl:2: malformed line skipped")


def test_summary_counts_and_final_state():
    events = [json.loads(line) for line in event_lines()]
    spans = report.attempt_spans(events)
    summary = report.summarize(events[:11], spans)
    assert (summary["allocations"], summary["attempts"], summary["restarts"],
            summary["requeues"], summary["checkpoints_committed"]) == (2, 3, 1, 1, 2)
    assert summary["final_state"] is None and summary["last_event"]["event"] == "requeued"
    failed = {"time": iso(10), "event": "failed", "allocation": 0, "attempt": 0}
    assert report.summarize(events + [failed], spans)["final_state"] == "failed"
    assert report.summarize([], [])["first_event"] is None


def test_event_kinds_fall_in_their_categories():
    expected = {"checkpoint-started": "checkpoint", "checkpoint-committed": "checkpoint",
                "rank-failed": "failure", "hang": "failure", "failed": "failure",
                "restarted": "restart", "preempted": "stop", "time-limit": "stop",
                "requeued": "requeue", "straggler": "straggler", "something-new": "other"}
    assert {kind: report.category(kind)[0] for kind in expected} == expected
    assert len({colour for _, _, colour, _ in report.CATEGORIES}) == len(report.CATEGORIES)
    assert report.timeline_rows([{"event": "zz"}, {"event": "finished"}, {"event": "launched"}]) \
        == ["launched", "finished", "zz"]
