"""Splicing a delay-line hop into an interface of a namespace we do not own (a container's `eth0`).

A Docker container has one veth, `eth0`, to the engine's bridge, and no namespace between the two
for the userspace delay line. So the hop goes inside the container's own namespace, from the host:

    before:  [container: eth0 (IP, MAC M)] <-veth-> [host: vethX on the bridge]
    after:   [container: eth0 (IP, MAC M)] <-veth-> a | delay line | b (no IP, MAC M') <-veth-> vethX

Docker's `eth0` is renamed `b` and loses its addresses; a new veth pair `eth0` <-> `a` takes the
addresses, routes, MTU and, on `eth0`, the original MAC, so the bridge's forwarding table and every
peer's ARP cache stay valid and the worker sees the same interface name (GLOO_SOCKET_IFNAME and the
wire counters stay `eth0`). Details that matter:
- `b` gets a locally administered MAC of its own: frames for M arriving on `b` are then
  "other host" to the kernel, which drops them, so the container's stack never takes a frame
  straight off `b` around the delay line (the delay line's AF_PACKET socket still reads them).
- `a` and `b` have ARP off (the kernel answers ARP for any local address on any interface by
  default; a reply from `b` would teach the bridge a MAC that bypasses the line) and no IPv6.
- Offloads (TSO/GSO/GRO) are turned off on all three, so the line handles MTU-sized frames.
- `undo` gives Docker back its own interface as `eth0` before the container is removed (in teardown,
  and in `clean` for a killed run): Docker's cleanup looks its interface up by that name, and when it
  finds our veth instead it leaves the host-side veth (with our tbf) and the namespace behind.

Planning (`SpliceState` from `ip -j`-shaped data, `ip -batch`-style lines out) is pure and readable in a
log; `splice`/`undo` carry the lines out over netlink (pyroute2, `apply_lines`): no `ip` binary.
"""

from __future__ import annotations

import secrets
import socket
from dataclasses import dataclass

from distro_bench.errors import HarnessError
from distro_bench.net.ns import (
    NetCommandError,
    NetnsRef,
    _nl_error,
    iproute,
    ipv4_addresses,
    links,
    offloads_off,
    sysctl_set,
)

NODE_SIDE = "a"  # the delay line's interface towards the node's stack
SWITCH_SIDE = "b"  # ... towards the bridge (Docker's original veth)


@dataclass(frozen=True)
class SpliceState:
    """What the interface had before the splice: enough to rebuild it on the new veth and to undo."""

    iface: str
    mac: str
    mtu: int
    addresses: tuple[str, ...]  # `ip addr add` arguments, e.g. "172.18.0.2/16 brd 172.18.255.255"
    routes: tuple[str, ...]  # `ip route add` arguments of the routes not made by an address
    switch_mac: str  # the new MAC of `b`

    @classmethod
    def from_ip_json(cls, iface: str, addr_json: list[dict], route_json: list[dict], switch_mac: str) -> SpliceState:
        named: list[dict | None] = [x for x in addr_json if x.get("ifname") == iface]
        (link,) = named or [None]
        if link is None:
            raise HarnessError(f"no interface {iface!r} to splice a delay line into")
        if link.get("linkinfo", {}).get("info_kind", "veth") != "veth":
            raise HarnessError(f"{iface} is a {link['linkinfo']['info_kind']}, not a veth: cannot splice a delay line into it")
        addresses = tuple(
            f"{a['local']}/{a['prefixlen']}" + (f" brd {a['broadcast']}" if a.get("broadcast") else "")
            for a in link.get("addr_info", []) if a.get("family") == "inet")
        if not addresses:
            raise HarnessError(f"{iface} has no IPv4 address to carry over")
        return cls(iface=iface, mac=link["address"], mtu=int(link["mtu"]), addresses=addresses,
                   routes=tuple(route_args(r, iface) for r in route_json
                                if r.get("dev") == iface and r.get("protocol") != "kernel"),
                   switch_mac=switch_mac)

    def splice_lines(self) -> list[str]:
        """`ip -batch` lines, run in the namespace, that put a veth pair between the stack and `iface`."""
        i, a, b = self.iface, NODE_SIDE, SWITCH_SIDE
        return [
            f"link set dev {i} down",
            f"link set dev {i} name {b}",
            f"link set dev {b} address {self.switch_mac}",
            f"link set dev {b} arp off",
            f"addr flush dev {b}",
            f"link add name {i} mtu {self.mtu} type veth peer name {a} mtu {self.mtu}",
            f"link set dev {i} address {self.mac}",
            f"link set dev {a} arp off",
            *(f"addr add {x} dev {i}" for x in self.addresses),
            f"link set dev {b} up",
            f"link set dev {a} up",
            f"link set dev {i} up",
            *(f"route add {r}" for r in self.routes),
        ]



