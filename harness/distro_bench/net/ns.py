"""Network namespaces without system binaries beyond `tc`: pyroute2 creates namespaces, links, bridges
and addresses and turns ethtool features off; commands (`tc`, a worker) run inside a namespace through
`harness/distro_bench/net/enter.py`, which enters it with setns(2) and may drop capabilities first.

A namespace is a `NetnsRef`: a named one (`/run/netns/<name>`, ours) or any other by its handle
path (a container's `/proc/<pid>/ns/net`), so ours and Docker's share one code path.
"""

from __future__ import annotations

import ctypes
import fnmatch
import os
import socket
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distro_bench.errors import HarnessError

NETNS_DIR = "/run/netns"
# Run as a file in isolated mode (-I): it imports only the standard library, so it works whatever
# PYTHONPATH or install the caller has, and leaves the exec'd command's environment untouched.
ENTER_SCRIPT = str(Path(__file__).with_name("enter.py"))
CLONE_NEWNET = 0x40000000

# Offloads that let the kernel hand a delay line (or a shaper) 64 KiB super-frames instead of MTU-sized
# ones: TCP/UDP segmentation on transmit and receive coalescing. Patterns, not names, because kernels
# add variants (6.18 has tx-tcp-accecn-segmentation, which a fixed `ethtool -K tso off` leaves on).
# Checksum offload stays on: the delay line copes with partial checksums.
OFFLOAD_PATTERNS: tuple[str, ...] = (
    "tx-tcp*-segmentation", "tx-generic-segmentation", "tx-udp-segmentation", "tx-gso-list",
    "rx-gro", "rx-gro-list", "rx-gro-hw", "rx-lro",
)


class NetCommandError(HarnessError):
    """A network operation (netlink, tc, ethtool feature, ...) failed; the message says which and why."""


@dataclass(frozen=True)
class NetnsRef:
    """A network namespace by the path of its handle; `path=None` is the caller's own namespace."""

    path: str | None
    label: str = ""

    @classmethod
    def named(cls, name: str) -> NetnsRef:
        return cls(path=f"{NETNS_DIR}/{name}", label=name)

    @classmethod
    def of_pid(cls, pid: int) -> NetnsRef:
        return cls(path=f"/proc/{pid}/ns/net", label=f"pid {pid}")

    @classmethod
    def current(cls) -> NetnsRef:
        return cls(path=None, label="root")

    def wrap(self, argv: list[str], *, drop_caps: Iterable[str] = (), no_caps: bool = False,
             user: tuple[int, int] | None = None, expose: Iterable[str] = ()) -> list[str]:
        """`argv` as a command that runs inside this namespace (only the network namespace is entered),
        without `drop_caps` (e.g. net_admin, sys_admin) in its capability bounding set; `no_caps`: with no
        capability at all and no_new_privs; `user`: as that (uid, gid), `expose`: paths made reachable to it
        where a folder on the way is not (harness/distro_bench/net/enter.py)."""
        drop = ",".join(drop_caps)
        less = [*(["--drop-caps", drop] if drop else []), *(["--no-caps"] if no_caps else []),
                *(["--user", f"{user[0]}:{user[1]}"] if user is not None else []),
                *(x for p in (expose if user is not None else ()) for x in ("--expose", p))]
        if self.path is None and not less:
            return list(argv)
        if not less and argv and argv[0] == "tc" and self.path is not None and self.path.startswith(NETNS_DIR + "/"):
            # tc enters a named namespace itself (-n): no interpreter start per tc call.
            return [argv[0], "-n", self.path[len(NETNS_DIR) + 1:], *argv[1:]]
        return [sys.executable, "-I", ENTER_SCRIPT, *(["--net", self.path] if self.path else []), *less, "--", *argv]

    def __str__(self) -> str:
        return self.label or str(self.path)


# ---- entering a namespace in this process ------------------------------------------------------

_libc = None


