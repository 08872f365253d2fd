"""What a rank tells primus-launch's monitor: the node's numbers parsed from literal /proc texts,
the heartbeat after real should_stop() calls (samples, median step time, last step time, the
agreement waits that show which rank comes late, never a NaN), the GPU part where there is no
GPU, and primus.log without a launcher: its metrics.jsonl lines, which ranks write, and the
arguments it refuses."""

import ctypes
import ctypes.util
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import primus
from primus import _control, _gpu, _metrics, _node_stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_runtime import plain_ranks  # noqa: E402

STAT = """cpu  4705 356 584 3699 23 23 0 0 0 0
cpu0 1393 280 299 1702 11 11 0 0 0 0
cpu1 3312 76 285 1997 12 12 0 0 0 0
intr 114930548 113199788 3 0 5 263 0 4 [... 242 more ...]
ctxt 1990473
"""

MEMINFO = """MemTotal:       16307276 kB
MemFree:          612344 kB
MemAvailable:    9784316 kB
Buffers:          330012 kB
"""

NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 9000000   50000    0    0    0     0          0         0  9000000   50000    0    0    0     0       0          0
  eth0: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0
  ib0:30000 30 0 0 0 0 0 0 40000 40 0 0 0 0 0 0
"""


def test_node_stats_are_parsed_from_literal_proc_texts():
    # user+nice+system+irq+softirq+steal = 4705+356+584+23+0+0; idle+iowait = 3699+23.
    assert _node_stats.cpu_jiffies(STAT) == (5668, 9390)
    later = STAT.replace("cpu  4705 356 584 3699", "cpu  4805 356 584 3999")
    assert _node_stats.cpu_jiffies(later) == (5768, 9790)
    assert _node_stats.cpu_usage_ratio((5668, 9390), (5768, 9790)) == 0.25
    assert _node_stats.cpu_usage_ratio((5668, 9390), (5668, 9390)) is None  # no time passed
    assert _node_stats.cpu_usage_ratio(None, (5768, 9790)) is None
    assert _node_stats.cpu_jiffies("cpu0 1 2 3 4 5\n") is None  # no all-CPU line
    assert _node_stats.cpu_jiffies("cpu  1 2 x 4 5\n") is None

    assert _node_stats.memory_bytes(MEMINFO) == {
        "memory_used_bytes": (16307276 - 9784316) * 1024,
        "memory_available_bytes": 9784316 * 1024}
    without_available = MEMINFO.replace("MemAvailable:    9784316 kB\n", "")
    assert _node_stats.memory_bytes(without_available) == {}
    without_total = MEMINFO.replace("MemTotal:       16307276 kB\n", "")
    assert _node_stats.memory_bytes(without_total) == {"memory_available_bytes": 9784316 * 1024}

    # lo left out; "ib0:30000" (no space after the colon, as large counters print) read too.
    assert _node_stats.network_bytes(NET_DEV) == (31000, 42000)
    cut_short = NET_DEV.replace("eth0: 1000 10 0 0 0 0 0 0 2000 20", "eth0: 1000 10 0")
    assert _node_stats.network_bytes(cut_short) is None
    assert _node_stats.network_bytes(NET_DEV.replace("2000 20", "2x00 20")) is None


def test_node_stats_sample_leaves_out_what_it_cannot_read(tmp_path):
    proc = tmp_path / "proc"
    (proc / "net").mkdir(parents=True)
    (proc / "stat").write_text(STAT)
    (proc / "net" / "dev").write_text(NET_DEV)  # no meminfo
    reader = _node_stats.NodeStats(str(proc))
    assert reader.sample() == {"network_receive_bytes_total": 31000,
                               "network_transmit_bytes_total": 42000}
    (proc / "stat").write_text(STAT.replace("cpu  4705 356 584 3699", "cpu  4805 356 584 3999"))
    (proc / "meminfo").write_text(MEMINFO)
    second = reader.sample()
    assert second["cpu_usage_ratio"] == 0.25
    assert second["memory_available_bytes"] == 9784316 * 1024
    (proc / "net" / "dev").unlink()
    assert "network_receive_bytes_total" not in reader.sample()


def run_python(code, env=None):
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("PRIMUS_", "SLURM_", "RANK", "WORLD", "LOCAL_RANK"))}
    base["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    base.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=base)


HEARTBEATS = """
import json, time, primus
from primus import _control
before = time.time()
primus.should_stop(samples=8)
for pause in (0.05, 0.15, 0.9):   # step durations: median 0.15, mean 0.37, last 0.9
    time.sleep(pause)
    primus.should_stop(samples=8)
