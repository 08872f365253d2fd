"""The rank's end of primus-launch's control channel (docs/architecture.md, "The launcher and its
control channel").

Under primus-launch (PRIMUS_CONTROL set) primus.init() connects there, proving the job secret
with the same handshake as the collectives, and sends JSON lines: a hello; a heartbeat every
PRIMUS_HEARTBEAT_INTERVAL seconds (5; 0: none) from a background thread (heartbeat_message()
says what it holds); events (a stop signal received, a checkpoint started or committed); user
scalars (primus.log); an uncaught exception (type, message, last frame) before the rank dies; a
goodbye at exit. Without PRIMUS_CONTROL nothing is sent, and a failure to reach the launcher is
a warning: the rank is then supervised by its exit status only.

No message carries a NaN or an infinity: Python's json would write them as NaN and Infinity,
which are not JSON, and the launcher would drop the connection over the line.
"""

import atexit
import collections
import json
import math
import os
import socket
import statistics
import sys
import threading
import time
import traceback

from . import _env, _gpu, _node_stats

_lock = threading.Lock()
_sock = None
_stop_reported = False

# What the steps tell the heartbeats. should_stop() (the main thread) writes, the heartbeat
# thread reads and empties the windows, under _stats_lock. A window holds the steps since the
# previous heartbeat, the latest _WINDOW of them when nobody empties it (no launcher).
_WINDOW = 4096
_stats_lock = threading.Lock()
_steps = 0
_samples = 0
_total_steps = None  # the steps of primus.train's whole run, for the heartbeat
# Set where heartbeats run: the first step sends one at once, so that the launcher shows the
# rank running at its step without waiting an interval (5 s) for the thread's first.
_first_heartbeat_due = False
_last_step_at = None      # time.monotonic() of the last should_stop() call
_last_step_time = None    # time.time() of the same call
_step_durations = collections.deque(maxlen=_WINDOW)
_agreement_waits = collections.deque(maxlen=_WINDOW)
_gradient_wait = None  # primus.ddp's gradient wait in this step (None: none), added to the agreement's
_step_seconds = None      # the median step duration of the last window that had steps

_beat_lock = threading.Lock()  # one heartbeat built at a time (the thread, and the goodbye's)
_node_stats_reader = None      # on the node's local rank 0 only
_beat_warned = False
_stopping = threading.Event()

# The dynamic data split (primus.data, --primus-data-mode=dynamic): what primus-launch sends.
_data_cond = threading.Condition()
_data_replies = []        # answers to this rank's requests, oldest first
_data_order = None        # {"step", "stop"}: the checkpoint primus-launch ordered, until saved
_data_stop_saved = False  # a stop checkpoint was saved: should_stop() is True
_reader = None

# A rejoin (primus._rejoin): the newest generation primus-launch announced, and what to call on
# the reader's thread when one arrives (aborting the collectives a failed peer would hold).
_generation_notice = None
_reader_closed = False
_on_generation = None


def connected():
    return _sock is not None


