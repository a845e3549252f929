"""Which link bound each method's step (issue 37, shared bottlenecks): summary.json's `bottlenecks`.

A simple model, stated where it is used: the collectives are rings in rank order (gloo's all-reduce and all-gather
are), so each worker's wire bytes of a step go to the next rank and come from the previous one. A link then
carries, per step, the bytes of the ring edges that cross it: an access link one worker's (its tx up, its rx down);
a site's uplink those of the edges leaving the site (tx) or entering it (rx); a WAN path with a rate of its own those
of the edges from one site to the other. The time a link needs for a step's bytes is bytes x 8 / rate; the link
with the longest time is the bound; links within 1% of it are named as tied (two labs whose uplinks, WAN path and
access links all run at 1 Gbit carry one worker's bytes each: none of them binds more than the others). It names
the link that limits, not how long the step took: latency, compute and overlap are not in it; the step time is given
beside it, and `share_of_step` says how much of the step the bound link's bytes fill.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from distro_bench.scenario.model import Node, Scenario, site_layout
from distro_bench.scenario.sites import SiteLayout

TIE = 0.01  # links whose time is within 1% of the bound's are tied with it
MODEL = ("collectives as rings in rank order (each worker's wire bytes per step go to the next rank): a link's time "
         "is the bytes of the ring edges crossing it per step x 8 / its rate; the longest is the bound")


@dataclass(frozen=True)
class LinkLoad:
    """One shaped link: its name, rate, which per-worker bytes cross it (`tx` or `rx`) and how many workers' worth."""

    link: str
    rate_bps: int
    bytes: str  # "tx" | "rx"
    workers: int


def link_loads(nodes: Sequence[Node], sites: SiteLayout | None) -> list[LinkLoad]:
    """Every shaped link of the scenario with the ring edges crossing it (nodes in rank order)."""
    n = len(nodes)
    out = []
    for node in nodes:
        for direction, kind in (("up", "tx"), ("down", "rx")):
            rate = getattr(node.link, direction) if node.link is not None else None
            if rate:
                out.append(LinkLoad(f"access {node.name} ({direction})", rate, kind, 1))
    if sites is None or n < 2:
        return out
    site_of = {r: s.name for s in sites.sites for r in s.ranks}
    edges = [(site_of.get(i), site_of.get((i + 1) % n)) for i in range(n)]  # (from, to) of each ring edge
    for s in sites.sites:
        leaving = sum(1 for a, b in edges if a == s.name and b != s.name)
        entering = sum(1 for a, b in edges if b == s.name and a != s.name)
        for direction, rate, kind, count in (("up", s.up_bps, "tx", leaving), ("down", s.down_bps, "rx", entering)):
            if rate and count:
                out.append(LinkLoad(f"site {s.name} uplink ({direction})", rate, kind, count))
    for (a, b), path in sites.paths.items():
        count = sum(1 for x, y in edges if (x, y) == (a, b))
        if path.rate_bps and count:
            out.append(LinkLoad(f"WAN {a} -> {b}", path.rate_bps, "tx", count))
    return out


def site_link_loads(s: Scenario) -> list[dict] | None:
    """What build_summary takes as `link_loads` for a scenario with sites (None without: a star's bound is its
    slowest access link, which the report's link table already shows)."""
    lay = site_layout(s)
    return [asdict(x) for x in link_loads(s.nodes(), lay)] if lay is not None else None


def bottlenecks(optimizers: Mapping[str, Mapping[str, Any]], loads: Sequence[Mapping[str, Any]]) -> dict | None:
    """summary.json's `bottlenecks`: the model, and per optimizer the bound link (`link`), the links tied with it
    (`tied`), its seconds per step (`seconds_per_step`), the step time measured beside it and the share of it those
    seconds are (`share_of_step`), the byte basis (wire where measured, else payload) and every link's seconds
    (`links`). None without a shaped link."""
    if not loads:
        return None
    out: dict[str, Any] = {}
    for name, s in optimizers.items():
        basis = "wire" if s.get("wire_tx_bytes_per_step") is not None else "payload"
        per = {"tx": s.get(f"{basis}_tx_bytes_per_step"), "rx": s.get(f"{basis}_rx_bytes_per_step")}
        times = {str(x["link"]): float(per[x["bytes"]] or 0) * int(x["workers"]) * 8 / float(x["rate_bps"])
                 for x in loads if per.get(x["bytes"]) is not None}
        if not times:
            continue
        bound = max(times, key=lambda k: times[k])
        step = s.get("step_time_s_mean")
        out[name] = {"link": bound, "tied": [k for k, v in times.items() if k != bound and v >= (1 - TIE) * times[bound]],
                     "seconds_per_step": times[bound], "step_time_s": step,
                     "share_of_step": times[bound] / step if step else None, "basis": basis, "links": times}
    return {"model": MODEL, "optimizers": out}


__all__ = ["MODEL", "LinkLoad", "bottlenecks", "link_loads", "site_link_loads"]
