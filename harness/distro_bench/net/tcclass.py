"""Per-destination classes on one uplink for the `tc` link engine: the pure part (plan, read-back parsing,
checks). harness/distro_bench/net/shaping.py turns it into tc commands and applies it.

A node whose uplink carries region paths (`Direction.per_dest`, docs/link-emulation.md "Regions") gets an htb
tree instead of tbf + netem:

    1:    htb root, `default 10` (ARP, IPv6, the switch, the far end and any address without a path)
    1:1   the access link's rate (rate = ceil = the link's rate): every destination shares it
    1:10  the default class: the access link's own netem (none when the link has no impairment)
    1:11, 1:12, ...  one class per distinct path (delay, jitter, loss) beyond the access link, each with a
          netem child (handle 11:, 12:, ...) doing the access link's impairment and the path together
    u32 filters at 1: on the destination IPv4 address (/32) of every peer with a path -> its class

One class per distinct path, not per peer: peers of one region share a class (and a queue), as they share a
path. u32 rather than flower: flower is not built into every kernel (it is missing here); u32 is wherever htb is.
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass, replace

from distro_bench.net.link import Direction, Impairment

ROOT_HANDLE, LINK_CLASS = "1:", "1:1"
DEFAULT_MINOR = 0x10
# htb needs a rate; where the access link has none, a rate no veth on one host reaches.
UNSHAPED_BPS = 100 * 10**9


@dataclass(frozen=True)
class PathClass:
    """One leaf of the tree: its class id, the netem it does (None: no netem child) and the destinations
    (IPv4 addresses) its filters send to it (none for the default class)."""

    minor: int
    netem: Impairment | None
    addrs: tuple[str, ...] = ()

    @property
    def classid(self) -> str:
        return f"1:{self.minor:x}"

    @property
    def handle(self) -> str:
        return f"{self.minor:x}:"


def combined(link: Impairment, delay_s: float, jitter_s: float, loss: float) -> Impairment:
    """The access link's impairment and one path's in a single netem: delays add, losses compound, the
    jitters (each uniform in ±j) add as independent draws do, keeping the spread's standard deviation; the link's
    other impairments (duplicate, ...) as they are."""
    return replace(link, delay_s=link.delay_s + delay_s, jitter_s=math.hypot(link.jitter_s, jitter_s),
                   loss=1 - (1 - link.loss) * (1 - loss))


def path_classes(d: Direction) -> tuple[PathClass, ...]:
    """The leaves of `d`'s tree: the default class first, then one per distinct path in the order the paths
    first appear in `d.per_dest`. A path that adds nothing stays in the default class."""
    link = replace(d.impairment, per_dest=())  # the access link's own impairments, every row of the table
    by_path: dict[tuple[float, float, float], list[str]] = {}
    for addr, delay, jitter, loss in d.per_dest:
        if delay or jitter or loss:
            by_path.setdefault((delay, jitter, loss), []).append(addr)
    leaves = [PathClass(DEFAULT_MINOR, link if link.impaired else None)]
    for k, (path, addrs) in enumerate(by_path.items(), start=1):
        leaves.append(PathClass(DEFAULT_MINOR + k, combined(link, *path), tuple(addrs)))
    return tuple(leaves)


def class_of(d: Direction, addr: str) -> PathClass:
    """The leaf a frame to `addr` goes to (the default one for an address without a path)."""
    leaves = path_classes(d)
    return next((c for c in leaves[1:] if addr in c.addrs), leaves[0])


def tree_rate_bps(d: Direction) -> int:
    return d.rate_bps or UNSHAPED_BPS


# ---- read-back ----------------------------------------------------------------------------------------

_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}


def _bits(text: str) -> int:
    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", text)
    if not m:
        raise ValueError(f"not a tc rate: {text!r}")
    return round(float(m.group(1)) * _UNITS[m.group(2).lower() or "bit"])


def parse_htb_classes(text: str) -> dict[str, dict]:
    """`tc class show dev IFACE` (iproute2 6.1 prints htb classes as text even with -j) -> per class id its
    `parent` ("root" for a root class), `leaf` (the child qdisc's handle, or None), `rate` and `ceil` in bit/s."""
    out = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) < 3 or words[:2] != ["class", "htb"]:
            continue
        info: dict = {"parent": "root" if "root" in words else None, "leaf": None}
        for key in ("parent", "leaf", "rate", "ceil"):
            if key in words[3:] and words.index(key, 3) + 1 < len(words):
                value = words[words.index(key, 3) + 1]
                info[key] = _bits(value) if key in ("rate", "ceil") else value
        out[words[2]] = info
    return out


def parse_u32_dst_filters(filters: list[dict]) -> dict[str, str]:
    """`tc -j filter show dev IFACE` -> destination IPv4 address -> flowid, for the u32 keys that match a
    whole destination address (offset 16 of the IPv4 header, mask ffffffff)."""
    out = {}
    for f in filters:
        opts = f.get("options") or {}
        match = opts.get("match") or {}
        if f.get("kind") != "u32" or "flowid" not in opts or match.get("off") != 16 or match.get("mask") != "ffffffff":
            continue
        out[str(ipaddress.IPv4Address(int(match["value"], 16)))] = opts["flowid"]
    return out


def _close(a: float, b: float, rel: float, abs_: float) -> bool:
    return abs(a - b) <= max(abs_, rel * abs(b))


def check_classes(iface: str, d: Direction, classes: dict[str, dict], filters: dict[str, str]) -> list[str]:
    """Problems (empty when it matches) between `d`'s tree and the classes and destination filters read back.
    The qdiscs (the htb root, each netem child) are checked by shaping.check_qdiscs."""
    where = f"{iface}:"
    problems = []
    rate = tree_rate_bps(d)
    # tc prints rates rounded to 4 significant digits or so (100Mbit, 123.5Mbit): 0.5% is what it keeps.
    link = classes.get(LINK_CLASS)
    if link is None:
        problems.append(f"{where} htb class {LINK_CLASS} (the access link's rate) missing")
    elif not _close(link.get("rate", 0), rate, 0.005, 8):
        problems.append(f"{where} htb class {LINK_CLASS} rate is {link.get('rate')} bit/s, planned {rate} bit/s")
    for leaf in path_classes(d):
        got = classes.get(leaf.classid)
        if got is None:
            problems.append(f"{where} htb class {leaf.classid} missing")
            continue
        if got.get("parent") != LINK_CLASS:
            problems.append(f"{where} htb class {leaf.classid} has parent {got.get('parent')}, planned {LINK_CLASS}")
        if not _close(got.get("ceil", 0), rate, 0.005, 8):
            problems.append(f"{where} htb class {leaf.classid} ceil is {got.get('ceil')} bit/s, planned {rate} bit/s")
        if leaf.netem is not None and got.get("leaf") != leaf.handle:
            problems.append(f"{where} htb class {leaf.classid} has leaf {got.get('leaf')}, planned netem {leaf.handle}")
        for addr in leaf.addrs:
            if filters.get(addr) != leaf.classid:
                problems.append(f"{where} frames to {addr} go to {filters.get(addr) or 'the default class'}, "
                                f"planned {leaf.classid}")
    planned = {a for leaf in path_classes(d) for a in leaf.addrs}
    problems += [f"{where} unplanned filter: {a} -> {c}" for a, c in filters.items() if a not in planned]
    return problems
