"""The rank's end of primus-launch's control channel (docs/architecture.md, "The launcher and its
control channel").

Under primus-launch (PRIMUS_CONTROL set) primus.init() connects there, proving the job secret
with the same handshake as the collectives, and sends JSON lines: a hello; a heartbeat every
PRIMUS_HEARTBEAT_INTERVAL seconds (5; 0: none) from a background thread, with the steps done
(counted by primus.should_stop()), the last step's time, RSS and CPU time; events (a stop signal
received, a checkpoint started or committed); an uncaught exception (type, message, last frame)
before the rank dies; a goodbye at exit. Without PRIMUS_CONTROL nothing is sent, and a failure
to reach the launcher is a warning: the rank is then supervised by its exit status only.
"""

import atexit
import json
import os
import socket
import sys
import threading
import time
import traceback

_lock = threading.Lock()
_sock = None
_steps = 0
_last_step_at = None
_step_seconds = None
_stop_reported = False
_stopping = threading.Event()

# The dynamic data split (primus.data, --primus-data-mode=dynamic): what primus-launch sends.
_data_cond = threading.Condition()
_data_replies = []        # answers to this rank's requests, oldest first
_data_order = None        # {"step", "stop"}: the checkpoint primus-launch ordered, until saved
_data_stop_saved = False  # a stop checkpoint was saved: should_stop() is True
_reader = None


def connected():
    return _sock is not None


def send(message):
    """Sends one message (a dict); a broken connection is dropped without an error."""
    global _sock
    if _sock is None:
        return
    line = (json.dumps(message, separators=(",", ":")) + "\n").encode()
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


def heartbeat():
    message = {"type": "heartbeat", "steps": _steps, "cpu_seconds": round(time.process_time(), 3)}
    if _step_seconds is not None:
        message["step_seconds"] = round(_step_seconds, 6)
    rss = _rss_bytes()
    if rss is not None:
        message["rss_bytes"] = rss
    send(message)


def step_done(stop_signal):
    """Called by should_stop() once per step: counts it, and reports a stop signal once."""
    global _steps, _last_step_at, _step_seconds
    now = time.monotonic()
    if _last_step_at is not None:
        _step_seconds = now - _last_step_at
    _last_step_at = now
    _steps += 1
    report_stop_signal(stop_signal)


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
        report_stop_signal(stop_signal_of())


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
            if not isinstance(message, dict) or message.get("type") != "data":
                continue
            with _data_cond:
                if message.get("op") == "checkpoint":
                    _data_order = {"step": message.get("step"), "stop": bool(message.get("stop"))}
                else:
                    _data_replies.append(message)
                _data_cond.notify_all()
    with _data_cond:
        _data_replies.append({"op": "error", "message": "the connection to primus-launch closed"})
        _data_cond.notify_all()


def data_request(message, interruptible=False):
    """Sends a data request to primus-launch and waits for its answer. With interruptible, a
    checkpoint order that arrives first ends the wait: None (the launcher dropped the request)."""
    global _reader
    if _sock is None:
        raise RuntimeError("primus.data's dynamic mode needs primus-launch (its control channel "
                           "hands out the splits); run the job under primus-launch")
    with _data_cond:
        if _reader is None:
            _reader = threading.Thread(target=_read_launcher, name="primus-launcher-reader",
                                       daemon=True)
            _reader.start()
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


def _report_exception(kind, value, tb):
    where = ""
    frames = traceback.extract_tb(tb)
    if frames:
        last = frames[-1]
        where = f"{last.filename}:{last.lineno} in {last.name}"
    send({"type": "exception", "exception": getattr(kind, "__name__", str(kind)),
          "message": str(value)[:4000], "where": where})


def _goodbye():
    _stopping.set()
    heartbeat()
    send({"type": "goodbye", "reason": "exit"})


def connect(rank, secret, stop_signal_of):
    """Connects when PRIMUS_CONTROL is set; True when connected."""
    global _sock
    address = os.environ.get("PRIMUS_CONTROL")
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
    send({"type": "hello", "attempt": int(os.environ.get("PRIMUS_LAUNCH_RESTARTS", "0") or 0),
          "node": os.environ.get("SLURMD_NODENAME") or socket.gethostname(), "pid": os.getpid()})
    interval = float(os.environ.get("PRIMUS_HEARTBEAT_INTERVAL", "5") or 0)
    if interval > 0:
        threading.Thread(target=_heartbeats, args=(interval, stop_signal_of),
                         name="primus-heartbeat", daemon=True).start()
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        _report_exception(kind, value, tb)
        previous(kind, value, tb)

    sys.excepthook = excepthook
    atexit.register(_goodbye)
    return True
