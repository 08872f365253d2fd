"""What a node's heartbeat tells about the node as a whole: CPU use, memory and network bytes,
from /proc (Linux). Only the node's local rank 0 sends them (primus._control), so that a node
is counted once.

The parse functions take the text of a /proc file and return numbers, or None when the text
lacks what they need; NodeStats reads the files and keeps the CPU counters of the previous
sample, since a usage ratio is a difference between two samples.
"""

# /proc/stat's "cpu" line: user nice system idle iowait irq softirq steal guest guest_nice, in
# jiffies summed over the CPUs. guest and guest_nice are already counted in user and nice, so
# the total stops at steal; idle and iowait are the time not busy.
_CPU_TOTAL_FIELDS = 8
_CPU_IDLE_FIELDS = (3, 4)
_NET_DEV_FIELDS = 16


def cpu_jiffies(stat_text):
    """(busy, total) jiffies over all CPUs from the text of /proc/stat, or None."""
    for line in stat_text.splitlines():
        fields = line.split()
        if not fields or fields[0] != "cpu":
            continue
        try:
            counts = [int(field) for field in fields[1:1 + _CPU_TOTAL_FIELDS]]
        except ValueError:
            return None
        if len(counts) <= max(_CPU_IDLE_FIELDS):
            return None
        total = sum(counts)
        idle = sum(counts[i] for i in _CPU_IDLE_FIELDS)
        return total - idle, total
    return None


def cpu_usage_ratio(before, after):
    """The busy share (0..1) of the CPU time between two (busy, total) samples, or None when no
    time passed between them or the counters went back (a wrapped or reset counter)."""
    if before is None or after is None:
        return None
    busy, total = after[0] - before[0], after[1] - before[1]
    if total <= 0 or busy < 0:
        return None
    return min(1.0, busy / total)


def memory_bytes(meminfo_text):
    """{"memory_used_bytes", "memory_available_bytes"} from the text of /proc/meminfo: used is
    MemTotal - MemAvailable. A value whose lines are missing is left out."""
    kilobytes = {}
    for line in meminfo_text.splitlines():
        name, _, rest = line.partition(":")
        fields = rest.split()
        if name in ("MemTotal", "MemAvailable") and fields:
            try:
                kilobytes[name] = int(fields[0])
            except ValueError:
                continue
    result = {}
    available = kilobytes.get("MemAvailable")
    if available is not None:
        result["memory_available_bytes"] = available * 1024
        total = kilobytes.get("MemTotal")
        if total is not None and total >= available:
            result["memory_used_bytes"] = (total - available) * 1024
    return result


def network_bytes(net_dev_text):
    """(received, transmitted) bytes summed over the interfaces of /proc/net/dev except the
    loopback, or None when an interface's line cannot be read (a partial sum would look like a
    counter that went back)."""
    received = transmitted = 0
    for line in net_dev_text.splitlines():
        name, colon, counters = line.partition(":")
        if not colon or "|" in line:
            continue  # the two header lines
        name = name.strip()
        if name == "lo":
            continue
        # Receive: bytes packets errs drop fifo frame compressed multicast; transmit: bytes
        # packets errs drop fifo colls carrier compressed.
        fields = counters.split()
        if len(fields) < _NET_DEV_FIELDS:
            return None
        try:
            received += int(fields[0])
            transmitted += int(fields[8])
        except ValueError:
            return None
    return received, transmitted


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


class NodeStats:
    """The node_stats of successive heartbeats: call sample() once per heartbeat."""

    def __init__(self, proc="/proc"):
        self._proc = proc
        self._cpu = None  # (busy, total) of the previous sample

    def sample(self):
        """The node's numbers now, as a dict; what cannot be read is left out, and the CPU usage
        is there from the second sample on."""
        stats = {}
        text = _read(self._proc + "/stat")
        cpu = None if text is None else cpu_jiffies(text)
        ratio = cpu_usage_ratio(self._cpu, cpu)
        if ratio is not None:
            stats["cpu_usage_ratio"] = round(ratio, 4)
        if cpu is not None:
            self._cpu = cpu
        text = _read(self._proc + "/meminfo")
        if text is not None:
            stats.update(memory_bytes(text))
        text = _read(self._proc + "/net/dev")
        network = None if text is None else network_bytes(text)
        if network is not None:
            stats["network_receive_bytes_total"], stats["network_transmit_bytes_total"] = network
        return stats
