"""A node's standby under srun (--primus-recover=rejoin; docs/architecture.md, "Under srun"): one
Python process per node of the step, started by the task wrapper of the node's first task once
every rank is up, that has imported torch and primus (primus._standby.preload) and serves the
node's task wrappers: each replacement it is asked for is a fork of itself that becomes the rank.

Under srun the replacement of a failed rank must run in that rank's task, whose wrapper reports
its end; a standby started by another task's wrapper cannot become its child. So this standby
does not become the rank itself (as primus._standby does on one machine) but forks: the fork
becomes the rank, this process waits for it and reports its wait status to the wrapper that
asked, and stays ready for the next one.

`python -m primus._standby_node NAME` listens on the abstract Unix socket NAME
(SOCK_SEQPACKET; the wrapper names it from the job, the step and the node). It binds only once
its imports are done, so a wrapper that finds no listener starts its replacement afresh. A
request is one message: the assignment line of primus._standby ({"argv": [...], "env": {...}},
and "cpus": the CPUs the asking task is bound to, which the fork binds itself to, since Slurm
bound this process to the first task's) with one file descriptor, where the rank's standard
output and error go. The answers, one
message each: {"pid": N} once the fork exists, then {"wait_status": W} when it has ended, or
{"error": "..."} for a request refused. Only a peer of this process's user is served (its
credentials checked). A wrapper that closes its connection has its rank killed. Its standard
input is a pipe from the wrapper that started it: at its end no request is taken any more, and
this process exits once the ranks it made have ended. The stop signals are ignored here (Slurm
signals every process of the step; the rank that is a fork gets them as any rank does)."""

import ctypes
import json
import os
import select
import signal
import socket
import struct
import sys

from . import _standby

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
MAX_REQUEST = 1 << 20


def _prctl(option, value):
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _send(conn, message):
    try:
        conn.send(json.dumps(message).encode())
    except OSError:
        pass


class Node:
    """The listening socket, the wrappers' connections and the ranks made for them."""

    def __init__(self, name):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        self.listener.bind("\0" + name)
        self.listener.listen(16)
        self.ranks = {}  # pid -> the connection of the wrapper that asked for it
        self.owner_open = True

    def take(self, conn):
        """One request: the fork's (argv, env, fd) in the child, None in this process."""
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", creds)[1] != os.getuid():
            conn.close()
            return None
        try:
            data, fds, _flags, _addr = socket.recv_fds(conn, MAX_REQUEST, 1)
        except OSError as e:
            print(f"primus standby: cannot read a request: {e}", file=sys.stderr, flush=True)
            conn.close()
            return None
        try:
            if len(fds) != 1:
                raise _standby.Refused("no output descriptor with the request")
            line = data.decode("utf-8", "replace")
            argv, env = _standby.parse(line)
            cpus = json.loads(line).get("cpus")
            if cpus is not None and not (isinstance(cpus, list) and cpus and all(
                    isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus)):
                raise _standby.Refused("'cpus' must be a non-empty list of CPU numbers")
        except _standby.Refused as e:
            _send(conn, {"error": str(e)})
            for fd in fds:
                os.close(fd)
            conn.close()
            return None
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            conn.close()
            return argv, env, fds[0], cpus
        os.close(fds[0])
        print(f"primus standby: pid {pid} becomes rank {env.get('RANK', '?')}", flush=True)
        _send(conn, {"pid": pid})
        self.ranks[pid] = conn
        return None

    def close_all(self):
        self.listener.close()
        for conn in self.ranks.values():
            if conn is not None:
                conn.close()

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid not in self.ranks:
                continue  # an orphan of a rank (a DataLoader worker), adopted as subreaper
            conn = self.ranks.pop(pid)
            if conn is not None:
                _send(conn, {"wait_status": status})
                conn.close()
            self.kill_orphans()

    def kill_orphans(self):
        """What an ended rank left behind, adopted here: killed, as its wrapper would have."""
        try:
            with open(f"/proc/self/task/{os.getpid()}/children") as f:
                children = [int(p) for p in f.read().split()]
        except OSError:
            return
        for pid in children:
            if pid not in self.ranks:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def serve(self):
        """Until the owner's pipe has closed and every rank made here has ended; in a fork, the
        rank it is to become."""
        while self.owner_open or self.ranks:
            watched = [self.listener] if self.owner_open else []
            watched += [conn for conn in self.ranks.values() if conn is not None]
            if self.owner_open:
                watched.append(sys.stdin)
            readable, _, _ = select.select(watched, [], [], 0.05)
            for item in readable:
                if item is sys.stdin:
                    if not os.read(0, 4096):
                        self.owner_open = False
                elif item is self.listener:
                    conn, _ = self.listener.accept()
                    became = self.take(conn)
                    if became is not None:
                        return became
                else:
                    self.drop(item)
            self.reap()
        return None

    def drop(self, conn):
        """A wrapper's connection closed (or sent what it may not): its rank goes."""
        for pid, c in list(self.ranks.items()):
            if c is conn:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
                self.ranks[pid] = None  # reaped later, with no one to tell
        conn.close()


def become_rank(node, argv, env, output, cpus):
    """In the fork: the rank's output and CPUs, a fresh signal state, and the rank's program."""
    node.close_all()
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.close(output)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)
        except OSError as e:
            print(f"primus standby: the rank keeps the standby's CPUs, not {cpus}: {e}",
                  file=sys.stderr, flush=True)
    _standby.become(argv, env)


def main(argv):
    if len(argv) != 2 or not argv[1]:
        print("usage: python -m primus._standby_node SOCKET_NAME", file=sys.stderr)
        return 2
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    _standby.preload()
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        node = Node(argv[1])
    except OSError as e:
        print(f"primus standby: cannot listen on @{argv[1]}: {e}", file=sys.stderr)
        return 1
    print(f"primus standby: ready on @{argv[1]}", flush=True)
    became = node.serve()
    if became is None:
        return 0
    become_rank(node, *became)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
