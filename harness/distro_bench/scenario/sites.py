"""Shared bottlenecks: sites (a home router, a lab, a cloud region) whose nodes sit behind one uplink they share,
and the WAN paths between sites.

    sites:
      uplinks:                      # per site: the uplink its nodes share (rate each way, one-way delay)
        lab-a: {up: 1Gbit, down: 1Gbit, delay: 1ms}
        lab-b: {up: 1Gbit, down: 1Gbit, delay: 1ms}
      delays: {lab-a: {lab-b: 40ms}}    # WAN paths per ordered pair, tables as `regions:` has them
      rates: {lab-a: {lab-b: 1Gbit}}
      loss: {}
      symmetric: true               # d(b, a) from d(a, b) where only one is given

    workers:
      - {count: 4, link: lan, site: lab-a}    # each node keeps its own access link, to its site's bridge

A frame from node i (site A) to node j (site B) crosses i's access uplink, A's uplink (its rate, its delay and
the WAN path's delay, loss and rate), B's downlink and j's access downlink; a frame between two nodes of one site
never leaves the site. This module is pure: the schema, the problems a scenario can have, and `SiteLayout`, what
the network plan (harness/distro_bench/net/engines.py) and the report's bottleneck (results/bottleneck.py) take.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

from distro_bench.scenario.regions import disagreements, mirrored
from distro_bench.scenario.units import (
    Duration,
    Percent,
    Rate,
    format_duration,
    format_percent,
    format_rate,
    no_bool_numbers,
)

SITE_PATTERN = r"^[a-z][a-z0-9-]{0,31}$"
SITE_RULE = "1-32 lower-case letters, digits and '-', starting with a letter"
# Namespace names carry a site by its index (dbench-<run>-s<k>): a few dozen sites is past any scenario here.
MAX_SITES = 32


class SiteUplink(BaseModel):
    """One site's uplink to the core: rate each way (None: unlimited) and one-way delay, shared by its nodes."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    _no_bools = field_validator("*", mode="before")(classmethod(no_bool_numbers))

    up: Rate | None = None
    down: Rate | None = None
    delay: Duration = 0.0


