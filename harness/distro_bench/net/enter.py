"""`python -I harness/distro_bench/net/enter.py [--net PATH] [--drop-caps net_admin,sys_admin] -- ARGV...`

Runs ARGV inside the network namespace PATH (`/run/netns/<name>` or `/proc/<pid>/ns/net`), like
`nsenter --net=PATH` (`ip netns exec` for a named one), and without the listed capabilities in its
bounding set, like `setpriv --bounding-set=-net_admin,-sys_admin`: a root process exec'd without a
capability in its bounding set does not get it back, so a worker can neither reshape its own link
(net_admin) nor enter another namespace (sys_admin). Pure Python (setns(2), prctl(2)), so a run
needs neither util-linux nor iproute2 for it; imports nothing heavy, so it adds ~20 ms per start.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys

PR_CAPBSET_DROP = 24
# linux/capability.h
CAPS = {"chown": 0, "dac_override": 1, "fowner": 3, "kill": 5, "setgid": 6, "setuid": 7, "setpcap": 8,
        "net_bind_service": 10, "net_broadcast": 11, "net_admin": 12, "net_raw": 13, "sys_module": 16,
        "sys_rawio": 17, "sys_chroot": 18, "sys_ptrace": 19, "sys_admin": 21, "sys_boot": 22, "sys_nice": 23,
        "sys_resource": 24, "sys_time": 25, "mknod": 27, "audit_write": 29, "setfcap": 31, "bpf": 39}


def cap_numbers(names: str) -> list[int]:
    out = []
    for n in (x.strip().lower().removeprefix("cap_").removeprefix("-") for x in names.split(",") if x.strip()):
        if n not in CAPS:
            raise ValueError(f"unknown capability {n!r}; known: {', '.join(sorted(CAPS))}")
        out.append(CAPS[n])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="enter.py", description=__doc__.split("\n\n")[1])
    p.add_argument("--net", help="network namespace handle to enter")
    p.add_argument("--drop-caps", default="", help="capabilities to drop from the bounding set, comma-separated")
    p.add_argument("argv", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    cmd = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    if not cmd:
        p.error("no command given")
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        caps = cap_numbers(a.drop_caps)
    except ValueError as e:
        p.error(str(e))
    if a.net:
        try:
            fd = os.open(a.net, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            print(f"distro_bench.net.enter: cannot open {a.net}: {e.strerror}", file=sys.stderr)
            return 125
        if libc.setns(fd, 0x40000000) != 0:
            print(f"distro_bench.net.enter: setns {a.net}: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
            return 125
        os.close(fd)
    for cap in caps:
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            print(f"distro_bench.net.enter: dropping capability {cap}: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
            return 125
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        # 127 as a shell says "not found"; the message names the command, so no one reads it as a network fault.
        print(f"distro_bench.net.enter: cannot run {cmd[0]!r}: {e.strerror}", file=sys.stderr)
        return 127 if isinstance(e, FileNotFoundError) else 126
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