def setns(fd: int) -> None:
    """setns(2) into the network namespace open as `fd`, for the calling thread only."""
    if hasattr(os, "setns"):  # Python >= 3.12
        os.setns(fd, os.CLONE_NEWNET)  # type: ignore[attr-defined]  # new in 3.12, checked above; mypy targets 3.11
        return
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextmanager
def entered(ns: NetnsRef) -> Iterator[None]:
    """The calling thread inside `ns` for the block (sockets made there stay in `ns` after), then back.
    Per thread: other threads of the process are not moved."""
    if ns.path is None:
        yield
        return
    try:
        target = os.open(ns.path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise NetCommandError(f"[{ns}] cannot open namespace {ns.path}: {e.strerror}") from None
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        try:
            setns(target)
        except OSError as e:
            raise NetCommandError(f"[{ns}] cannot enter the namespace: {e.strerror or e}") from None
        try:
            yield
        finally:
            setns(home)
    finally:
        os.close(target)
        os.close(home)


@contextmanager
def iproute(ns: NetnsRef):
    """A pyroute2 IPRoute whose netlink socket lives in `ns`."""
    from pyroute2 import IPRoute

    with entered(ns):
        ipr = IPRoute()
    try:
        yield ipr
    finally:
        ipr.close()


def _nl_error(ns: NetnsRef, what: str, e: Exception) -> NetCommandError:
    detail = getattr(e, "args", [None])
    msg = detail[1] if len(detail) > 1 and isinstance(detail[1], str) else str(e)
    return NetCommandError(f"[{ns}] {what} failed: {msg}")


# ---- running a command inside a namespace (tc) ---------------------------------------------------

def run(argv: list[str], *, input: str | None = None, check: bool = True, timeout: float = 30.0,
        what: str = "") -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise NetCommandError(f"{what or argv[0]}: command {argv[0]!r} not found") from None
    except subprocess.TimeoutExpired:
        raise NetCommandError(f"{what or ' '.join(argv)}: no answer within {timeout:.0f}s") from None
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().replace("\n", "; ")
        raise NetCommandError(f"{what or ' '.join(argv)} failed (exit {proc.returncode}): {detail}")
    return proc


def run_in(ns: NetnsRef, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("what", f"[{ns}] {' '.join(argv)}")
    return run(ns.wrap(argv), **kwargs)


# ---- named namespaces ---------------------------------------------------------------------------

def create_netns(name: str) -> NetnsRef:
    """`ip netns add NAME`, with loopback up."""
    from pyroute2 import netns

    try:
        netns.create(name)
    except Exception as e:  # pyroute2 raises OSError or its own errors: one message either way
        raise _nl_error(NetnsRef.named(name), "creating the namespace", e) from None
    if not os.path.exists(f"{NETNS_DIR}/{name}"):
        raise NetCommandError(f"[{name}] creating the namespace failed (no {NETNS_DIR}/{name} afterwards)")
    ref = NetnsRef.named(name)
    with iproute(ref) as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
    return ref


def delete_netns(name: str) -> str | None:
    """`ip netns del NAME`: the problem, or None. Deleting a namespace destroys its veths (and their
    peers elsewhere), bridges and qdiscs once no process holds it."""
    from pyroute2 import netns

    if name not in list_netns():
        return None
    try:
        netns.remove(name)
    except Exception as e:
        return f"{name}: removing the namespace failed: {e}"
    return None


def list_netns() -> list[str]:
    """Names under /run/netns (`ip netns list`)."""
    try:
        return sorted(os.listdir(NETNS_DIR))
    except (FileNotFoundError, NotADirectoryError):
        return []


def netns_pids(name: str) -> list[int]:
    """Processes whose network namespace is NAME (`ip netns pids`)."""
    try:
        st = os.stat(f"{NETNS_DIR}/{name}")
    except OSError:
        return []
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            s = os.stat(f"/proc/{entry}/ns/net")
        except OSError:
            continue
        if (s.st_dev, s.st_ino) == (st.st_dev, st.st_ino):
            pids.append(int(entry))
    return pids


# ---- links, addresses, sysctls ------------------------------------------------------------------

def _fd(ns: NetnsRef) -> int:
    return os.open(ns.path or "/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)


def add_veth(name: str, ns: NetnsRef, peer: str, peer_ns: NetnsRef, *, mtu: int | None = None) -> None:
    """A veth pair created in place: `name` in `ns`, `peer` in `peer_ns` (nothing appears in the root
    namespace on the way)."""
    fds = [_fd(ns), _fd(peer_ns)]
    try:
        extra = {"mtu": mtu} if mtu else {}
        with iproute(NetnsRef.current()) as ipr:
            ipr.link("add", ifname=name, kind="veth", net_ns_fd=fds[0],
                     peer={"ifname": peer, "net_ns_fd": fds[1], **extra}, **extra)
    except NetCommandError:
        raise
    except Exception as e:
        raise _nl_error(ns, f"creating veth {name} <-> {peer} ({peer_ns})", e) from None
    finally:
        for fd in fds:
            os.close(fd)


def _index(ipr, ns: NetnsRef, iface: str) -> int:
    found = ipr.link_lookup(ifname=iface)
    if not found:
        raise NetCommandError(f"[{ns}] no interface {iface!r}")
    return found[0]


NO_IPV6_LINK_LOCAL = {"attrs": [["AF_INET6", {"attrs": [["IFLA_INET6_ADDR_GEN_MODE", 1]]}]]}


def configure_link(ns: NetnsRef, iface: str, *, addr: str | None = None, master: str | None = None,
                   up: bool = True, no_ipv6_ll: bool = True) -> None:
    """Address (CIDR), bridge port and state of one interface. `no_ipv6_ll` sets addrgenmode none:
    no IPv6 link-local address, so no router solicitations or MLD reports add to the wire counters."""
    try:
        with iproute(ns) as ipr:
            i = _index(ipr, ns, iface)
            if no_ipv6_ll:
                ipr.link("set", index=i, IFLA_AF_SPEC=NO_IPV6_LINK_LOCAL)
            if master:
                ipr.link("set", index=i, master=_index(ipr, ns, master))
            if addr:
                ip, _, plen = addr.partition("/")
                ipr.addr("add", index=i, address=ip, prefixlen=int(plen or 32))
            if up:
                ipr.link("set", index=i, state="up")
    except NetCommandError:
        raise
    except Exception as e:
        raise _nl_error(ns, f"configuring {iface}", e) from None


def add_bridge(ns: NetnsRef, name: str) -> None:
    """A bridge without STP and forward delay, that does not pass its traffic through iptables (Docker's
    FORWARD DROP would otherwise eat it when br_netfilter is loaded)."""
    try:
        with iproute(ns) as ipr:
            ipr.link("add", ifname=name, kind="bridge", br_stp_state=0, br_forward_delay=0,
                     br_nf_call_iptables=0, br_nf_call_ip6tables=0, br_nf_call_arptables=0)
    except Exception as e:
        raise _nl_error(ns, f"creating bridge {name}", e) from None


def sysctl_set(ns: NetnsRef, key: str, value: str | int, *, check: bool = True) -> bool:
    """`sysctl -w key=value` inside `ns` (net.* keys are per namespace); False when the key is absent
    and `check` is off (a module not loaded, say)."""
    path = "/proc/sys/" + key.replace(".", "/")
    try:
        with entered(ns), open(path, "w") as f:
            f.write(str(value))
    except OSError as e:
        if check:
            raise NetCommandError(f"[{ns}] sysctl {key}={value} failed: {e.strerror}") from None
        return False
    return True


def links(ns: NetnsRef) -> list[dict]:
    """Every interface in `ns`: ifname, index, address (MAC), mtu, operstate, qdisc, kind and the peer's
    ifindex (`link_index`, veths) as `ip -j -d link show` names them."""
    out = []
    try:
        with iproute(ns) as ipr:
            for m in ipr.get_links():
                info = m.get_attr("IFLA_LINKINFO")
                out.append({
                    "ifname": m.get_attr("IFLA_IFNAME"), "ifindex": m["index"], "address": m.get_attr("IFLA_ADDRESS"),
                    "mtu": m.get_attr("IFLA_MTU"), "operstate": m.get_attr("IFLA_OPERSTATE"),
                    "qdisc": m.get_attr("IFLA_QDISC"), "kind": info.get_attr("IFLA_INFO_KIND") if info else None,
                    "link_index": m.get_attr("IFLA_LINK"),
                })
    except NetCommandError:
        raise
    except Exception as e:
        raise _nl_error(ns, "listing links", e) from None
    return out


def peer_ifname(ns: NetnsRef, iface: str, peer_ns: NetnsRef) -> str:
    """The name, in `peer_ns`, of the other end of veth `iface` in `ns` (Docker's host-side veth)."""
    mine = next((x for x in links(ns) if x["ifname"] == iface), None)
    if mine is None or mine["link_index"] is None:
        raise NetCommandError(f"[{ns}] {iface} has no peer interface (not a veth?)")
    peer = next((x for x in links(peer_ns) if x["ifindex"] == mine["link_index"]), None)
    if peer is None:
        raise NetCommandError(f"[{ns}] the peer of {iface} (ifindex {mine['link_index']}) is not in {peer_ns}")
    return peer["ifname"]


# ---- ethtool features -----------------------------------------------------------------------------

def features_to_turn_off(features: dict[str, tuple[bool, bool]],
                         patterns: Iterable[str] = OFFLOAD_PATTERNS) -> list[str]:
    """Names of features (name -> (enabled, changeable)) that match a pattern and are on and changeable."""
    pats = tuple(patterns)
    return sorted(n for n, (on, changeable) in features.items()
                  if on and changeable and any(fnmatch.fnmatchcase(n, p) for p in pats))


@contextmanager
def _ethtool(ns: NetnsRef) -> Iterator[Any]:
    """pyroute2's Ethtool with its netlink socket opened inside `ns` (the socket keeps that namespace), closed after."""
    from pyroute2.ethtool import Ethtool

    with entered(ns):
        et = Ethtool()
    try:
        yield et
    finally:
        et.close()


def read_features(ns: NetnsRef, iface: str) -> dict[str, tuple[bool, bool]]:
    """`ethtool -k`: feature name -> (enabled, changeable)."""
    try:
        with _ethtool(ns) as et:
            feats = et.get_features(iface).features
    except NetCommandError:
        raise
    except Exception as e:
        raise _nl_error(ns, f"reading the features of {iface}", e) from None
    return {n: (bool(f.enable), bool(f.available)) for n, f in feats.items() if n}


def offloads_off(ns: NetnsRef, iface: str, patterns: Iterable[str] = OFFLOAD_PATTERNS) -> list[str]:
    """`ethtool -K iface <every matching feature> off`, verified by reading back; the features turned
    off. NetCommandError if one stays on."""
    pats = tuple(patterns)
    off = features_to_turn_off(read_features(ns, iface), pats)
    if off:
        try:
            with _ethtool(ns) as et:
                f = et.get_features(iface)
                for name in off:
                    f.features[name].enable = False
                et.set_features(iface, f)
        except NetCommandError:
            raise
        except Exception as e:
            raise _nl_error(ns, f"turning off {', '.join(off)} on {iface}", e) from None
    still = features_to_turn_off(read_features(ns, iface), pats)
    if still:
        raise NetCommandError(f"[{ns}] {iface}: features still on after turning them off: {', '.join(still)}")
    return off


def link_set(ns: NetnsRef, iface: str, **attrs) -> None:
    """`ip link set dev iface ...` through pyroute2's names: ifname= (rename), address= (MAC), mtu=,
    state="up"|"down", master=<index>; what net/splice.py's batch lines do."""
    try:
        with iproute(ns) as ipr:
            ipr.link("set", index=_index(ipr, ns, iface), **attrs)
    except NetCommandError:
        raise
    except Exception as e:
        raise _nl_error(ns, f"setting {', '.join(attrs)} on {iface}", e) from None


def ipv4_addresses(ns: NetnsRef, iface: str) -> list[dict]:
    """IPv4 addresses of `iface`: [{"local", "prefixlen", "broadcast"}], as `ip -j addr show` names them."""
    try:
        with iproute(ns) as ipr:
            i = _index(ipr, ns, iface)
            return [{"local": a.get_attr("IFA_LOCAL") or a.get_attr("IFA_ADDRESS"), "prefixlen": a["prefixlen"],
                     "broadcast": a.get_attr("IFA_BROADCAST")} for a in ipr.get_addr(family=socket.AF_INET, index=i)]
    except NetCommandError:
        raise
    except Exception as e:
        raise _nl_error(ns, f"reading the addresses of {iface}", e) from None