def send(message):
    """Sends one message (a dict); a broken connection is dropped without an error."""
    global _sock
    if _sock is None:
        return
    try:
        line = (json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n").encode()
    except (TypeError, ValueError):
        return  # not JSON (finite_only() keeps heartbeats from getting here)
    with _lock:
        if _sock is None:
            return
        try:
            _sock.sendall(line)
        except OSError:
            try:
                _sock.close()
            finally:
                _sock = None


def event(name, **fields):
    send(dict(type="event", event=name, **fields))


def _rss_bytes():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def finite_only(message):
    """message (a dict) without its NaN and infinite floats, at any depth of dicts and lists:
    a dict loses the key of such a value, a list the element. What the launcher reads must be
    JSON, which has neither."""
    if isinstance(message, dict):
        return {key: finite_only(item) for key, item in message.items() if _finite(item)}
    if isinstance(message, (list, tuple)):
        return [finite_only(item) for item in message if _finite(item)]
    return message


def _finite(value):
    return not isinstance(value, float) or math.isfinite(value)


def _is_local_rank_0():
    try:
        return int(_env.given("LOCAL_RANK") or 0) == 0
    except ValueError:
        return False


def _read_node_stats():
    global _node_stats_reader
    if _node_stats_reader is None:
        _node_stats_reader = _node_stats.NodeStats()
    return _node_stats_reader.sample()


def _warn_once(what, error):
    global _beat_warned
    if not _beat_warned:
        _beat_warned = True
        print(f"primus: warning: {what} failed ({type(error).__name__}: {error}); the "
              "heartbeats go on, and further failures are not reported", file=sys.stderr)


def _part(name, read):
    """read()'s dict, or {} when it raises: one broken source never costs the heartbeat."""
    try:
        return read()
    except Exception as error:  # noqa: BLE001 (the heartbeat thread must go on)
        _warn_once(f"reading the {name} for a heartbeat", error)
        return {}


def training_plan(total_steps):
    """A training loop's plan (primus.train), for the launcher's progress line: the steps of
    the whole run, counted as `steps` is (from the job's start: see resumed_at())."""
    global _total_steps
    _total_steps = int(total_steps)


def heartbeat_message():
    """The heartbeat to send now, a dict; it starts a new window of steps.

    steps: should_stop() calls so far; samples: records consumed so far (primus.data's batches
    and should_stop(samples=n)); cpu_seconds: this process's CPU time; step_seconds: the median
    time between consecutive should_stop() calls in the window (the previous value when the
    window has no step); last_step_time: the UNIX time of the last should_stop() call;
    wait_seconds: the median time spent in should_stop()'s agreement in the window (see
    agreement_waited()); rss_bytes; rejoin_memory_bytes (the committed step kept in memory for a
    rejoin, primus._memory_copy, when one is held); gpu_memory_bytes and gpu_utilization_ratio (0..1) where
    NVML sees this rank's GPU; node_stats, from the node's local rank 0 only: cpu_usage_ratio
    since the previous heartbeat, memory_used_bytes, memory_available_bytes,
    network_receive_bytes_total and network_transmit_bytes_total (all but lo); total_steps once
    a training loop gave its plan (training_plan()). A value that cannot be
    known is left out."""
    global _step_seconds
    with _beat_lock:
        with _stats_lock:
            steps, samples, last_step_time = _steps, _samples, _last_step_time
            durations, waits = list(_step_durations), list(_agreement_waits)
            _step_durations.clear()
            _agreement_waits.clear()
        if durations:
            _step_seconds = statistics.median(durations)
        message = {"type": "heartbeat", "steps": steps, "samples": samples,
                   "cpu_seconds": round(time.process_time(), 3)}
        if _total_steps is not None:
            message["total_steps"] = _total_steps
        if _step_seconds is not None:
            message["step_seconds"] = round(_step_seconds, 6)
        if last_step_time is not None:
            message["last_step_time"] = round(last_step_time, 3)
        if waits:
            message["wait_seconds"] = round(statistics.median(waits), 6)
        rss = _rss_bytes()
        if rss is not None:
            message["rss_bytes"] = rss
        memory_copy = sys.modules.get(__package__ + "._memory_copy")  # loaded by a save
        held = memory_copy.held_bytes() if memory_copy is not None else 0
        if held:
            message["rejoin_memory_bytes"] = held
        message.update(_part("GPU", _gpu.sample))
        if _is_local_rank_0():
            node = _part("node's /proc counters", _read_node_stats)
            if node:
                message["node_stats"] = node
        return finite_only(message)


def heartbeat():
    if _sock is None:
        return
    try:
        message = heartbeat_message()
    except Exception as error:  # noqa: BLE001 (the heartbeat thread must go on)
        _warn_once("building a heartbeat", error)
        return
    send(message)


def step_done(stop_signal, samples=0, agreeing=True):
    """Called by should_stop() once per step, as it is entered: counts the step and its
    samples, times it, and reports a stop signal once. agreeing=False: the step has no
    agreement, and counts with its gradient wait alone (what agreement_waited(None) does, in
    the same call: should_stop() runs at every step)."""
    global _steps, _samples, _last_step_at, _last_step_time, _gradient_wait, _first_heartbeat_due
    now = time.monotonic()
    with _stats_lock:
        if _last_step_at is not None:
            _step_durations.append(now - _last_step_at)
        _last_step_at = now
        _last_step_time = time.time()
        _steps += 1
        _samples += samples
        if not agreeing and _gradient_wait is not None:
            _agreement_waits.append(_gradient_wait)
            _gradient_wait = None
    if _first_heartbeat_due:
        _first_heartbeat_due = False
        heartbeat()
    if stop_signal is not None:
        report_stop_signal(stop_signal)


def resumed_at(step):
    """Called by checkpoint.load(): a process that resumes before its first step counts its
    steps from the checkpoint's, so that the monitor shows the training step (one
    should_stop() per step) rather than the steps of this attempt alone."""
    global _steps
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        return
    with _stats_lock:
        if _steps == 0 and _last_step_at is None:
            _steps = step


def agreement_waited(seconds):
    """Called by should_stop() at a step with an agreement (primus/_agreement.py) with the
    time it took on this rank (the allreduce of the stop flag), or None at a step without one
    (step_done(agreeing=False) does that in its own call).

    The launcher finds late ranks from these waits. The allreduce ends on every rank once the
    last rank has joined it, so a rank waits there for the ranks that come after it: the last to
    arrive waits least, the others about as much longer as it came later. With the medians over
    a window, lateness_r = (median over the ranks of wait) - wait_r is how much later than the
    typical rank rank r arrives, whatever the network's own share of the wait. Under primus.ddp
    the step's gradient wait is added, and a step without an agreement counts with that wait
    alone."""
    global _gradient_wait
    with _stats_lock:
        if seconds is not None or _gradient_wait is not None:
            _agreement_waits.append((seconds or 0.0) + (_gradient_wait or 0.0))
        _gradient_wait = None


def gradient_waited(seconds):
    """Called by primus.ddp at the end of a backward pass with how long this rank waited for
    the gradients to be all-reduced after it computed its last one. Under DDP a rank that is
    slow before or in its backward pass makes the others wait there, not in should_stop(): the
    two waits of a step are added."""
    global _gradient_wait
    with _stats_lock:
        _gradient_wait = (_gradient_wait or 0.0) + seconds


def add_samples(count):
    """Records consumed by this rank (primus.data counts every batch it hands to the loop)."""
    global _samples
    with _stats_lock:
        _samples += count


def report_stop_signal(stop_signal):
    global _stop_reported
    if stop_signal is None or _stop_reported or _sock is None:
        return
    _stop_reported = True
    import signal as _signal

    try:
        name = _signal.Signals(stop_signal).name
    except ValueError:
        name = str(stop_signal)
    event("stop-signal", signal=name, step=_steps)


def _heartbeats(interval, stop_signal_of):
    while not _stopping.wait(interval):
        heartbeat()
        try:
            report_stop_signal(stop_signal_of())
        except Exception as error:  # noqa: BLE001 (the heartbeat thread must go on)
            _warn_once("reporting a stop signal", error)


def _read_launcher():
    """The reader of what primus-launch sends (started by the first data request)."""
    global _data_order
    buffer = b""
    while True:
        sock = _sock
        if sock is None:
            break
        try:
            chunk = sock.recv(1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            if message.get("type") == "generation":
                _generation_arrived(message)
                continue
            if message.get("type") != "data":
                continue
            with _data_cond:
                if message.get("op") == "checkpoint":
                    _data_order = {"step": message.get("step"), "stop": bool(message.get("stop"))}
                else:
                    _data_replies.append(message)
                _data_cond.notify_all()
    global _reader_closed
    with _data_cond:
        _data_replies.append({"op": "error", "message": "the connection to primus-launch closed"})
        _reader_closed = True
        _data_cond.notify_all()


def _generation_arrived(message):
    """A generation notice: kept (the newest), its callback run, its waiters woken."""
    global _generation_notice
    generation = message.get("generation")
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 1:
        return
    with _data_cond:
        if _generation_notice is not None and _generation_notice["generation"] >= generation:
            return
        _generation_notice = dict(message)
        callback = _on_generation
        _data_cond.notify_all()
    if callback is not None:
        try:
            callback(message)
        except Exception as error:  # noqa: BLE001 (the reader must go on)
            _warn_once("handling a generation notice", error)


def start_reader(on_generation=None):
    """Starts the reader of what primus-launch sends, if it is not running (a rejoin needs it
    from the start; the dynamic data mode starts it at its first request). `on_generation(notice)`
    runs on the reader's thread for each new generation notice."""
    global _reader, _on_generation
    if _sock is None:
        return False
    with _data_cond:
        if on_generation is not None:
            _on_generation = on_generation
        if _reader is None:
            _reader = threading.Thread(target=_read_launcher, name="primus-launcher-reader",
                                       daemon=True)
            _reader.start()
    return True


def wait_generation(after, timeout, give_up=None):
    """The newest generation notice above `after`, waiting up to `timeout` seconds for one;
    None when none came, the connection to primus-launch closed, or give_up() (asked every 0.2
    s: a stop signal) said so."""
    deadline = time.monotonic() + timeout
    with _data_cond:
        while True:
            notice = _generation_notice
            if notice is not None and notice["generation"] > after:
                return dict(notice)
            left = deadline - time.monotonic()
            if left <= 0 or _reader_closed or (give_up is not None and give_up()):
                return None
            _data_cond.wait(min(left, 0.2))


def data_request(message, interruptible=False):
    """Sends a data request to primus-launch and waits for its answer. With interruptible, a
    checkpoint order that arrives first ends the wait: None (the launcher dropped the request)."""
    if _sock is None:
        raise RuntimeError("primus.data's dynamic mode needs primus-launch (its control channel "
                           "hands out the splits); run the job under primus-launch")
    start_reader()
    with _data_cond:
        if interruptible and _data_order is not None:
            return None
    send(dict(type="data", **message))
    with _data_cond:
        while True:
            if _data_replies:
                reply = _data_replies.pop(0)
                if reply.get("op") == "error":
                    raise RuntimeError(f"primus-launch: {reply.get('message')}")
                return reply
            if interruptible and _data_order is not None:
                return None
            _data_cond.wait()


def data_send(message):
    send(dict(type="data", **message))


def data_order():
    """The checkpoint primus-launch ordered and this rank has not saved yet, or None."""
    with _data_cond:
        return None if _data_order is None else dict(_data_order)


def data_order_done(stop):
    global _data_order, _data_stop_saved
    with _data_cond:
        _data_order = None
        if stop:
            _data_stop_saved = True


def data_stop_saved():
    return _data_stop_saved


_lost_peer = None  # the rank whose connection this rank lost first (primus.comm's PeerFailure)


def note_lost_peer(error):
    """Keeps the peer of a PeerFailure (its `peer`) that a caller turns into another error (torch's
    reducer does), for the exception report: the launcher then blames that peer, not this rank."""
    global _lost_peer
    peer = getattr(error, "peer", None)
    if _lost_peer is None and isinstance(peer, int) and peer >= 0:
        _lost_peer = peer


def forget_lost_peer():
    """A new generation (a rejoin): the peer lost in the last one is no longer this rank's."""
    global _lost_peer
    _lost_peer = None


def lost_peer_of(value):
    """The rank whose lost connection caused `value` (its PeerFailure, or one in its chain of
    causes, or one noted earlier), or None."""
    seen = set()
    while value is not None and id(value) not in seen:
        seen.add(id(value))
        peer = getattr(value, "peer", None)
        if isinstance(peer, int) and peer >= 0:
            return peer
        value = value.__cause__ or value.__context__
    return _lost_peer


def _report_exception(kind, value, tb):
    where = ""
    frames = traceback.extract_tb(tb)
    if frames:
        last = frames[-1]
        where = f"{last.filename}:{last.lineno} in {last.name}"
    message = {"type": "exception", "exception": getattr(kind, "__name__", str(kind)),
               "message": str(value)[:4000], "where": where}
    peer = lost_peer_of(value)
    if peer is not None:
        message["peer"] = peer
    send(message)


def _goodbye():
    _stopping.set()
    heartbeat()
    send({"type": "goodbye", "reason": "exit"})


def connect(rank, secret, stop_signal_of):
    """Connects when PRIMUS_CONTROL is set; True when connected."""
    global _sock, _first_heartbeat_due
    address = _env.given("PRIMUS_CONTROL")
    if not address or _sock is not None:
        return _sock is not None
    if not secret:
        print("primus: warning: PRIMUS_CONTROL is set but there is no job secret; not reporting "
              "to primus-launch", file=sys.stderr)
        return False
    from . import _coll

    try:
        fd = _coll.control_connect(address, secret, rank, 30.0)
    except Exception as e:  # noqa: BLE001 (any failure: the rank runs on, unsupervised)
        print(f"primus: warning: cannot report to primus-launch at {address} ({e}); this rank "
              "is supervised by its exit status only", file=sys.stderr)
        return False
    _sock = socket.socket(fileno=fd)
    _sock.setblocking(True)
    send({"type": "hello", "attempt": _env.count_variable("PRIMUS_LAUNCH_RESTARTS"),
          "node": _env.given("SLURMD_NODENAME") or socket.gethostname(), "pid": os.getpid()})
    interval = float(_env.text("PRIMUS_HEARTBEAT_INTERVAL") or 0)
    if interval > 0:
        _first_heartbeat_due = True
        threading.Thread(target=_heartbeats, args=(interval, stop_signal_of),
                         name="primus-heartbeat", daemon=True).start()
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        _report_exception(kind, value, tb)
        previous(kind, value, tb)

    sys.excepthook = excepthook
    atexit.register(_goodbye)
    return True
