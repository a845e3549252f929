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

A site's uplink (harness/distro_bench/scenario/sites.py) is a tree of two levels: a class per destination *site*
(`Direction.dest_paths` names each address's WAN path; the core first), and under each a leaf per node of the site
(`Direction.fair_srcs`), so the nodes sending at once share the uplink evenly, as a router with fair queueing shares
it (one FIFO let one TCP flow take 33 of 40 Mbit from another here):

    1:    htb root, `default f`; 1:f the leaf of what no filter matches (ARP, IPv6)
    1:1   the uplink's rate
    1:10  the path to the core (the switch's far end); 1:11, 1:12, ... one per other site, ceil = its WAN rate
    1:100, 1:101, ...  under 1:10 a leaf per source node; 1:200, ... under 1:11; ... each with the path's netem
    u32 filters: source and destination address -> the leaf (prio 1), source alone -> its leaf towards the core (2)

Two sites reached over equal paths are still two links, so their classes are never merged, and a class exists even
for a path that adds nothing. A path's netem (tc engine) does the uplink's and the path's delay and loss together,
as a region path's does.
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass, replace

from distro_bench.net.link import Direction, Impairment

ROOT_HANDLE, LINK_CLASS = "1:", "1:1"
DEFAULT_MINOR = 0x10
UNCLASSIFIED_MINOR = 0xF  # a site tree's leaf for what no filter matches (its path classes have children)
# htb needs a rate; where the access link has none, a rate no veth on one host reaches.
UNSHAPED_BPS = 100 * 10**9


@dataclass(frozen=True)
class PathClass:
    """One leaf of the tree: its class id, the netem it does (None: no netem child) and the destinations
    (IPv4 addresses) its filters send to it (none for the default class)."""

    minor: int
    netem: Impairment | None
    addrs: tuple[str, ...] = ()
    ceil_bps: int | None = None  # a WAN path's own rate (None: the whole link's)
    path: str = ""  # the named path (a destination site), "" for a region path or the default class
    src: str = ""  # a site tree's leaf: the source address its filters match ("" for any)
    parent: str = LINK_CLASS  # a site tree's leaf: its path's class

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


@dataclass(frozen=True)
class InnerClass:
    """A site tree's class of one path (the core's, or another site's), parent of a leaf per source node."""

    minor: int
    ceil_bps: int | None
    path: str

    @property
    def classid(self) -> str:
        return f"1:{self.minor:x}"


def site_tree(d: Direction) -> bool:
    """Whether `d` is a site uplink's tree (a class per destination site, a leaf per source node)."""
    return bool(d.dest_paths or d.fair_srcs)


def path_classes(d: Direction) -> tuple[PathClass, ...]:
    """The leaves of `d`'s tree: the default class first, then one per distinct path in the order the paths
    first appear in `d.per_dest`. A path that adds nothing stays in the default class. A site tree's: its
    unclassified leaf, then per path (the core's first) a leaf per source node."""
    link = replace(d.impairment, per_dest=())  # the access link's own impairments, every row of the table
    if site_tree(d):
        return _site_leaves(d, link)
    by_path: dict[tuple[float, float, float], list[str]] = {}
    for addr, delay, jitter, loss in d.per_dest:
        if delay or jitter or loss:
            by_path.setdefault((delay, jitter, loss), []).append(addr)
    leaves = [PathClass(DEFAULT_MINOR, link if link.impaired else None)]
    for k, (path, addrs) in enumerate(by_path.items(), start=1):
        leaves.append(PathClass(DEFAULT_MINOR + k, combined(link, *path), tuple(addrs)))
    return tuple(leaves)


def _site_paths(d: Direction) -> list[tuple[str, tuple[str, ...], int | None, Impairment | None]]:
    """A site tree's paths, the core's first: (name, destination addresses, ceil, netem)."""
    link = replace(d.impairment, per_dest=())
    extra = {addr: (delay, jitter, loss) for addr, delay, jitter, loss in d.per_dest}
    by_name: dict[str, list[str]] = {}
    rates: dict[str, int | None] = {}
    for addr, name, rate in d.dest_paths:
        by_name.setdefault(name, []).append(addr)
        rates[name] = rate
    out: list[tuple[str, tuple[str, ...], int | None, Impairment | None]] = [
        ("", (), None, link if link.impaired else None)]
    for name, addrs in by_name.items():
        paths = {extra.get(a, (0.0, 0.0, 0.0)) for a in addrs}
        if len(paths) > 1:
            raise ValueError(f"path {name!r}: its addresses have different impairments {sorted(paths)}")
        netem = combined(link, *paths.pop())
        rate = rates[name]
        out.append((name, tuple(addrs), min(rate, tree_rate_bps(d)) if rate else None,
                    netem if netem.impaired else None))
    return out


def inner_classes(d: Direction) -> tuple[InnerClass, ...]:
    """A site tree's class per path (none for any other tree)."""
    if not site_tree(d):
        return ()
    return tuple(InnerClass(DEFAULT_MINOR + k, ceil, name) for k, (name, _, ceil, _) in enumerate(_site_paths(d)))


def _site_leaves(d: Direction, link: Impairment) -> tuple[PathClass, ...]:
    leaves = [PathClass(UNCLASSIFIED_MINOR, link if link.impaired else None)]
    srcs = d.fair_srcs or ("",)
    for k, (name, addrs, ceil, netem) in enumerate(_site_paths(d)):
        for j, src in enumerate(srcs):
            leaves.append(PathClass(((k + 1) << 8) | j, netem, addrs, ceil_bps=ceil, path=name, src=src,
                                    parent=f"1:{DEFAULT_MINOR + k:x}"))
    return tuple(leaves)


def filter_key(src: str, dst: str) -> str:
    """How a u32 filter is named in the read-back (environment.json): `DST`, `SRC>DST`, or `SRC>` (source alone)."""
    return f"{src}>{dst}" if src else dst


def tree_filters(d: Direction) -> list[tuple[str, str, str, int]]:
    """Every u32 filter of `d`'s tree: (source or "", destination or "", class id, prio)."""
    leaves = path_classes(d)
    out = [(leaf.src, a, leaf.classid, 1) for leaf in leaves[1:] for a in leaf.addrs]
    out += [(leaf.src, "", leaf.classid, 2) for leaf in leaves[1:] if leaf.src and not leaf.addrs]
    return out


def leaf_ceil_bps(d: Direction, leaf: PathClass | InnerClass) -> int:
    return leaf.ceil_bps or tree_rate_bps(d)


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
    """`tc -j filter show dev IFACE` -> filter_key(source, destination) -> flowid, for the u32 filters whose keys
    match whole IPv4 addresses: the destination (offset 16, mask ffffffff) and the source (offset 12). iproute2
    prints a filter's keys as repeated `match` members: read the output with `json_pairs` to keep them all."""
    out = {}
    for f in filters:
        opts = f.get("options") or {}
        matches = opts.get("match") or []
        matches = matches if isinstance(matches, list) else [matches]
        if f.get("kind") != "u32" or "flowid" not in opts or not matches:
            continue
        addrs = {m.get("off"): str(ipaddress.IPv4Address(int(m["value"], 16))) for m in matches
                 if m.get("mask") == "ffffffff" and m.get("off") in (12, 16)}
        if len(addrs) != len(matches):
            continue
        src, dst = addrs.get(12, ""), addrs.get(16, "")
        out[filter_key(src, dst) if src or dst else ""] = opts["flowid"]
    return out


def json_pairs(pairs: list[tuple[str, object]]) -> dict:
    """json.loads' object_pairs_hook for tc's output: a key given more than once (u32's `match`) becomes a list."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            out[k] = (out[k] if isinstance(out[k], list) else [out[k]]) + [v]
        else:
            out[k] = v
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
    tree: list[InnerClass | PathClass] = [*inner_classes(d), *path_classes(d)]
    for leaf in tree:
        got = classes.get(leaf.classid)
        if got is None:
            problems.append(f"{where} htb class {leaf.classid} missing")
            continue
        parent = getattr(leaf, "parent", LINK_CLASS)
        if got.get("parent") != parent:
            problems.append(f"{where} htb class {leaf.classid} has parent {got.get('parent')}, planned {parent}")
        ceil = leaf_ceil_bps(d, leaf)
        if not _close(got.get("ceil", 0), ceil, 0.005, 8):
            problems.append(f"{where} htb class {leaf.classid} ceil is {got.get('ceil')} bit/s, planned {ceil} bit/s")
        if isinstance(leaf, PathClass) and leaf.netem is not None and got.get("leaf") != leaf.handle:
            problems.append(f"{where} htb class {leaf.classid} has leaf {got.get('leaf')}, planned netem {leaf.handle}")
    planned = {filter_key(src, dst): classid for src, dst, classid, _ in tree_filters(d)}
    for key, classid in planned.items():
        if filters.get(key) != classid:
            src, _, dst = key.rpartition(">")
            what = f"from {src} to {dst or 'the core'}" if src else f"to {dst}"
            problems.append(f"{where} frames {what} go to {filters.get(key) or 'the default class'}, planned {classid}")
    problems += [f"{where} unplanned filter: {a} -> {c}" for a, c in filters.items() if a not in planned]
    return problems
