"""The block device's own counters (/proc/diskstats) around a timed read, so that a benchmark says
how the device served it: the read requests the kernel sent and their mean size, the time each
took, how busy the device was, and what else it did meanwhile (writes, discards: this VM's root
is mounted with online discard, and a file deleted just before issues them)."""

import os
import statistics

# /proc/diskstats, after major, minor and name (Documentation/admin-guide/iostats.rst).
_READS, _READ_SECTORS, _READ_MS, _WRITES = 0, 2, 3, 4
_IO_TICKS = 9
_DISCARDS = 11  # kernels >= 4.18


def device_of(path):
    """The name under /proc/diskstats of the device holding `path`, or None (tmpfs, overlay)."""
    st = os.stat(path)
    link = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    return os.path.basename(os.path.realpath(link)) if os.path.exists(link) else None


def _counters(name):
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 3 and fields[2] == name:
                return [int(v) for v in fields[3:]]
    return None


class DiskCounters:
    """Per label, the counters' differences over each `measure(label, fn)`."""

    def __init__(self, path):
        self.name = device_of(path)
        self.samples = {}

    def measure(self, label, fn):
        before = _counters(self.name) if self.name else None
        result = fn()
        after = _counters(self.name) if before else None
        if before and after:
            self.samples.setdefault(label, []).append([a - b for a, b in zip(after, before)])
        return result

    def summary(self, label, seconds):
        """One line of medians over the samples of `label`; `seconds`: the medians' wall time."""
        rows = self.samples.get(label)
        if not rows:
            return None

        def med(i):
            return statistics.median(r[i] for r in rows)

        reads = med(_READS)
        size_kib = med(_READ_SECTORS) * 512 / 1024 / reads if reads else 0
        ms_each = med(_READ_MS) / reads if reads else 0
        busy = med(_IO_TICKS) / 1000 / seconds if seconds else 0
        discards = f"{med(_DISCARDS):.0f}" if all(len(r) > _DISCARDS for r in rows) else "?"
        return (f"{reads:.0f} reads of {size_kib:.0f} KiB, {ms_each:.2f} ms each, device busy "
                f"{100 * busy:.0f} %, meanwhile {med(_WRITES):.0f} writes and {discards} discards")
