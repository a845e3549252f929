"""A scenario's changes during a run, compiled into one sorted list (issue 18). Torch-free and pure.

Every link `schedule` entry, outage and hardware `compute_schedule` entry of every node becomes a
`Change`: which node, which direction(s), the link state (or compute scale) from then on, and when.
Time triggers (`at`, seconds since the optimizer/seed run's first step) come first in time order,
then step triggers (`at_step`) in step order; harness/distro_bench/net/netchange.py applies them. Traces are not
expanded here (they change every few hundred ms and loop): `Timeline.traces` lists which directions
follow which file, and the scheduler follows them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from distro_bench.scenario.impairments import IMPAIRMENTS
from distro_bench.scenario.model import LinkSpec, Scenario
from distro_bench.scenario.units import format_duration, format_rate

# Link fields -> the directions a change of them touches: a rate its own, every impairment (one-way, the same
# both ways: harness/distro_bench/scenario/impairments.py) both.
FIELD_DIRECTIONS = {"up": ("up",), "down": ("down",), **{row.key: ("up", "down") for row in IMPAIRMENTS}}
_FORMAT = {"up": format_rate, "down": format_rate, **{row.key: row.format for row in IMPAIRMENTS}}


def format_field(name: str, value) -> str:
    """A link field's value in the scenario's units ('1Mbit', '15ms', '5%')."""
    if value is None:
        return "unlimited" if name in ("up", "down") else ""
    return _FORMAT.get(name, str)(value)


@dataclass(frozen=True)
class Change:
    """One change to one node. `kind`: "schedule" (link fields), "outage" (carries nothing for
    `duration_s`, then back to `link`) or "compute" (compute_scale). `link` is the node's whole link
    from then on (for an outage: the state it returns to)."""

    rank: int
    node: str
    kind: str
    at_s: float | None = None
    at_step: int | None = None
    directions: tuple[str, ...] = ()
    fields: dict[str, str] = field(default_factory=dict)  # field -> requested value, in scenario units
    previous: dict[str, str] = field(default_factory=dict)  # field -> value before
    link: LinkSpec | None = None
    link_name: str | None = None
    duration_s: float | None = None
    compute_scale: float | None = None

    @property
    def trigger(self) -> str:
        return f"at {format_duration(self.at_s)}" if self.at_s is not None else f"at step {self.at_step}"

    @property
    def direction(self) -> str:
        """events.parquet's direction: "up", "down", "both"; "" for compute."""
        if self.kind == "compute":
            return ""
        return self.directions[0] if len(self.directions) == 1 else "both"

    def describe(self) -> str:
        if self.kind == "outage":
            down_s = self.duration_s or 0.0  # an outage always has its duration
            return f"{self.node} link {self.link_name or ''} down for {format_duration(down_s)}".replace("  ", " ")
        if self.kind == "compute":
            return f"{self.node} compute_scale {self.previous.get('compute_scale')} -> {self.fields['compute_scale']}"
        return f"{self.node} " + ", ".join(f"{f} {self.previous.get(f, '')} -> {v}" for f, v in self.fields.items())


@dataclass(frozen=True)
class TraceFollow:
    """One node direction whose rate follows a trace file."""

    rank: int
    node: str
    direction: str
    path: Path
    resolution_s: float


@dataclass(frozen=True)
class Timeline:
    changes: tuple[Change, ...] = ()
    traces: tuple[TraceFollow, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.changes or self.traces)

    @property
    def timed(self) -> list[Change]:
        return [c for c in self.changes if c.at_s is not None]

    @property
    def stepped(self) -> list[Change]:
        return [c for c in self.changes if c.at_step is not None]

    @property
    def outage_ranks(self) -> set[int]:
        return {c.rank for c in self.changes if c.kind == "outage"}

    def longest_outage_s(self) -> float:
        return max((c.duration_s for c in self.changes if c.kind == "outage" and c.duration_s is not None), default=0.0)


def _link_changes(rank: int, node: str, link_name: str | None, link: LinkSpec) -> list[Change]:
    out: list[Change] = []
    cur = link
    for entry in link.schedule:
        if entry.outage is not None:
            out.append(Change(rank=rank, node=node, kind="outage", directions=("up", "down"), link=cur,
                              link_name=link_name, duration_s=entry.outage, fields={"down": format_duration(entry.outage)},
                              at_s=entry.at, at_step=entry.at_step))
            continue
        names = entry.changed()
        update = {f: getattr(entry, f) for f in names}
        nxt = cur.model_copy(update=update)
        dirs = tuple(d for d in ("up", "down") if any(d in FIELD_DIRECTIONS[f] for f in names))
        out.append(Change(rank=rank, node=node, kind="schedule", directions=dirs, link=nxt, link_name=link_name,
                          fields={f: format_field(f, update[f]) for f in names},
                          previous={f: format_field(f, getattr(cur, f)) for f in names}, at_s=entry.at,
                          at_step=entry.at_step))
        cur = nxt
    return out


def compile_timeline(scenario: Scenario) -> Timeline:
    """Every node's changes, time triggers in time order then step triggers in step order (ties: by rank,
    then as written), and the trace-following directions."""
    changes: list[Change] = []
    traces: list[TraceFollow] = []
    base = getattr(scenario, "_base_dir", Path("."))
    for n in scenario.nodes():
        if n.link is not None:
            changes += _link_changes(n.rank, n.name, n.link_name, n.link)
            for d in ("up", "down"):
                path = getattr(n.link, f"{d}_trace")
                if path:
                    traces.append(TraceFollow(rank=n.rank, node=n.name, direction=d,
                                              path=(base / path).resolve(), resolution_s=n.link.trace_resolution))
        prev = n.compute_scale
        for entry in n.hardware.compute_schedule:
            changes.append(Change(rank=n.rank, node=n.name, kind="compute", at_s=entry.at, at_step=entry.at_step,
                                  fields={"compute_scale": f"{entry.compute_scale:g}"},
                                  previous={"compute_scale": f"{prev:g}"}, compute_scale=entry.compute_scale))
            prev = entry.compute_scale
    order = {id(c): i for i, c in enumerate(changes)}
    changes.sort(key=lambda c: (c.at_s is None, c.at_s if c.at_s is not None else c.at_step, c.rank, order[id(c)]))
    return Timeline(changes=tuple(changes), traces=tuple(traces))


def compute_scale_at(base: float, schedule, t_s: float | None, step: int) -> float:
    """A worker's compute scale at `t_s` seconds since the first step (None before it) and `step`: the last
    entry of its `compute_schedule` whose time or step has come, else `base`. The worker's own clock."""
    scale = base
    for entry in schedule:
        if entry.at is not None:
            if t_s is None or t_s < entry.at:
                break
        elif step < entry.at_step:
            break
        scale = entry.compute_scale
    return scale
