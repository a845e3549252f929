"""`links`: a scenario's links brought up and judged against their spec (issue 50: moved here from api.py).

Two checks, each a measurement (net/linktest.py, net/schedtest.py) plus its pass criteria and typed report:
- `check_links`: each node's goodput up and down (against a far end on the switch) and RTT where delay is emulated,
  within a tolerance of the configured rate;
- `check_schedule`: one node's rate per window while the links' schedules and traces play, against the rate asked
  for, and how late each change came.

The network is given, not built: the caller (distro_bench.api) runs the preflight, makes the netns backend and
hands it over up (a `LinkNetwork`), so this layer needs nothing from backends/ or run/.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from distro_bench.errors import InputError
from distro_bench.net import linktest
from distro_bench.net.linktest import Check, LinkTarget
from distro_bench.net.ns import NetnsRef
from distro_bench.net.schedtest import measure_schedule
from distro_bench.scenario.model import Scenario
from distro_bench.scenario.timeline import Timeline, compile_timeline
from distro_bench.scenario.trace import load_trace

MAX_CHANGE_LATENESS_S = 0.2  # a schedule change applied later than this fails `links_schedule`


class LinkNetwork(Protocol):
    """The links, up (backends/netns.py NetnsBackend inside its `with`): what the checks read of them."""

    def describe(self) -> dict: ...

    def far_end(self) -> tuple[NetnsRef, str]: ...

    def link_targets(self) -> list[LinkTarget]: ...


class LinksProgress(Protocol):
    """What `links` tells as it goes (the CLI prints each)."""

    def measuring(self, tool: str, lo: float, hi: float) -> None:
        """Before the links come up: the goodput tool and the pass range (fractions of the configured rate)."""

    def network(self, link_engine: str, reason: str, not_emulated: list[str], queues: list[str]) -> None:
        """The links are up: the engine in use, why, what could not be emulated, and what each direction's
        queue holds before it drops (linktest.queue_notes)."""

    def check(self, check: Check) -> None:
        """One measurement, as soon as it is made."""


class QuietLinks:
    """A LinksProgress that tells nothing (the API's default)."""

    def measuring(self, tool: str, lo: float, hi: float) -> None:
        pass

    def network(self, link_engine: str, reason: str, not_emulated: list[str], queues: list[str]) -> None:
        pass

    def check(self, check: Check) -> None:
        pass


def parse_tolerance(tolerance: str | tuple[float, float]) -> tuple[float, float]:
    """The pass range LO,HI as fractions of the configured rate, from "0.90,1.02", "90%,102%" or a pair."""
    if isinstance(tolerance, str):
        try:
            lo, hi = (float(x.strip().rstrip("%")) for x in tolerance.split(","))
        except ValueError:
            raise InputError(f"--tolerance {tolerance!r}: write LO,HI as fractions of the rate, e.g. 0.90,1.02") from None
        if "%" in tolerance:
            lo, hi = lo / 100, hi / 100
    else:
        lo, hi = tolerance
    if not 0 < lo < hi:
        raise InputError(f"--tolerance {tolerance!r}: need 0 < LO < HI")
    return lo, hi


def goodput_tool_named(name: str) -> str:
    """`name` checked against linktest.GOODPUT_TOOLS (InputError naming the valid ones), returned as given."""
    if name not in linktest.GOODPUT_TOOLS:
        raise InputError(f"--goodput-tool: unknown tool {name!r}; one of {', '.join(linktest.GOODPUT_TOOLS)}")
    return name


# ---- goodput and RTT ------------------------------------------------------------------------------

@dataclass(frozen=True)
class LinksReport:
    """Each node's goodput up and down and RTT, measured against the scenario's spec."""

    scenario: str
    link_engine: str
    goodput_tool: str
    checks: list[Check]
    queues: list[str] = field(default_factory=list)  # what each direction holds before it drops

    @property
    def passed(self) -> bool:
        return not any(c.status == "FAIL" for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "link_engine": self.link_engine, "goodput_tool": self.goodput_tool,
                "passed": self.passed, "queues": self.queues,
                "checks": [{"node": c.node, "check": c.what, "configured": c.configured, "measured": c.measured,
                            "unit": c.unit, "ratio": c.ratio, "status": c.status, "criterion": c.note, "tool": c.tool}
                           for c in self.checks]}


def check_links(network: LinkNetwork, scenario: str, *, goodput_range: tuple[float, float], seconds: float,
                goodput_tool: str, progress: LinksProgress) -> LinksReport:
    """Measure every node of `network` (up) and judge it: goodput within `goodput_range` of the configured rate,
    RTT within linktest's tolerance of the emulated delay. `progress` hears the network and each check."""
    net = network.describe()
    queues = linktest.queue_notes(net["nodes"])
    progress.network(net["link_engine"], net["link_engine_reason"], list(net["not_emulated"]), queues)
    far_ns, far_addr = network.far_end()
    checks = linktest.measure(network.link_targets(), far_ns, far_addr, seconds=seconds, goodput_range=goodput_range,
                              tool=goodput_tool, on_check=progress.check)
    return LinksReport(scenario=scenario, link_engine=net["link_engine"], goodput_tool=linktest.goodput_tool(goodput_tool),
                       checks=list(checks), queues=queues)


# ---- schedules and traces -------------------------------------------------------------------------

@dataclass(frozen=True)
class ScheduleReport:
    """One node's rate per window while the links' schedules and traces play, against the rate asked for."""

    scenario: str
    node: int
    direction: str
    window_s: float
    asked_bps: list[float]
    wire_bps: list[float]  # egress frames
    goodput_bps: list[float]  # receiver payload
    lateness_s: list[float]  # per applied change: how late it came
    correlation: float  # Pearson r of wire and asked
    total_ratio: float  # total wire / total asked
    windows_outside: int  # settled windows outside the tolerance
    windows_settled: int  # windows neither holding a change nor right after one
    tolerance: tuple[float, float]

    @property
    def passed(self) -> bool:
        return not self.windows_outside and not any(x > MAX_CHANGE_LATENESS_S for x in self.lateness_s)

    def to_dict(self) -> dict[str, Any]:  # `links --schedule --json`: the settled count and tolerance are not in it
        d = asdict(self)
        del d["windows_settled"], d["tolerance"]
        return {**d, "passed": self.passed}


@dataclass(frozen=True)
class SchedulePlan:
    """What `check_schedule` follows: the scenario's timeline and how long to measure."""

    timeline: Timeline
    seconds: float


def plan_schedule(s: Scenario, *, node: int, direction: str, seconds: float) -> SchedulePlan:
    """Before any namespace exists: the node and direction checked, and the length to measure (a trace's
    period, else the last timed change plus `seconds`, at least 10 s)."""
    if direction not in ("up", "down"):
        raise InputError(f"--direction: {direction!r}; one of up, down")
    if node >= s.world_size:
        raise InputError(f"--node: {node}; this scenario has ranks 0..{s.world_size - 1}")
    tl = compile_timeline(s)
    mine = [c for c in tl.timed if c.rank == node and c.kind == "schedule" and direction in c.directions]
    trace = next((t for t in tl.traces if t.rank == node and t.direction == direction), None)
    if not mine and trace is None:
        raise InputError(f"--schedule: node {node}'s {direction} link has no timed schedule entry or trace to follow")
    length = load_trace(trace.path).period_s if trace else (mine[-1].at_s or 0.0) + max(seconds, 10.0)
    return SchedulePlan(tl, length)


def check_schedule(network: LinkNetwork, scenario: str, plan: SchedulePlan, *, node: int, direction: str,
                   tolerance: tuple[float, float]) -> ScheduleReport:
    """Play the timeline on `network` (up), measure `node`'s `direction` per window and judge it: every settled
    window within `tolerance` of the asked rate, no change later than MAX_CHANGE_LATENESS_S."""
    m = measure_schedule(network, plan.timeline, rank=node, direction=direction, seconds=plan.seconds)
    ratios = m.ratios()
    lo, hi = tolerance
    return ScheduleReport(
        scenario=scenario, node=node, direction=direction, window_s=m.window_s, asked_bps=m.expected_bps,
        wire_bps=m.wire_bps, goodput_bps=m.goodput_bps, lateness_s=m.lateness_s(), correlation=m.correlation(),
        total_ratio=m.total_ratio(), windows_outside=sum(not lo <= r[1] <= hi for r in ratios),
        windows_settled=len(ratios), tolerance=(lo, hi))
