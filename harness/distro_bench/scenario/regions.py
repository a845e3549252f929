"""Geo-distributed topologies: regions and the one-way delay between every ordered pair of them.

A scenario names a `region` per worker group and gives, in `regions:`, the one-way delay from each
region to each other (a named preset, its own table, or a preset with some pairs overridden). The pair
delay is added on top of the access links: a frame from node i to node j crosses i's uplink, the path
from i's region to j's, and j's downlink, so

    RTT(i, j) = up_i + d(r_i, r_j) + down_j  +  up_j + d(r_j, r_i) + down_i.

It is applied on the sender's side, per destination (harness/distro_bench/net/engines.py plans it; the delay line
delays each frame by its destination address, harness/distro_bench/net/delayline/schedule.py). This module is pure:
the schema, the presets (harness/distro_bench/scenario/region_presets.py) and the matrix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from distro_bench.scenario.region_presets import REGION_PRESETS
from distro_bench.scenario.units import Duration, Percent, format_duration, format_percent, no_bool_numbers

REGION_PATTERN = r"^[a-z][a-z0-9-]{0,31}$"


def _schema_with_shorthand(schema: dict) -> None:
    # The JSON schema (docs/scenario.schema.json) also accepts the `preset:NAME` string the validator takes.
    obj = dict(schema)
    schema.clear()
    schema.update(title=obj.get("title"), description=obj.get("description"), anyOf=[
        {"type": "string", "description": "a preset: preset:NAME (or NAME)", "examples": ["preset:cloud-3"]}, obj])


class RegionsSpec(BaseModel):
    """`regions: preset:cloud-3`, or a table of one-way delays `delays: {from: {to: 40ms}}` (with or
    without a preset under it). `symmetric` (default) fills d(b, a) from d(a, b) where only one is given;
    `intra` is the one-way delay between two nodes of the same region. `jitter` and `loss` are optional tables
    of the same shape (a pair not in them has none), following the same `symmetric` rule."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False,
                              json_schema_extra=_schema_with_shorthand)
    _no_bools = field_validator("*", mode="before")(classmethod(no_bool_numbers))  # `intra: false` is not 0

    preset: str | None = None
    intra: Duration = 0.0
    symmetric: bool = True
    delays: dict[str, dict[str, Duration]] = Field(default_factory=dict)
    jitter: dict[str, dict[str, Duration]] = Field(default_factory=dict)
    loss: dict[str, dict[str, Percent]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _preset_shorthand(cls, data: Any) -> Any:
        # `regions: preset:cloud-3` (or just `cloud-3`) is a preset with nothing overridden.
        if isinstance(data, str):
            return {"preset": data.removeprefix("preset:").strip()}
        return data


@dataclass(frozen=True)
class RegionMatrix:
    """The resolved one-way delays (seconds): `delay(a, b)` for every ordered pair the table covers."""

    intra_s: float
    one_way: dict[tuple[str, str], float]
    source: str = ""  # where a preset's figures come from
    jitter: dict[tuple[str, str], float] = field(default_factory=dict)
    loss: dict[tuple[str, str], float] = field(default_factory=dict)

    @property
    def regions(self) -> list[str]:
        return sorted({r for pair in self.one_way for r in pair})

    def delay(self, src: str, dst: str) -> float:
        if src == dst:
            return self.intra_s
        return self.one_way[(src, dst)]

    def rtt(self, a: str, b: str) -> float:
        return self.delay(a, b) + self.delay(b, a)

    def path(self, src: str, dst: str) -> tuple[float, float, float]:
        """(one-way delay, jitter, loss) from `src` to `dst`; within a region the intra delay alone."""
        if src == dst:
            return self.intra_s, 0.0, 0.0
        return self.one_way[(src, dst)], self.jitter.get((src, dst), 0.0), self.loss.get((src, dst), 0.0)


def _table(spec: RegionsSpec) -> tuple[dict[str, dict[str, float]], str]:
    """The preset's table (if any) with the scenario's own entries over it, in seconds."""
    table: dict[str, dict[str, float]] = {}
    source = ""
    if spec.preset is not None:
        preset = REGION_PRESETS[spec.preset]
        source = preset.source
        for a, row in preset.one_way_s.items():  # presets are symmetric: both directions, whatever `symmetric` says
            for b, d in row.items():
                table.setdefault(a, {})[b] = d
                table.setdefault(b, {})[a] = d
    for a, row in spec.delays.items():
        table.setdefault(a, {}).update(row)
    return table, source


def matrix_problems(spec: RegionsSpec, used: dict[str, list[str]]) -> list[str]:
    """What is wrong with `spec` for the regions in use (`region -> the worker groups naming it`, e.g.
    `{"us-east": ["workers[0]"]}`): every problem names the field, the value and what would be valid."""
    problems = []
    if spec.preset is not None and spec.preset not in REGION_PRESETS:
        return [f"regions.preset: unknown preset {spec.preset!r}; known: {', '.join(sorted(REGION_PRESETS))}"]
    names = {r for tab in (spec.delays, spec.jitter, spec.loss) for a, row in tab.items() for r in (a, *row)}
    for name in sorted(names | set(used)):
        if not re.fullmatch(REGION_PATTERN, name):
            problems.append(f"regions: invalid region name {name!r}: 1-32 lower-case letters, digits and '-', "
                            "starting with a letter")
    for what, tab, fmt in (("delays", spec.delays, format_duration), ("jitter", spec.jitter, format_duration),
                           ("loss", spec.loss, format_percent)):
        for a, row in tab.items():
            if a in row:
                problems.append(f"regions.{what}.{a}.{a}: a pair is two regions (within one: regions.intra)")
        if spec.symmetric:
            problems += disagreements(f"regions.{what}", tab, fmt, "regions.symmetric")
    table, _ = _table(spec)
    jitter, loss = mirrored(spec.jitter, spec.symmetric), mirrored(spec.loss, spec.symmetric)
    for (a, b), j in sorted(jitter.items()):
        delay = table.get(a, {}).get(b, table.get(b, {}).get(a) if spec.symmetric else None)
        if delay is not None and j > delay:
            problems.append(f"regions.jitter.{a}.{b}: {format_duration(j)} exceeds the pair's delay "
                            f"{format_duration(delay)}; an in-order path cannot deliver a frame before it was sent")
    for what, pairs in (("jitter", jitter), ("loss", loss)):
        for a, b in sorted(pairs):
            if not (b in table.get(a, {}) or (spec.symmetric and a in table.get(b, {}))):
                problems.append(f"regions.{what}.{a}.{b}: no delay is given for {a} -> {b}; "
                                f"give regions.delays.{a}.{b} too")
    regions = sorted(used)
    for a in regions:
        for b in regions:
            if a == b or b in table.get(a, {}) or (spec.symmetric and a in table.get(b, {})):
                continue
            if spec.symmetric and b < a:
                continue  # reported once, as a -> b with a < b
            where = ", ".join(sorted(set(used[a]) | set(used[b])))
            hint = (f"give regions.delays.{a}.{b}" if spec.symmetric
                    else f"give regions.delays.{a}.{b} (regions.symmetric is false: each direction is needed)")
            problems.append(f"regions: no delay for the pair {a} -> {b} (regions used by {where}); {hint}"
                            + (f", or use regions known to preset {spec.preset!r}: "
                               f"{', '.join(REGION_PRESETS[spec.preset].regions)}" if spec.preset else ""))
    return problems


def disagreements(where: str, tab: dict[str, dict], fmt, flag: str) -> list[str]:
    """The pairs a symmetric table gives both ways with different values (each pair once), as problems."""
    return [f"{where}: {a} -> {b} is {fmt(v)} but {b} -> {a} is {fmt(back)}; set {flag}: false for asymmetric "
            "paths, or give one direction"
            for a, row in tab.items() for b, v in row.items()
            if (back := tab.get(b, {}).get(a)) is not None and back != v and a < b]


def mirrored(tab: dict[str, dict], symmetric: bool) -> dict[tuple[str, str], float]:
    """A `{from: {to: value}}` table as ordered pairs; symmetric, each given pair also the other way unless given."""
    out = {(a, b): v for a, row in tab.items() for b, v in row.items()}
    if symmetric:
        for (a, b), v in list(out.items()):
            out.setdefault((b, a), v)
    return out


def resolve(spec: RegionsSpec) -> RegionMatrix:
    """The matrix of a valid spec (matrix_problems empty): every ordered pair it covers, in seconds."""
    table, source = _table(spec)
    one_way: dict[tuple[str, str], float] = {}
    for a, row in table.items():
        for b, d in row.items():
            one_way[(a, b)] = d
    if spec.symmetric:
        for (a, b), d in list(one_way.items()):
            one_way.setdefault((b, a), d)
    return RegionMatrix(intra_s=spec.intra, one_way=one_way, source=source,
                        jitter=mirrored(spec.jitter, spec.symmetric), loss=mirrored(spec.loss, spec.symmetric))


def pair_paths(regions: list[str | None], matrix: RegionMatrix | None) -> list[tuple[tuple[int, float, float, float], ...]]:
    """Per node (by position), the path of its uplink to every other node beyond the access links,
    `((dest_position, delay_s, jitter_s, loss), ...)` (paths that add nothing left out). Nodes without a
    region, or no matrix, add nothing."""
    out = []
    for i, ri in enumerate(regions):
        row = []
        for j, rj in enumerate(regions):
            if i == j or matrix is None or ri is None or rj is None:
                continue
            path = matrix.path(ri, rj)
            if any(path):
                row.append((j, *path))
        out.append(tuple(row))
    return out


def describe_lines(matrix: RegionMatrix, used: list[str]) -> list[str]:
    """`validate`'s lines for the regions in use: each pair once (both ways when they differ), with its RTT."""
    lines = ["regions (one-way delay between them):"]
    if matrix.intra_s:
        lines.append(f"  within a region: {format_duration(matrix.intra_s)}")
    regions = sorted(set(used))
    for i, a in enumerate(regions):
        for b in regions[i + 1:]:
            there, back = matrix.path(a, b), matrix.path(b, a)

            def show(p):
                return (format_duration(p[0]) + (f"±{format_duration(p[1])}" if p[1] else "")
                        + (f" loss {format_percent(p[2])}" if p[2] else ""))
            ways = show(there) if there == back else f"{show(there)} / back {show(back)}"
            lines.append(f"  {a} <-> {b}: {ways} (RTT {format_duration(there[0] + back[0])})")
    if matrix.source:
        lines.append(f"  source: {matrix.source}")
    return lines


def describe_json(matrix: RegionMatrix, used: list[str]) -> list[dict]:
    """`validate --json`'s `regions`: every ordered pair of the regions in use, in seconds and fractions."""
    regions = sorted(set(used))
    return [{"from": a, "to": b, "delay_s": p[0], "jitter_s": p[1], "loss": p[2]}
            for a in regions for b in regions if a != b for p in [matrix.path(a, b)]]
