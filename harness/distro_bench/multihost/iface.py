"""The interface an agent shapes: never guessed, never the one the user's own connection runs over
unless they say so, and described for environment.json (address, MAC, speed, driver).

Shaping a real host's interface slows everything on it, and a wrong tc command can cut the host off: so
`--iface` must be named, and the interface that carries the default route or this SSH session
(SSH_CONNECTION's local address) is refused without `--i-know`.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from distro_bench.errors import InputError

# The shaping qdiscs of someone else (a previous tool, an admin) that we would silently replace.
FOREIGN_ROOT_KINDS = {"tbf", "htb", "hfsc", "netem", "cbq", "cake", "prio", "drr", "qfq", "ets", "red", "sfb"}


@dataclass(frozen=True)
class IfaceFacts:
    name: str
    ipv4: str | None
    prefixlen: int | None
    mac: str | None
    mtu: int | None
    speed_mbit: int | None  # /sys/class/net/<if>/speed; None for virtual interfaces
    driver: str | None
    default_route: bool
    ssh_session: str | None  # "from A:P to B:P" when SSH_CONNECTION's local address is on it

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def interfaces() -> list[str]:
    """Interface names in this network namespace."""
    return sorted(name for _, name in socket.if_nameindex())


def default_route_ifaces() -> set[str]:
    """Interfaces the IPv4/IPv6 default routes leave by (pyroute2, this namespace)."""
    from pyroute2 import IPRoute

    out = set()
    with IPRoute() as ipr:
        names = {m["index"]: m.get_attr("IFLA_IFNAME") for m in ipr.get_links()}
        for family in (socket.AF_INET, socket.AF_INET6):
            for r in ipr.get_routes(family=family):
                if r["dst_len"] == 0 and r.get_attr("RTA_TABLE") in (None, 254):
                    oif = r.get_attr("RTA_OIF")
                    if oif in names:
                        out.add(names[oif])
                    for hop in r.get_attr("RTA_MULTIPATH") or []:
                        if hop["oif"] in names:
                            out.add(names[hop["oif"]])
    return out


def _addresses(name: str) -> list[tuple[str, int]]:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        idx = ipr.link_lookup(ifname=name)
        if not idx:
            return []
        return [(a.get_attr("IFA_LOCAL") or a.get_attr("IFA_ADDRESS"), a["prefixlen"])
                for a in ipr.get_addr(index=idx[0]) if a.get_attr("IFA_LOCAL") or a.get_attr("IFA_ADDRESS")]


def ssh_session_on(name: str, env: dict[str, str] | None = None) -> str | None:
    """SSH_CONNECTION ("client_ip client_port server_ip server_port") when its server address is on `name`."""
    conn = (env if env is not None else os.environ).get("SSH_CONNECTION", "").split()
    if len(conn) != 4:
        return None
    if conn[2] in {a for a, _ in _addresses(name)}:
        return f"from {conn[0]}:{conn[1]} to {conn[2]}:{conn[3]}"
    return None


def _link_attrs(name: str) -> dict:
    """MAC, MTU and kind over netlink: /sys/class/net shows the namespace sysfs was mounted in, not ours."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        idx = ipr.link_lookup(ifname=name)
        if not idx:
            return {}
        m = ipr.get_links(idx[0])[0]
        info = m.get_attr("IFLA_LINKINFO")
        return {"mac": m.get_attr("IFLA_ADDRESS"), "mtu": m.get_attr("IFLA_MTU"),
                "kind": info.get_attr("IFLA_INFO_KIND") if info else None}


def _speed_and_driver(name: str) -> tuple[int | None, str | None]:
    """Link speed (Mbit/s) and driver through ethtool's netlink/ioctl (pyroute2); None where unknown."""
    speed = driver = None
    try:
        from pyroute2.ethtool import Ethtool

        et = Ethtool()
        try:
            mode = et.get_link_mode(name)
            speed = mode.speed if mode and mode.speed and 0 < mode.speed < 10**7 else None
        except Exception:
            pass
        try:
            info = et.get_link_info(name)
            driver = getattr(info, "driver", None)
        except Exception:
            pass
        finally:
            et.close()
    except Exception:
        pass
    return speed, driver


def facts(name: str) -> IfaceFacts:
    addrs = [(a, p) for a, p in _addresses(name) if ":" not in a]
    attrs = _link_attrs(name)
    speed, driver = _speed_and_driver(name)
    return IfaceFacts(name=name, ipv4=addrs[0][0] if addrs else None, prefixlen=addrs[0][1] if addrs else None,
                      mac=attrs.get("mac"), mtu=attrs.get("mtu"), speed_mbit=speed,
                      driver=driver or attrs.get("kind"), default_route=name in default_route_ifaces(),
                      ssh_session=ssh_session_on(name))


def choose(iface: str | None, *, shaping: bool, i_know: bool) -> IfaceFacts | None:
    """The interface to shape (and count, and bind gloo to), checked; None when nothing is shaped and none
    was named. InputError says what to do."""
    here = interfaces()
    if iface is None:
        if shaping:
            raise InputError("--iface: name the interface to shape (e.g. --iface eth1). distro-bench node never "
                             "guesses: shaping the wrong interface can cut this host off. Interfaces here: "
                             + ", ".join(here) + ". Or --no-shaping to run on the network as it is")
        return None
    if iface not in here:
        raise InputError(f"--iface: no interface {iface!r} on this host; interfaces here: {', '.join(here)}")
    f = facts(iface)
    if shaping and not i_know:
        why = []
        if f.default_route:
            why.append("it carries this host's default route")
        if f.ssh_session:
            why.append(f"your SSH session runs over it ({f.ssh_session})")
        if why:
            raise InputError(f"--iface {iface}: {' and '.join(why)}; shaping it slows (or, on a mistake, cuts) your "
                             "own connection to this host. Name a dedicated interface, or pass --i-know to shape "
                             f"{iface} anyway (the shaping is removed when the agent exits, even if it is killed)")
    if f.ipv4 is None:
        raise InputError(f"--iface {iface}: the interface has no IPv4 address; the workers talk over it")
    return f