def route_args(route: dict, iface: str) -> str:
    """`ip route add` arguments recreating one route of `ip -j route show` on `iface`."""
    parts = [route["dst"]]
    if route.get("gateway"):
        parts += ["via", route["gateway"]]
    parts += ["dev", iface]
    if route.get("scope") and route["scope"] != "global":
        parts += ["scope", route["scope"]]
    if route.get("prefsrc"):
        parts += ["src", route["prefsrc"]]
    if route.get("metric") is not None:
        parts += ["metric", str(route["metric"])]
    return " ".join(parts)


def random_local_mac() -> str:
    """A unicast, locally administered MAC (x2:..), as veth gives a new interface."""
    b = bytearray(secrets.token_bytes(6))
    b[0] = (b[0] & 0xFC) | 0x02
    return ":".join(f"{x:02x}" for x in b)


RT_SCOPES = {"global": 0, "site": 200, "link": 253, "host": 254}
RTPROT_KERNEL = 2
RT_TABLE_MAIN = 254
IFF_NOARP = 0x80


def _addr_json(ns: NetnsRef, iface: str) -> list[dict]:
    """`ip -j -d addr show dev iface`, the fields SpliceState reads, from netlink."""
    link = next((x for x in links(ns) if x["ifname"] == iface), None)
    if link is None:
        return []
    return [{"ifname": iface, "address": link["address"], "mtu": link["mtu"],
             **({"linkinfo": {"info_kind": link["kind"]}} if link["kind"] else {}),
             "addr_info": [{"family": "inet", **a} for a in ipv4_addresses(ns, iface)]}]


def _route_json(ns: NetnsRef, iface: str) -> list[dict]:
    """`ip -j route show dev iface` (main table, IPv4) from netlink, with `dev` filled in."""
    scope_names = {v: k for k, v in RT_SCOPES.items()}
    out = []
    try:
        with iproute(ns) as ipr:
            found = ipr.link_lookup(ifname=iface)
            if not found:
                return []
            for r in ipr.get_routes(family=socket.AF_INET, table=RT_TABLE_MAIN):
                if r.get_attr("RTA_OIF") != found[0] or (r.get_attr("RTA_TABLE") or r["table"]) != RT_TABLE_MAIN:
                    continue
                dst = r.get_attr("RTA_DST")
                out.append({"dst": f"{dst}/{r['dst_len']}" if dst else "default", "dev": iface,
                            "gateway": r.get_attr("RTA_GATEWAY"),
                            "protocol": "kernel" if r["proto"] == RTPROT_KERNEL else str(r["proto"]),
                            "scope": scope_names.get(r["scope"], str(r["scope"])),
                            "prefsrc": r.get_attr("RTA_PREFSRC"), "metric": r.get_attr("RTA_PRIORITY")})
    except Exception as e:
        raise _nl_error(ns, f"reading the routes of {iface}", e) from None
    return out


def apply_lines(ns: NetnsRef, lines: list[str], *, what: str) -> None:
    """Carry out `ip -batch` lines of the forms `splice_lines`/`undo_lines` write, through pyroute2 in `ns`,
    in order, stopping at the first that fails (NetCommandError naming it)."""
    line = ""
    try:
        with iproute(ns) as ipr:
            for line in lines:
                _apply(ipr, ns, line.split())
    except NetCommandError as e:
        raise NetCommandError(f"{what}: {e} (at `{line}`)") from None
    except Exception as e:
        raise _nl_error(ns, f"{what} (at `{line}`)", e) from None