class SitesSpec(BaseModel):
    """`uplinks` (site -> its shared uplink) and the WAN paths between sites: `delays`, `rates` and `loss`, each a
    table `{from: {to: value}}` (a pair not in a table adds nothing), mirrored when `symmetric`."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    _no_bools = field_validator("*", mode="before")(classmethod(no_bool_numbers))

    uplinks: dict[str, SiteUplink] = Field(min_length=1, max_length=MAX_SITES)
    symmetric: bool = True
    delays: dict[str, dict[str, Duration]] = Field(default_factory=dict)
    rates: dict[str, dict[str, Rate]] = Field(default_factory=dict)
    loss: dict[str, dict[str, Percent]] = Field(default_factory=dict)


@dataclass(frozen=True)
class WanPath:
    """The path from one site to another beyond both uplinks: one-way delay, loss, and a rate (None: the uplinks')."""

    delay_s: float = 0.0
    loss: float = 0.0
    rate_bps: int | None = None

    @property
    def adds(self) -> bool:
        return bool(self.delay_s or self.loss or self.rate_bps)


@dataclass(frozen=True)
class Site:
    index: int
    name: str
    up_bps: int | None
    down_bps: int | None
    delay_s: float
    ranks: tuple[int, ...]  # its nodes, in rank order


@dataclass(frozen=True)
class SiteLayout:
    """The sites in use (those some node names, in order of first use) and every ordered pair's WAN path."""

    sites: tuple[Site, ...]
    paths: dict[tuple[str, str], WanPath]

    def site_of(self, rank: int) -> Site | None:
        return next((s for s in self.sites if rank in s.ranks), None)

    def path(self, src: str, dst: str) -> WanPath:
        return self.paths.get((src, dst), WanPath())


TABLES = (("delays", format_duration), ("rates", format_rate), ("loss", format_percent))


def sites_problems(spec: SitesSpec, used: dict[str, list[str]]) -> list[str]:
    """What is wrong with `spec` for the sites the workers name (`site -> ["workers[0]", ...]`): each problem names
    the field, the value and what would be valid."""
    problems = []
    known = sorted(spec.uplinks)
    for name in known:
        if not re.fullmatch(SITE_PATTERN, name):
            problems.append(f"sites.uplinks: invalid site name {name!r}: {SITE_RULE}")
    for site, where in used.items():
        if site not in spec.uplinks:
            problems.append(f"{where[0]}.site: unknown site {site!r}; known: {', '.join(known)} (sites.uplinks)")
    for what, fmt in TABLES:
        tab: dict[str, dict] = getattr(spec, what)
        for a, row in tab.items():
            for b in (a, *row):
                if b not in spec.uplinks:
                    problems.append(f"sites.{what}.{a}{'' if b == a else '.' + b}: unknown site {b!r}; "
                                    f"known: {', '.join(known)}")
            if a in row:
                problems.append(f"sites.{what}.{a}.{a}: a WAN path joins two sites (within one site, nodes meet "
                                "on its bridge)")
        if spec.symmetric:
            problems += disagreements(f"sites.{what}", tab, fmt, "sites.symmetric")
    return list(dict.fromkeys(problems))


def layout(spec: SitesSpec, node_sites: list[str | None]) -> SiteLayout:
    """The layout of a valid spec (sites_problems empty) for nodes in rank order (each one's site name)."""
    order = list(dict.fromkeys(s for s in node_sites if s is not None))
    sites = tuple(Site(index=k, name=name, up_bps=spec.uplinks[name].up, down_bps=spec.uplinks[name].down,
                       delay_s=spec.uplinks[name].delay,
                       ranks=tuple(r for r, s in enumerate(node_sites) if s == name))
                  for k, name in enumerate(order))
    delays, rates, loss = (mirrored(getattr(spec, t), spec.symmetric) for t, _ in TABLES)
    paths = {(a.name, b.name): WanPath(delay_s=float(delays.get((a.name, b.name), 0.0)),
                                       loss=float(loss.get((a.name, b.name), 0.0)),
                                       rate_bps=rates.get((a.name, b.name)))  # type: ignore[arg-type]
             for a in sites for b in sites if a is not b}
    return SiteLayout(sites=sites, paths=paths)


def describe_lines(lay: SiteLayout, node_names: list[str]) -> list[str]:
    """`validate`'s lines: each site's uplink and nodes, then each WAN path (once where both ways agree)."""
    def rate(bps: int | None) -> str:
        return format_rate(bps) if bps else "unlimited"

    lines = ["sites (nodes behind one shared uplink; a frame between two sites crosses both uplinks and the WAN path):"]
    for s in lay.sites:
        names = [node_names[r] for r in s.ranks]
        lines.append(f"  {s.name}: {len(names)} node{'s' if len(names) != 1 else ''} ({', '.join(names)}) share "
                     f"{rate(s.up_bps)} up / {rate(s.down_bps)} down, {format_duration(s.delay_s)} one-way")

    def show(p: WanPath) -> str:
        parts = [format_duration(p.delay_s)] + ([format_rate(p.rate_bps)] if p.rate_bps else []) \
            + ([f"loss {format_percent(p.loss)}"] if p.loss else [])
        return ", ".join(parts)

    for i, a in enumerate(lay.sites):
        for b in lay.sites[i + 1:]:
            there, back = lay.path(a.name, b.name), lay.path(b.name, a.name)
            ways = show(there) if there == back else f"{show(there)} / back {show(back)}"
            rtt = a.delay_s + there.delay_s + b.delay_s + b.delay_s + back.delay_s + a.delay_s
            lines.append(f"  {a.name} <-> {b.name}: WAN {ways} (RTT between the sites' bridges "
                         f"{format_duration(rtt)})")
    return lines


def describe_json(lay: SiteLayout, node_names: list[str]) -> dict:
    """`validate --json`'s `sites`: each site's uplink and nodes, every ordered pair's WAN path (bit/s, s, fractions)."""
    return {"uplinks": [{"site": s.name, "nodes": [node_names[r] for r in s.ranks], "up_bps": s.up_bps,
                         "down_bps": s.down_bps, "delay_s": s.delay_s} for s in lay.sites],
            "paths": [{"from": a, "to": b, "delay_s": p.delay_s, "loss": p.loss, "rate_bps": p.rate_bps}
                      for (a, b), p in lay.paths.items()]}
