"""The monitor on the testbed (issue 13): an sbatch job of 4 nodes x 2 ranks under primus-launch
(tests/python/train_tiny.py, heartbeats every second), one rank of which sleeps longer each step.
While it runs: `primus-launch status --json` shows 8 ranks and 4 nodes with advancing steps and
that rank alone flagged as a straggler; a real Prometheus server (Debian's, started here on
loopback, scraping every second the targets in the file_sd file that the launcher writes in the
site's metrics_sd_dir) has every listed metric for every rank, with steps that agree with the
status; `status --watch` in tmux redraws as the job advances; another unprivileged user cannot
read the status. A second job restarts once and is preempted, and `primus-launch report` pictures
both allocations."""

import json
import os
import pwd
import shutil
import struct
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from slurm_jobs import Launch, job_processes, start_again

OTHER_USER = "primus-other"
METRICS = ("primus_steps_total", "primus_samples_total", "primus_last_step_timestamp_seconds",
           "primus_rank_resident_memory_bytes", "primus_rank_lateness_seconds")
JOB_METRICS = ("primus_restarts_total", "primus_requeues_total")
NODE_METRICS = ("primus_node_cpu_usage_ratio", "primus_node_memory_used_bytes",
                "primus_node_network_receive_bytes_total",
                "primus_node_network_transmit_bytes_total")


def status(testbed, prefix, job, *args, check=True):
    return testbed.user_cmd([f"{prefix}/bin/primus-launch", "status", job, *args], check=check)


def status_json(testbed, prefix, job):
    res = status(testbed, prefix, job, "--json", check=False)
    if res.returncode != 0:
        return None
    return json.loads(res.stdout)