def _apply(ipr, ns: NetnsRef, t: list[str]) -> None:
    def index(name: str) -> int:
        found = ipr.link_lookup(ifname=name)
        if not found:
            raise NetCommandError(f"[{ns}] no interface {name!r}")
        return found[0]

    if t[:3] == ["link", "set", "dev"]:
        i, (key, *rest) = index(t[3]), t[4:]
        if key in ("up", "down"):
            ipr.link("set", index=i, state=key)
        elif key == "name":
            ipr.link("set", index=i, ifname=rest[0])
        elif key == "address":
            ipr.link("set", index=i, address=rest[0])
        elif key == "arp":
            ipr.link("set", index=i, flags=0 if rest[0] == "on" else IFF_NOARP, change=IFF_NOARP)
        else:
            raise ValueError(f"unknown link attribute {key!r}")
    elif t[:2] == ["link", "add"]:  # link add name X mtu M type veth peer name Y mtu M
        ipr.link("add", ifname=t[3], mtu=int(t[5]), kind="veth", peer={"ifname": t[10], "mtu": int(t[12])})
    elif t[:2] == ["link", "del"]:
        ipr.link("del", index=index(t[3]))
    elif t[:3] == ["addr", "flush", "dev"]:
        i = index(t[3])
        for a in ipr.get_addr(index=i):
            ipr.addr("del", index=i, address=a.get_attr("IFA_ADDRESS"), prefixlen=a["prefixlen"])
    elif t[:2] == ["addr", "add"]:  # addr add A/P [brd B] dev X
        ip, _, plen = t[2].partition("/")
        kw = dict(zip(t[3::2], t[4::2]))
        ipr.addr("add", index=index(kw["dev"]), address=ip, prefixlen=int(plen or 32),
                 **({"broadcast": kw["brd"]} if "brd" in kw else {}))
    elif t[:2] == ["route", "add"]:  # route add DST [via G] dev X [scope S] [src P] [metric M]
        kw = dict(zip(t[3::2], t[4::2]))
        spec: dict[str, int | str] = {"oif": index(kw["dev"])}
        if t[2] != "default":
            spec["dst"] = t[2]
        if "via" in kw:
            spec["gateway"] = kw["via"]
        if "scope" in kw:
            spec["scope"] = RT_SCOPES.get(kw["scope"], 0)
        if "src" in kw:
            spec["prefsrc"] = kw["src"]
        if "metric" in kw:
            spec["priority"] = int(kw["metric"])
        ipr.route("add", **spec)
    else:
        raise ValueError(f"unknown line {' '.join(t)!r}")


def read_state(ns: NetnsRef, iface: str) -> SpliceState:
    return SpliceState.from_ip_json(iface, _addr_json(ns, iface), _route_json(ns, iface), random_local_mac())


def splice(ns: NetnsRef, iface: str = "eth0") -> SpliceState:
    """Splice the veth pair into `iface` in `ns`; the state needed to undo it. On failure, whatever
    was done is undone before the error is raised."""
    state = read_state(ns, iface)
    try:
        apply_lines(ns, state.splice_lines(), what=f"[{ns}] splicing a delay-line hop into {iface}")
        for name in (iface, NODE_SIDE, SWITCH_SIDE):
            sysctl_set(ns, f"net.ipv6.conf.{name}.disable_ipv6", 1, check=False)
            offloads_off(ns, name)
    except BaseException:
        undo(ns, iface)
        raise
    return state


def undo_lines(macs: dict[str, str], iface: str = "eth0") -> list[str]:
    """Lines that give Docker back its own interface under its own name and MAC, for whatever part of
    a splice is present (`macs`: interface name -> MAC). No state needed: `clean` uses it on a killed
    run's containers. Addresses are not restored: the container is about to be removed."""
    lines = []
    original_mac = None
    if NODE_SIDE in macs:
        original_mac = macs.get(iface)  # our eth0 carries Docker's MAC
        lines.append(f"link del dev {NODE_SIDE}")  # and its peer, our eth0
    if SWITCH_SIDE in macs:
        lines += [f"link set dev {SWITCH_SIDE} down", f"link set dev {SWITCH_SIDE} name {iface}"]
        if original_mac:
            lines.append(f"link set dev {iface} address {original_mac}")
        lines.append(f"link set dev {iface} arp on")
    return lines


def undo(ns: NetnsRef, iface: str = "eth0") -> list[str]:
    """Undo a splice in `ns`, completed or not, before its container is removed: otherwise Docker
    finds our veth under the name `eth0`, fails to move it out, and leaves its host-side veth (with
    our tbf) and the namespace behind. Returns problems; a namespace already gone is none."""
    try:
        present = links(ns)
    except NetCommandError:
        return []  # the container (and its namespace) is gone: nothing to give back
    lines = undo_lines({x["ifname"]: x.get("address") or "" for x in present}, iface)
    if not lines:
        return []
    try:
        apply_lines(ns, lines, what=f"[{ns}] giving Docker its {iface} back")
    except NetCommandError as e:
        return [str(e)[:300]]
    return []