after = time.time()
first = _control.heartbeat_message()
time.sleep(0.2)                         # a few jiffies for the node's CPU share
second = _control.heartbeat_message()   # no step since the first
print(json.dumps({"before": before, "after": after, "first": first, "second": second},
                 allow_nan=False))
"""


def test_a_heartbeat_tells_the_steps_samples_and_the_median_step_time(tmp_path):
    result = run_python(HEARTBEATS, {"PRIMUS_JOB_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    out = json.loads(result.stdout)
    first, second = out["first"], out["second"]
    assert first["type"] == "heartbeat"
    assert (first["steps"], first["samples"]) == (4, 32)
    assert 0.15 <= first["step_seconds"] < 0.3, first
    assert out["before"] - 0.001 <= first["last_step_time"] <= out["after"] + 0.001
    assert "wait_seconds" not in first  # a world of one has no agreement
    assert first["rss_bytes"] > 0 and first["cpu_seconds"] > 0
    # No step since: the last known step time, the same counts.
    assert (second["steps"], second["samples"]) == (4, 32)
    assert second["step_seconds"] == first["step_seconds"]
    assert second["last_step_time"] == first["last_step_time"]
    # LOCAL_RANK unset: this process is its node's local rank 0; the CPU share needs two
    # samples.
    assert "cpu_usage_ratio" not in first["node_stats"]
    assert 0 <= second["node_stats"]["cpu_usage_ratio"] <= 1
    assert second["node_stats"]["memory_available_bytes"] > 0


def test_the_first_step_sends_a_heartbeat_at_once_and_later_steps_leave_it_to_the_thread():
    code = ("import json, primus\n"
            "from primus import _control\n"
            "sent = []\n"
            "_control._sock, _control.send = object(), sent.append  # a launcher's socket\n"
            "_control._first_heartbeat_due = True  # as start() sets it where heartbeats run\n"
            "primus.should_stop(samples=8)\n"
            "after_first = [m['steps'] for m in sent if m['type'] == 'heartbeat']\n"
            "primus.should_stop(samples=8)\n"
            "primus.should_stop(samples=8)\n"
            "print(json.dumps([after_first, [m['steps'] for m in sent if m['type'] == 'heartbeat']]))\n")
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [[1], [1]]


def test_no_step_yet_no_step_time_and_a_broken_source_costs_one_warning():
    code = ("import json\n"
            "from primus import _control, _gpu\n"
            "def broken():\n"
            "    raise OSError('the driver went away')\n"
            "_gpu.sample = broken\n"  # stands in for an NVML that fails (no GPU here)
            "for _ in range(3):\n"
            "    print(json.dumps(_control.heartbeat_message(), allow_nan=False))\n")
    result = run_python(code, {"LOCAL_RANK": "1"})
    assert result.returncode == 0, result.stderr
    beats = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(beats) == 3
    for beat in beats:
        assert (beat["steps"], beat["samples"]) == (0, 0)
        assert not {"step_seconds", "last_step_time", "wait_seconds"} & beat.keys()
        assert "node_stats" not in beat  # local rank 1: its node is told by local rank 0
    assert result.stderr.count("primus: warning:") == 1, result.stderr
    assert "the driver went away" in result.stderr


def test_non_finite_floats_never_reach_the_launcher():
    message = {"type": "heartbeat", "step_seconds": math.nan, "cpu_seconds": 1.5,
               "node_stats": {"cpu_usage_ratio": math.inf, "memory_used_bytes": 7},
               "list": [1.0, -math.inf, 2]}
    assert _control.finite_only(message) == {
        "type": "heartbeat", "cpu_seconds": 1.5, "node_stats": {"memory_used_bytes": 7},
        "list": [1.0, 2]}
    json.dumps(_control.finite_only(message), allow_nan=False)


def test_the_agreement_waits_show_which_rank_comes_late():
    """Rank 1 trains 0.2 s longer before each should_stop(): rank 0 waits for it in the
    agreement, rank 1 hardly waits, so the launcher's lateness (median of the ranks' waits
    minus the rank's own) is positive for rank 1 only."""
    script = ("import json, time, primus\n"
              "from primus import _control\n"
              "job = primus.init(torch=False)\n"
              "for step in range(7):\n"
              "    if job.rank == 1:\n"
              "        time.sleep(0.2)\n"
              "    primus.should_stop(samples=2)\n"
              "print(json.dumps(_control.heartbeat_message(), allow_nan=False))\n")
    results = plain_ranks(2, script, lambda rank: {"LOCAL_RANK": str(rank)})
    beats = []
    for code, out, err in results:
        assert code == 0, err
        beats.append(json.loads(out))
    assert [b["samples"] for b in beats] == [14, 14]
    assert beats[0]["wait_seconds"] >= 0.15, beats
    assert beats[1]["wait_seconds"] < 0.1, beats
    # The same steps on both ranks, so the same step time, whoever waits.
    assert abs(beats[0]["step_seconds"] - beats[1]["step_seconds"]) < 0.05, beats
    assert "node_stats" in beats[0] and "node_stats" not in beats[1]