class Prometheus:
    """Debian's prometheus on a loopback port, with a file_sd job over the testbed's
    metrics-sd directory and a scrape every second."""

    def __init__(self, testbed):
        self.dir = testbed.workdir / "prometheus"
        self.dir.mkdir()
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        (self.dir / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n"
            "  - job_name: primus\n"
            "    honor_labels: true\n"
            "    file_sd_configs:\n"
            f"      - files: ['{testbed.dir}/metrics-sd/*.json']\n"
            "        refresh_interval: 1s\n")
        self.log = open(self.dir / "log", "w")
        self.proc = subprocess.Popen(
            [shutil.which("prometheus"), f"--config.file={self.dir}/prometheus.yml",
             f"--storage.tsdb.path={self.dir}/data", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        testbed.wait_for(self.ready, 60, lambda: f"prometheus to start: {self.output()}")

    def output(self):
        try:
            with urllib.request.urlopen(self.url + "/api/v1/targets", timeout=5) as response:
                targets = json.load(response)["data"]["activeTargets"]
        except OSError as e:
            targets = str(e)
        return f"targets: {targets}\n" + (self.dir / "log").read_text()[-1500:]

    def ready(self):
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def query(self, expression):
        url = self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": expression})
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def other_user():
    try:
        pwd.getpwnam(OTHER_USER)
    except KeyError:
        subprocess.run(["useradd", "-M", "-s", "/bin/sh", OTHER_USER], check=True)
    return OTHER_USER


def tmux(testbed, *args, check=True):
    socket = testbed.workdir / "tmux.sock"
    return testbed.user_cmd(["tmux", "-S", str(socket), *args], check=check)


@pytest.mark.skipif(os.geteuid() != 0, reason="a second user needs root to be made")
def test_status_prometheus_and_watch_follow_a_job_and_name_its_straggler(testbed, prefix):
    run = Launch(testbed, prefix, "monitor")
    prometheus = Prometheus(testbed)
    try:
        run.submit(launch="--primus-heartbeat-interval=1 --primus-straggler-window=4 "
                          "--primus-metrics=0 --primus-progress-interval=2",
                   env="EPOCHS=40 STEP_SLEEP=0.02 SLOW_RANK=5 SLOW_SLEEP=0.25")
        run.wait_step(3, timeout=120)

        # status --json while it runs: 8 ranks on 4 nodes, steps advancing, rank 5 flagged.
        first = testbed.wait_for(
            lambda: (s := status_json(testbed, prefix, run.job)) and len(s["ranks"]) == 8
            and all(r.get("steps") for r in s["ranks"]) and len(s["nodes"]) == 4 and s,
            60, lambda: f"a status with 8 reporting ranks: {status(testbed, prefix, run.job, check=False)}")
        assert first["state"] == "running" and first["world_size"] == 8, first
        assert sorted(r["node"] for r in first["ranks"]) == ["n1", "n1", "n2", "n2", "n3", "n3",
                                                             "n4", "n4"], first
        flagged = testbed.wait_for(
            lambda: (s := status_json(testbed, prefix, run.job))
            and any(r["straggler"] for r in s["ranks"]) and s,
            60, lambda: f"a straggler: {status_json(testbed, prefix, run.job)}")
        assert [r["rank"] for r in flagged["ranks"] if r["straggler"]] == [5], flagged
        assert flagged["ranks"][5]["lateness_seconds"] > 0.1, flagged
        later = testbed.wait_for(
            lambda: (s := status_json(testbed, prefix, run.job))
            and all(r.get("steps", 0) > f.get("steps", 0) for r, f in zip(s["ranks"],
                                                                          first["ranks"])) and s,
            30, "every rank's steps to advance")
        assert all(r["samples"] > 0 and r["rss_bytes"] > 0 for r in later["ranks"]), later
        for node in later["nodes"]:
            assert node["memory_used_bytes"] > 0 and "network_receive_bytes_total" in node, node
        table = status(testbed, prefix, run.job).stdout
        assert "RANK" in table and "stragglers: rank 5 on n3" in table, table

        # Prometheus finds the job through the file_sd file and scrapes every rank.
        sd_file = testbed.dir / "metrics-sd" / f"{run.job}.json"
        assert sd_file.exists(), list((testbed.dir / "metrics-sd").iterdir())
        job_dir = run.dir / f"primus-{run.job}"
        assert json.loads(sd_file.read_text())[0]["targets"] == [
            (job_dir / "metrics.addr").read_text().strip()]

        def scraped():
            return all(len(prometheus.query(f'{name}{{job="{run.job}"}}')) == 8
                       for name in METRICS)
        testbed.wait_for(scraped, 60, lambda: "every metric of 8 ranks in Prometheus: " +
                         json.dumps({n: len(prometheus.query(n)) for n in METRICS}) +
                         prometheus.output())
        for name in JOB_METRICS:
            assert len(prometheus.query(f'{name}{{job="{run.job}"}}')) == 1, name
        # primus.log(loss=...) on rank 0 (primus.log's default).
        loss = prometheus.query(f'primus_user_loss{{job="{run.job}"}}')
        assert [s["metric"]["rank"] for s in loss] == ["0"], loss
        for name in NODE_METRICS:
            assert len(prometheus.query(f'{name}{{job="{run.job}"}}')) == 4, name
        # The steps agree with the status (read around the query: they only grow). /metrics is
        # built at each GET, so a scrape can be newer than status.json (rewritten every second):
        # the upper bound is a status rewritten after the query.
        before = status_json(testbed, prefix, run.job)
        steps = {int(s["metric"]["rank"]): float(s["value"][1])
                 for s in prometheus.query(f'primus_steps_total{{job="{run.job}"}}')}
        read = status_json(testbed, prefix, run.job)["time"]
        testbed.wait_for(lambda: status_json(testbed, prefix, run.job)["time"] != read, 10,
                         "status.json to be rewritten after the query", 0.1)
        after = status_json(testbed, prefix, run.job)
        for b, a in zip(before["ranks"], after["ranks"]):
            # Prometheus holds a scrape up to a second old.
            assert b["steps"] - 200 <= steps[b["rank"]] <= a["steps"], (steps, before, after)
        lateness = {int(s["metric"]["rank"]): float(s["value"][1])
                    for s in prometheus.query(f'primus_rank_lateness_seconds{{job="{run.job}"}}')}
        assert max(lateness, key=lateness.get) == 5, lateness

        # status --watch in tmux: the table, redrawn as the job advances.
        tmux(testbed, "new-session", "-d", "-s", "watch", "-x", "200", "-y", "40",
             f"{prefix}/bin/primus-launch status --watch --interval 0.5 {run.job}")
        try:
            def screen():
                return tmux(testbed, "capture-pane", "-p", "-t", "watch").stdout
            first_screen = testbed.wait_for(lambda: "RANK" in (s := screen()) and s, 20,
                                            lambda: f"the table in tmux: {screen()}")
            assert "Every 0.5s: primus-launch status" in first_screen, first_screen
            testbed.wait_for(lambda: (s := screen()) != first_screen and "RANK" in s, 20,
                             "the screen to change")
        finally:
            tmux(testbed, "kill-server", check=False)

        # Another user reads nothing of it.
        other = other_user()
        res = subprocess.run(["runuser", "-u", other, "--", f"{prefix}/bin/primus-launch",
                              "status", str(job_dir)], capture_output=True, text=True, timeout=30)
        assert res.returncode != 0 and "permission denied" in res.stderr.lower(), res
        assert not os.access(job_dir, os.R_OK) or (job_dir.stat().st_mode & 0o077) == 0

        assert run.wait_ended(timeout=300) == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(getattr(run, "job", None))
        prometheus.stop()
    final = status_json(testbed, prefix, run.job)
    assert final["state"] == "finished", final
    assert [r["rank"] for r in final["ranks"] if r["straggler"]] == [5], final
    assert all(r["state"] == "exited" and r["ended"] == "exit status 0" for r in final["ranks"])
    assert not (testbed.dir / "metrics-sd" / f"{run.job}.json").exists()
    stragglers = [e for e in run.events() if e["event"] == "straggler"]
    assert stragglers and {e["rank"] for e in stragglers} == {5}, stragglers
    assert "straggler" in run.output() and "primus-launch: " in run.output()
    lines = [json.loads(line) for line in (run.dir / f"primus-{run.job}" / "metrics.jsonl")
             .read_text().splitlines()]
    assert lines and all(line["rank"] == 0 and "loss" in line["values"] for line in lines)


def png_size(path):
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_report_pictures_a_restart_and_a_preemption(testbed, prefix):
    run = Launch(testbed, prefix, "report")
    high = None
    try:
        run.submit(sbatch="-p low --requeue",
                   launch="--primus-heartbeat-interval=1 --primus-max-restarts=1",
                   env=f"EPOCHS=10 STEP_SLEEP=0.3 FAIL_AT=2 FAIL_MARKER={run.dir}/failed")
        testbed.wait_for(lambda: "restarted" in run.milestones() if (
            run.dir / f"primus-{run.job}" / "events.jsonl").exists() else False, 120,
            lambda: f"a restart: {run.output()[-3000:]}")
        run.wait_step(6)
        time.sleep(2)  # a few heartbeats of the second attempt
        high = testbed.sbatch("-p", "high", "-N4", "--exclusive", "-o", "/dev/null",
                              "--wrap", "sleep 1")
        testbed.wait_for(lambda: testbed.job(run.job).get("Restarts") == "1"
                         and testbed.job(run.job).get("JobState") == "PENDING", 120,
                         lambda: f"job {run.job} to be requeued: {testbed.job(run.job)}")
        testbed.wait_ended([high], 120)
        start_again(testbed, run)
        assert run.wait_ended(timeout=300) == "COMPLETED", run.output()[-4000:]
    finally:
        testbed.cancel(high, getattr(run, "job", None))
    res = testbed.user_cmd([f"{prefix}/bin/primus-launch", "report", run.job], timeout=120)
    out = run.dir / f"primus-{run.job}" / "report"
    for name in ("report.html", "report.json", "throughput.png", "events.png", "scalars.png"):
        assert (out / name).exists(), (name, res.stdout, res.stderr)
    for name in ("throughput.png", "events.png", "scalars.png"):
        width, height = png_size(out / name)
        assert width > 100 and height > 100, name
    report = json.loads((out / "report.json").read_text())
    events = [json.loads(line) for line in
              (run.dir / f"primus-{run.job}" / "events.jsonl").read_text().splitlines()]
    assert report["events"] == events
    names = [e["event"] for e in events]
    for wanted in ("rank-failed", "restarted", "preempted", "requeued", "finished"):
        assert wanted in names, names
    # A samples/s series per rank in each attempt that ran: (0, 0), (0, 1) and (1, 0).
    attempts = {(a["allocation"], a["attempt"]) for a in report["attempts"]}
    assert {(0, 0), (0, 1), (1, 0)} <= attempts, report["attempts"]
    for rank in range(8):
        series = report["throughput"][str(rank)]
        covered = {(p["allocation"], p["attempt"]) for p in series
                   if p["samples_per_second"] is not None}
        assert {(0, 1), (1, 0)} <= covered, (rank, covered)
    assert "loss" in report["scalars"]
    assert not job_processes(run.job)
