"""Link engines (how delay, jitter and loss are emulated) and the per-node link plan built with one.

Rate is always a kernel token bucket (tbf) on the egress interface. Delay, jitter and loss go to:
- `tc`: netem in the kernel, as a child of the tbf;
- `userspace`: the userspace delay line (harness/distro_bench/net/delayline.py) in a link namespace between the
  node and the switch, for kernels without netem.
`auto` picks tc when the kernel has netem, else userspace; with region delays it prefers userspace (below).
Region paths (a delay per destination) are done by the uplink's delay line, or with tc by an htb class
per destination path with a netem child (harness/distro_bench/net/tcclass.py). Planning is pure (nodes + capabilities
in, plan out) and happens once, at preflight, before anything is created: a scenario this host
cannot emulate stops here with a CapabilityError naming the link, the missing piece and the way out.
The plan is what harness/distro_bench/net/emulation.py applies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from distro_bench.errors import CapabilityError, InputError
from distro_bench.net.host import Capabilities
from distro_bench.net.link import IMPAIRMENTS, Direction, Impairment
from distro_bench.net.shaping import QdiscPlan
from distro_bench.scenario.model import LinkSpec, Node
from distro_bench.scenario.regions import RegionMatrix
from distro_bench.scenario.regions import pair_paths as region_pair_paths
from distro_bench.scenario.sites import SiteLayout

WAY_OUT = ("use --link-engine userspace (a userspace delay line), or --allow-unemulated "
           "(run with what can be emulated; the run folder says what was not)")


def directions(link: LinkSpec | None) -> tuple[Direction, Direction]:
    """(up, down) of a link: the one place a scenario's link becomes the type every engine takes.
    Every impairment of the table (delay, jitter, loss, ...) is one-way and the same both ways."""
    if link is None:
        return Direction(), Direction()
    impairments = {row.attr: getattr(link, row.key) for row in IMPAIRMENTS}
    return Direction(rate_bps=link.up, **impairments), Direction(rate_bps=link.down, **impairments)


def _states(link: LinkSpec | None) -> list[LinkSpec | None]:
    return [*link.states()] if link is not None else [None]


def direction_plan(spec: Direction, engine: str, *, delay_line: Impairment | None) -> DirectionPlan:
    """How one direction changed at run time is applied: the same split as planning made for it.
    `delay_line` is the direction's current delay-line impairment (None: this node has no delay line);
    its seed is kept so a change leaves the random stream where it was."""
    if delay_line is not None:
        return DirectionPlan(spec=spec, tc=QdiscPlan.of(spec.without_impairment()),
                             delay_line=replace(spec.impairment, seed=delay_line.seed))
    if spec.impaired and engine != "tc":
        raise CapabilityError(f"{spec.impairment_text()} needs a link engine this node was not planned with "
                              f"(engine {engine}, no delay line)")
    return DirectionPlan(spec=spec, tc=QdiscPlan.of(spec))


def delay_line_seed(seed: int, rank: int, direction: str) -> int:
    """The random stream of one node's delay line in one direction: reproducible from the run's seed,
    different for every node and direction."""
    return seed * 1000 + 2 * rank + (direction == "down")


@dataclass(frozen=True)
class DirectionPlan:
    spec: Direction  # what the scenario asks of this direction
    tc: QdiscPlan  # what tc does on the egress interface (node side for up, switch side for down)
    delay_line: Impairment | None = None  # what the userspace delay line does, if it has a part
    not_emulated: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeLinkPlan:
    rank: int
    name: str
    link_name: str | None
    up: DirectionPlan
    down: DirectionPlan
    region: str | None = None
    # The path of this node's uplink to each other rank beyond the access links, `((rank, delay_s, jitter_s,
    # loss), ...)`: between regions (harness/distro_bench/scenario/regions.py), done by destination by the uplink's delay
    # line, or (tc engine, no delay line) by its htb class per path.
    pair_paths: tuple[tuple[int, float, float, float], ...] = ()

    @property
    def needs_delay_line(self) -> bool:
        return self.up.delay_line is not None or self.down.delay_line is not None

    @property
    def pair_delays(self) -> tuple[tuple[int, float], ...]:
        """`((rank, one-way delay), ...)` of the paths to other regions."""
        return tuple((p[0], p[1]) for p in self.pair_paths)

    def direction(self, name: str) -> DirectionPlan:
        return {"up": self.up, "down": self.down}[name]

    @property
    def not_emulated(self) -> list[str]:
        return [f"{self.name} {d}: {what}" for d, p in (("up", self.up), ("down", self.down)) for what in p.not_emulated]


@dataclass(frozen=True)
class SitePath:
    """A site uplink's WAN path to another site: its nodes (ranks), one-way delay, loss and rate (None: the uplink's)."""

    site: str
    ranks: tuple[int, ...]
    delay_s: float = 0.0
    loss: float = 0.0
    rate_bps: int | None = None


@dataclass(frozen=True)
class SiteLinkPlan:
    """A site's shared uplink (harness/distro_bench/scenario/sites.py): `up` is the egress of the site's side of the
    uplink (towards the core), `down` the core's side (towards the site); `paths` the WAN path to every other site,
    done per destination like a region path (tc: an htb class per destination site; userspace: the uplink's delay
    line by destination address)."""

    index: int
    name: str
    ranks: tuple[int, ...]
    up: DirectionPlan
    down: DirectionPlan
    paths: tuple[SitePath, ...] = ()

    @property
    def needs_delay_line(self) -> bool:
        return self.up.delay_line is not None or self.down.delay_line is not None

    def direction(self, name: str) -> DirectionPlan:
        return {"up": self.up, "down": self.down}[name]


@dataclass(frozen=True)
class NetworkPlan:
    engine: str  # the engine delay/jitter/loss use ("none" when no link asks for them)
    engine_reason: str
    nodes: tuple[NodeLinkPlan, ...]
    sites: tuple[SiteLinkPlan, ...] = ()

    @property
    def not_emulated(self) -> list[str]:
        return [x for n in self.nodes for x in n.not_emulated] + [
            f"site {s.name} uplink {d}: {what}" for s in self.sites for d in ("up", "down")
            for what in s.direction(d).not_emulated]

    @property
    def delay_line_ranks(self) -> set[int]:
        return {n.rank for n in self.nodes if n.needs_delay_line}

    @property
    def delay_line_sites(self) -> set[int]:
        return {s.index for s in self.sites if s.needs_delay_line}


@dataclass(frozen=True)
class LinkEngine:
    name: str
    description: str
    available: Callable[[Capabilities], tuple[bool, str]]
    uses_delay_line: bool = False
    aliases: tuple[str, ...] = field(default=())


def _tc_available(caps: Capabilities) -> tuple[bool, str]:
    if caps.netem:
        return True, "kernel has netem"
    if not caps.netns:
        return False, f"network namespaces, which are unavailable ({caps.netns_error})"
    return False, "the netem qdisc, which this kernel does not have"


def _userspace_available(caps: Capabilities) -> tuple[bool, str]:
    if not caps.netns:
        return False, f"network namespaces, which are unavailable ({caps.netns_error})"
    if not caps.delayline:
        return False, f"the userspace delay line ({caps.delayline_detail})"
    return True, "userspace delay line available"


ENGINES: dict[str, LinkEngine] = {
    "tc": LinkEngine("tc", "netem in the kernel (child of the rate's tbf)", _tc_available),
    "userspace": LinkEngine("userspace", "userspace delay line in a link namespace per node",
                            _userspace_available, uses_delay_line=True),
}
ENGINE_CHOICES = ("auto", *ENGINES)


def select_engine(requested: str, caps: Capabilities) -> tuple[LinkEngine | None, str]:
    """(engine for delay/jitter/loss or None when none can run here, why)."""
    if requested not in ENGINE_CHOICES:
        raise InputError(f"--link-engine: unknown engine {requested!r}; one of {', '.join(ENGINE_CHOICES)}")
    if requested != "auto":
        ok, why = ENGINES[requested].available(caps)
        return (ENGINES[requested], f"{requested} (requested; {why})") if ok else (None, why)
    missing = []
    for name in ("tc", "userspace"):
        ok, why = ENGINES[name].available(caps)
        if ok:
            return ENGINES[name], f"auto: {name} ({why})"
        missing.append(why)
    return None, "either " + " or ".join(missing)


SITES_UNSUPPORTED = ("sites: {where} name a site, whose nodes share one uplink; this backend does not build site "
                     "uplinks (the netns backend does once it passes the scenario's site layout to plan_links). "
                     "Way out: drop sites: and workers[].site to run the nodes on their access links alone")


def plan_links(nodes: Sequence[Node], caps: Capabilities, *, engine: str = "auto",
               allow_unemulated: bool = False, seed: int = 0, regions: RegionMatrix | None = None,
               sites: SiteLayout | None = None) -> NetworkPlan:
    """Decide, for every node and direction, what tc does, what the delay line does, and what is not
    emulated. Raises CapabilityError (before anything is created) when part of a link cannot be
    emulated and `allow_unemulated` is off. `seed` (the run's) seeds the delay lines' draws. `regions`
    (the scenario's matrix) adds a delay per destination to every uplink whose region differs. `sites` (the
    scenario's layout, from a backend that builds site uplinks) adds each site's shared uplink; nodes naming
    a site without it are refused: nothing would share their uplink."""
    if sites is None and any(n.site for n in nodes):
        raise CapabilityError(SITES_UNSUPPORTED.format(where=", ".join(n.name for n in nodes if n.site)))
    # A link that changes during the run (harness/distro_bench/scenario/timeline.py) is planned for every state it will pass
    # through: a delay line that a later `loss: 5%` needs is started with the run, not mid-run.
    impaired = any(d.impaired for n in nodes for st in _states(n.link) for d in directions(st))
    pairs = region_pair_paths([n.region for n in nodes], regions)
    chosen, reason = select_engine(engine, caps)
    site_delays = sites is not None and (any(s.delay_s for s in sites.sites)
                                         or any(p.delay_s or p.loss for p in sites.paths.values()))
    if (any(pairs) or site_delays) and engine == "auto":
        # A delay per destination needs one queue per destination: both engines have them (the delay line's
        # queue per destination, tc's htb class per path). auto keeps the delay line, the engine the 5% per
        # pair was measured with on this project's hosts (which lack netem); tc where there is no delay line.
        ok, why = ENGINES["userspace"].available(caps)
        tc_ok, tc_why = ENGINES["tc"].available(caps)
        what = "region" if any(pairs) else "WAN"
        if ok:
            chosen, reason = ENGINES["userspace"], f"auto: userspace ({what} delays are per destination; {why})"
        elif tc_ok:
            chosen, reason = ENGINES["tc"], f"auto: tc ({what} delays by htb class per destination; {tc_why})"
        else:
            chosen, reason = None, f"either {why} or {tc_why}"
    elif not impaired and not any(pairs) and not site_delays:
        chosen, reason = None, "no link asks for delay, jitter or loss"
    problems: dict[str, list[str]] = {}  # link -> missing pieces, reported once per link
    plans = []
    for pos, n in enumerate(nodes):
        link_label = n.link_name or "inline"
        per_dir = []
        to_ranks = tuple((nodes[j].rank, delay, jitter, loss) for j, delay, jitter, loss in pairs[pos])
        later = [directions(st) for st in _states(n.link)[1:]]
        for k, (dname, spec) in enumerate(zip(("up", "down"), directions(n.link))):
            missing = []
            regional = dname == "up" and bool(to_ranks)  # the uplink also carries the paths to other regions
            rate = spec.rate_bps
            if rate and not caps.rate_shaping:
                missing.append(f"rate {rate} bit/s needs the tbf qdisc")
                rate = None
            ever_impaired = spec.impaired or any(st[k].impaired for st in later)
            netem_part = spec.impaired and chosen is not None and not chosen.uses_delay_line
            line = (ever_impaired or regional) and chosen is not None and chosen.uses_delay_line
            if ever_impaired and chosen is None:
                what = spec.impairment_text() or next(st[k].impairment_text() for st in later if st[k].impaired)
                missing.append(f"{what} needs {reason}")
            if regional and chosen is None:
                missing.append(f"the delay from region {n.region} to the other regions needs {reason}")
            elif regional and chosen is not None and not chosen.uses_delay_line and not caps.has_qdisc("htb"):
                missing.append(f"the delay from region {n.region} to the other regions needs the htb qdisc "
                               "(a class per destination)")
            tc = QdiscPlan.of(replace(spec if netem_part else spec.without_impairment(), rate_bps=rate))
            delay_line = replace(spec.impairment, seed=delay_line_seed(seed, n.rank, dname)) if line else None
            if missing:
                problems.setdefault(link_label, [])
                for m in missing:
                    if m not in problems[link_label]:
                        problems[link_label].append(m)
            per_dir.append(DirectionPlan(spec=spec, tc=tc, delay_line=delay_line, not_emulated=tuple(missing)))
        plans.append(NodeLinkPlan(rank=n.rank, name=n.name, link_name=n.link_name, up=per_dir[0], down=per_dir[1],
                                  region=n.region, pair_paths=to_ranks if chosen is not None else ()))
    site_plans = _plan_sites(sites, nodes, caps, chosen, reason, seed, problems) if sites is not None else ()
    if problems and not allow_unemulated:
        where = "; ".join((f"{link}'s shared uplink" if link.startswith("site ") else
                           f"link {link!r} ({', '.join(n.name for n in nodes if (n.link_name or 'inline') == link)})")
                          + ": " + "; ".join(ms) for link, ms in problems.items())
        engine_note = f" with --link-engine {engine}" if engine != "auto" else ""
        # Never advise the flag already passed, nor an engine that cannot run here either.
        way_out = WAY_OUT if engine == "tc" and ENGINES["userspace"].available(caps)[0] else WAY_OUT.split("or ", 1)[1]
        raise CapabilityError(f"this host cannot emulate the scenario{engine_note}: {where}. Way out: {way_out}")
    return NetworkPlan(engine=chosen.name if chosen else "none", engine_reason=reason, nodes=tuple(plans),
                       sites=site_plans)


# A site's delay line draws from a stream of its own: past every rank's (ranks are < 64).
SITE_SEED_BASE = 100


def _plan_sites(sites: SiteLayout, nodes: Sequence[Node], caps: Capabilities, chosen: LinkEngine | None,
                reason: str, seed: int, problems: dict[str, list[str]]) -> tuple[SiteLinkPlan, ...]:
    """Each site's shared uplink, planned as a node's link is: the rate by tbf (up: an htb class per destination
    site when there are others), the delay and the WAN paths' delay and loss by netem (tc) or by a delay line on
    the uplink (userspace). What cannot be emulated goes to `problems` under `site <name>`."""
    rank_of = [n.rank for n in nodes]
    out = []
    for s in sites.sites:
        ranks = tuple(rank_of[i] for i in s.ranks)
        paths = tuple(SitePath(site=t.name, ranks=tuple(rank_of[i] for i in t.ranks),
                               delay_s=sites.path(s.name, t.name).delay_s, loss=sites.path(s.name, t.name).loss,
                               rate_bps=sites.path(s.name, t.name).rate_bps)
                      for t in sites.sites if t is not s)
        wan_impaired = any(p.delay_s or p.loss for p in paths)
        missing: list[str] = []
        per_dir = []
        for dname, rate in (("up", s.up_bps), ("down", s.down_bps)):
            spec = Direction(rate_bps=rate, delay_s=s.delay_s)
            before = len(missing)
            if rate and not caps.rate_shaping:
                missing.append(f"rate {rate} bit/s needs the tbf qdisc")
            impaired = spec.impaired or (dname == "up" and wan_impaired)
            if impaired and chosen is None:
                missing.append(f"{'the WAN paths and ' if dname == 'up' and wan_impaired else ''}"
                               f"{spec.impairment_text() or 'delay'} need {reason}")
            line = chosen is not None and chosen.uses_delay_line and (bool(s.delay_s) or wan_impaired)
            netem = chosen is not None and not chosen.uses_delay_line
            tc = QdiscPlan.of(spec if netem else spec.without_impairment())
            per_dir.append(DirectionPlan(spec=spec, tc=tc, not_emulated=tuple(missing[before:]),
                                         delay_line=replace(spec.impairment, seed=delay_line_seed(
                                             seed, SITE_SEED_BASE + s.index, dname)) if line else None))
        if paths and not caps.has_qdisc("htb"):
            missing.append("a class per destination site needs the htb qdisc")
        if missing:
            problems.setdefault(f"site {s.name}", []).extend(m for m in missing
                                                              if m not in problems.get(f"site {s.name}", []))
        out.append(SiteLinkPlan(index=s.index, name=s.name, ranks=ranks, up=per_dir[0], down=per_dir[1],
                                paths=paths))
    return tuple(out)
