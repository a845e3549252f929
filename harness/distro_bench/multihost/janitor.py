"""`python -m distro_bench.multihost.janitor --pid AGENT --iface IF [--ifb NAME] [--root]`

Removes an agent's shaping once the agent is gone, however it went: an agent cleans up itself on exit,
Ctrl-C and failure, but a SIGKILL (an OOM kill, `kill -9`, a scheduler's hard stop) leaves no chance to.
The agent starts this in a session of its own right after shaping and stops it (SIGTERM: no removal)
before it removes the shaping itself; if the agent dies first, this removes it. Waits with a pidfd
(no polling, no pid reuse race).
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import time

from distro_bench.multihost.hostshaping import IFB, remove


def wait_for_exit(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfd: poll
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)
    try:
        select.select([fd], [], [])
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m distro_bench.multihost.janitor", description=__doc__.split("\n\n")[1])
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--iface", required=True)
    p.add_argument("--ifb", default=None)
    p.add_argument("--root", action="store_true", help="remove the root qdisc too (the agent shaped egress)")
    a = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # the agent cleans up itself
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    wait_for_exit(a.pid)
    problems = remove(a.iface, a.ifb or IFB, root=a.root)
    for line in problems:
        print(f"janitor: {line}", file=sys.stderr)
    print(f"janitor: agent {a.pid} gone; shaping of {a.iface} removed" + (" with problems" if problems else ""),
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
