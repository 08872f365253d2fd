"""A standby: a Python process that primus-launch starts before it is needed
(--primus-recover=rejoin, one machine), that has imported torch and primus already and waits to
become the replacement of a failed rank (docs/architecture.md, "Recovery without a restart").
Becoming a rank then costs no interpreter start and no import of torch, which were nearly all of
a rejoin (1.09 of its 1.14 s at 4 ranks, docs/performance.md).

primus-launch runs it as `python -m primus._standby` in the environment the ranks share, with
its standard input a pipe from the launcher. It imports, then reads one line there: a JSON
object {"argv": the rank's command line after the interpreter, "env": the rank's whole
environment}. It takes that environment as its own, runs the script (`SCRIPT ARGS...`) or the
module (`-m MODULE ARGS...`) as __main__, as the interpreter would have, and exits as the script
does. At the end of its input without a line (the attempt is over) it exits 0 at once. A line
that is not such an object is refused on standard error with status 2 (the new rank has then
failed, and the rejoin gives way to primus-launch's restart)."""

import json
import os
import runpy
import sys

# What the standby imports while it waits: what every primus.train rank imports first, and what
# costs most of a rank's start (torch alone: about 1 s here).
PRELOADED = ("numpy", "torch", "torch.distributed", "torch.nn.parallel", "primus",
             "primus.checkpoint", "primus.comm", "primus.data", "primus._ddp", "primus._train")


class Refused(Exception):
    """An assignment that cannot be run; the message says why."""


def preload():
    import importlib

    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # a rank without it does not need it either; the script imports what it uses


def parse(line):
    """The assignment: (argv, env). Raises Refused for anything but a well-formed one."""
    try:
        message = json.loads(line)
    except ValueError as e:
        raise Refused(f"not JSON: {e}") from None
    if not isinstance(message, dict):
        raise Refused("not a JSON object")
    argv, env = message.get("argv"), message.get("env")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise Refused("'argv' must be a non-empty list of strings")
    if argv[0] == "-m" and len(argv) < 2:
        raise Refused("'argv': -m without a module")
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                            for k, v in env.items()):
        raise Refused("'env' must be an object of strings")
    return argv, env


def become(argv, env):
    """Takes the rank's environment and runs its program as __main__."""
    from . import _env

    _env.adopt(env)
    if argv[0] == "-m":
        sys.argv = [argv[1]] + argv[2:]  # runpy sets argv[0] to the module's file
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")


def main():
    preload()
    line = sys.stdin.readline()
    if not line:
        return 0  # the attempt ended before any rank needed this standby
    try:
        argv, env = parse(line)
    except Refused as e:
        print(f"primus standby: refused the assignment: {e}", file=sys.stderr)
        return 2
    # The rank's standard input is /dev/null, as the launcher gives every rank.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    become(argv, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