def test_under_primus_ddp_a_rank_slow_before_its_backward_pass_is_seen_late():
    """Under DDP the ranks meet in the gradient all-reduce before should_stop(): a rank that is
    slow before its forward pass makes the others wait there, and they all arrive at
    should_stop() together. primus.ddp's hook times the first bucket's wait and adds it to the
    step's: rank 0 still shows the wait, rank 1 (the slow one) does not."""
    pytest.importorskip("torch")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        master_port = s.getsockname()[1]
    # The model lives in a function, as in a training script: a DDP model still alive when
    # the interpreter tears down (a module global) can make torch 1.13 abort at exit
    # ("terminate called without an active exception"), seen once in fresh-root.
    script = ("import json, time, torch, primus\n"
              "from primus import _control\n"
              "def main():\n"
              "    job = primus.init()\n"
              "    torch.manual_seed(0)\n"
              "    torch.set_num_threads(1)\n"
              "    model = primus.ddp(torch.nn.Linear(8, 2))\n"
              "    x = torch.randn(4, 8)\n"
              "    for step in range(7):\n"
              "        if job.rank == 1:\n"
              "            time.sleep(0.2)\n"
              "        model(x).sum().backward()\n"
              "        primus.should_stop(samples=4)\n"
              "    print(json.dumps(_control.heartbeat_message(), allow_nan=False))\n"
              "main()\n")
    results = plain_ranks(2, script, lambda rank: {"LOCAL_RANK": str(rank),
                                                   "MASTER_PORT": str(master_port)})
    beats = []
    for code, out, err in results:
        assert code == 0, err
        beats.append(json.loads(out.splitlines()[-1]))
    assert beats[0]["wait_seconds"] >= 0.15, beats
    assert beats[1]["wait_seconds"] < 0.1, beats


