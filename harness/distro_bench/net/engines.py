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
class NetworkPlan:
    engine: str  # the engine delay/jitter/loss use ("none" when no link asks for them)
    engine_reason: str
    nodes: tuple[NodeLinkPlan, ...]

    @property
    def not_emulated(self) -> list[str]:
        return [x for n in self.nodes for x in n.not_emulated]

    @property
    def delay_line_ranks(self) -> set[int]:
        return {n.rank for n in self.nodes if n.needs_delay_line}


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


def plan_links(nodes: Sequence[Node], caps: Capabilities, *, engine: str = "auto",
               allow_unemulated: bool = False, seed: int = 0, regions: RegionMatrix | None = None) -> NetworkPlan:
    """Decide, for every node and direction, what tc does, what the delay line does, and what is not
    emulated. Raises CapabilityError (before anything is created) when part of a link cannot be
    emulated and `allow_unemulated` is off. `seed` (the run's) seeds the delay lines' draws. `regions`
    (the scenario's matrix) adds a delay per destination to every uplink whose region differs."""
    # A link that changes during the run (harness/distro_bench/scenario/timeline.py) is planned for every state it will pass
    # through: a delay line that a later `loss: 5%` needs is started with the run, not mid-run.
    impaired = any(d.impaired for n in nodes for st in _states(n.link) for d in directions(st))
    pairs = region_pair_paths([n.region for n in nodes], regions)
    chosen, reason = select_engine(engine, caps)
    if any(pairs) and engine == "auto":
        # A delay per destination needs one queue per destination: both engines have them (the delay line's
        # queue per destination, tc's htb class per path). auto keeps the delay line, the engine the 5% per
        # pair was measured with on this project's hosts (which lack netem); tc where there is no delay line.
        ok, why = ENGINES["userspace"].available(caps)
        tc_ok, tc_why = ENGINES["tc"].available(caps)
        if ok:
            chosen, reason = ENGINES["userspace"], f"auto: userspace (region delays are per destination; {why})"
        elif tc_ok:
            chosen, reason = ENGINES["tc"], f"auto: tc (region delays by htb class per destination; {tc_why})"
        else:
            chosen, reason = None, f"either {why} or {tc_why}"
    elif not impaired and not any(pairs):
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
    if problems and not allow_unemulated:
        where = "; ".join(f"link {link!r} ({', '.join(n.name for n in nodes if (n.link_name or 'inline') == link)}): "
                          + "; ".join(ms) for link, ms in problems.items())
        engine_note = f" with --link-engine {engine}" if engine != "auto" else ""
        # Never advise the flag already passed, nor an engine that cannot run here either.
        way_out = WAY_OUT if engine == "tc" and ENGINES["userspace"].available(caps)[0] else WAY_OUT.split("or ", 1)[1]
        raise CapabilityError(f"this host cannot emulate the scenario{engine_note}: {where}. Way out: {way_out}")
    return NetworkPlan(engine=chosen.name if chosen else "none", engine_reason=reason, nodes=tuple(plans))