def test_primus_ddp_times_the_gradient_wait_at_most_every_tenth_of_a_second():
    """The timer's callbacks cost CPU at every step they run: fast steps are sampled, at most
    one every GRADIENT_WAIT_EVERY seconds (the first step always), while with the spacing at 0
    every step is timed; what is timed waits for the next should_stop() (the heartbeat's
    waits)."""
    pytest.importorskip("torch")
    import socket

    script = ("import json, os, time, torch, primus\n"
              "from primus import _control, _ddp\n"
              "timed = []\n"
              "real = _control.gradient_waited\n"
              "def counted(seconds):\n"
              "    timed.append(seconds)\n"
              "    real(seconds)\n"
              "_control.gradient_waited = counted\n"
              "_ddp.GRADIENT_WAIT_EVERY = float(os.environ['WAIT_EVERY'])\n"
              "def main():\n"
              "    primus.init()\n"
              "    torch.set_num_threads(1)\n"
              "    model = primus.ddp(torch.nn.Linear(8, 2))\n"
              "    x = torch.randn(4, 8)\n"
              "    began = time.perf_counter()\n"
              "    for step in range(40):\n"
              "        model(x).sum().backward()\n"
              "    elapsed = time.perf_counter() - began\n"
              "    print(json.dumps({'timed': len(timed), 'elapsed': elapsed, 'sum': sum(timed),\n"
              "                      'pending': _control._gradient_wait}))\n"
              "main()\n")
    for every in ("0.1", "0"):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            master_port = s.getsockname()[1]
        results = plain_ranks(2, script, lambda rank: {"LOCAL_RANK": str(rank), "WAIT_EVERY": every,
                                                       "MASTER_PORT": str(master_port)})
        for code, out, err in results:
            assert code == 0, err
            got = json.loads(out.splitlines()[-1])
            if every == "0":
                assert got["timed"] == 41, got  # and the rehearsal's pass (the first forward)
            else:
                assert 1 <= got["timed"] <= 1 + got["elapsed"] / 0.1, got
                assert got["timed"] < 40, got  # 40 such steps take far less than 4 s
            # No should_stop() took them for a heartbeat: they add up, waiting for the next.
            assert got["pending"] == pytest.approx(got["sum"]), got


def test_should_stop_refuses_samples_that_are_not_a_count():
    for bad, error in ((-1, ValueError), (2.5, TypeError), (True, TypeError), ("8", TypeError)):
        with pytest.raises(error, match=r"should_stop\(samples=\.\.\.\)"):
            primus.should_stop(samples=bad)


def test_without_nvml_the_gpu_part_is_absent_and_the_structs_have_nvmls_layout():
    """This machine has no GPU: only the absent path runs here (no key, no error, no warning,
    NVML tried once), and the ctypes structs are checked against nvml.h's layouts. With
    libnvidia-ml present the sample must at least be well formed."""
    assert ctypes.sizeof(_gpu.Memory) == 24
    assert [getattr(_gpu.Memory, f).offset for f in ("total", "free", "used")] == [0, 8, 16]
    assert ctypes.sizeof(_gpu.Utilization) == 8
    assert [getattr(_gpu.Utilization, f).offset for f in ("gpu", "memory")] == [0, 4]
    sample = _gpu.sample()
    assert _gpu._tried
    if ctypes.util.find_library("nvidia-ml") is None:
        assert sample == {}
        assert _gpu._nvml is None
    else:
        assert set(sample) <= {"gpu_memory_bytes", "gpu_utilization_ratio"}
        assert 0 <= sample.get("gpu_utilization_ratio", 0) <= 1
    assert _gpu.visible_devices(None) is None
    assert _gpu.visible_devices("2,3") == ["2", "3"]
    assert _gpu.visible_devices("GPU-8a1f,MIG-77c2") == ["GPU-8a1f", "MIG-77c2"]
    assert _gpu.visible_devices("0,-1,1") == ["0"]  # CUDA stops at the first non-device
    assert _gpu.visible_devices("") == [] and _gpu.visible_devices("-1") == []


LOG = """
import numpy as np, torch, primus
primus.log(3, loss=0.5, accuracy=np.float32(0.25), tokens=np.int64(7), lr=torch.tensor(1.5),
           bad=float("nan"), up=float("inf"), down=-float("inf"))
primus.log(4, loss=0.25)
"""


def test_log_without_a_launcher_appends_the_launchers_line_format(tmp_path):
    job_dir = tmp_path / "job"
    result = run_python(LOG, {"PRIMUS_JOB_DIR": str(job_dir), "SLURM_RESTART_COUNT": "2",
                              "PRIMUS_LAUNCH_RESTARTS": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert oct(job_dir.stat().st_mode & 0o777) == "0o700"
    metrics = job_dir / "metrics.jsonl"
    assert oct(metrics.stat().st_mode & 0o777) == "0o600"
    lines = metrics.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert list(first) == ["time", "allocation", "attempt", "rank", "step", "values"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["time"]), first
    assert (first["allocation"], first["attempt"], first["rank"], first["step"]) == (2, 1, 0, 3)
    assert first["values"] == {"loss": 0.5, "accuracy": 0.25, "tokens": 7.0, "lr": 1.5,
                               "bad": "NaN", "up": "+Inf", "down": "-Inf"}
    assert '"tokens":7.0,' in lines[0]  # a double, as the launcher writes every scalar
    assert json.loads(lines[1])["values"] == {"loss": 0.25}
    assert lines[1].startswith('{"time":"')  # no spaces, as the launcher's lines


def test_log_counts_rank_0_unless_all_ranks_and_concurrent_lines_never_mix(tmp_path):
    script = ("import primus\n"
              "job = primus.init(torch=False)\n"
              "primus.log(1, only_rank_0=1.0)\n"
              "for step in range(300):\n"
              "    primus.log(step, all_ranks=True, rank_value=float(job.rank), pad=0.1 ** 9)\n")
    results = plain_ranks(3, script, lambda rank: {"PRIMUS_JOB_DIR": str(tmp_path)})
    for code, out, err in results:
        assert code == 0, err
    entries = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [e["rank"] for e in entries if "only_rank_0" in e["values"]] == [0]
    every = [e for e in entries if "rank_value" in e["values"]]
    assert len(every) == 900
    for rank in range(3):
        mine = [e for e in every if e["rank"] == rank]
        assert [e["step"] for e in mine] == list(range(300))
        assert {e["values"]["rank_value"] for e in mine} == {float(rank)}


def test_log_refuses_bad_arguments_naming_them():
    cases = [
        ((-1,), {"loss": 1.0}, ValueError, "step"),
        ((1.5,), {"loss": 1.0}, TypeError, "step"),
        ((True,), {"loss": 1.0}, TypeError, "step"),
        ((1,), {}, ValueError, "no scalars"),
        ((1,), {"1loss": 1.0}, ValueError, "'1loss'"),
        ((1,), {"val-loss": 1.0}, ValueError, "'val-loss'"),
        ((1,), {"x" * 129: 1.0}, ValueError, "x" * 129),
        ((1,), {f"s{i}": 1.0 for i in range(257)}, ValueError, "257 scalars"),
        ((1,), {"done": True}, TypeError, "done"),
        ((1,), {"flag": np.bool_(False)}, TypeError, "flag"),
        ((1,), {"loss": "0.3"}, TypeError, "loss"),
        ((1,), {"loss": 1 + 2j}, TypeError, "loss"),
        ((1,), {"loss": np.array([1.0, 2.0])}, TypeError, "loss"),
        ((1,), {"loss": None}, TypeError, "loss"),
    ]
    for args, scalars, error, named in cases:
        with pytest.raises(error, match=re.escape(named)):
            primus.log(*args, **scalars)


def test_times_are_written_as_the_launcher_writes_them():
    assert _metrics.utc_text(1800000000.5) == "2027-01-15T08:00:00.500Z"
    assert _metrics.utc_text(1800000000.0) == "2027-01-15T08:00:00.000Z"
    line = _metrics.metrics_line(1800000000.25, 4, 9, {"loss": "NaN"})
    assert line.endswith("}\n") and line.count("\n") == 1
    assert json.loads(line)["time"] == "2027-01-15T08:00:00.250Z"
