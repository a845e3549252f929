"""Geo-distributed topologies: regions and the one-way delay between every ordered pair of them.

A scenario names a `region` per worker group and gives, in `regions:`, the one-way delay from each
region to each other (a named preset, its own table, or a preset with some pairs overridden). The pair
delay is added on top of the access links: a frame from node i to node j crosses i's uplink, the path
from i's region to j's, and j's downlink, so

    RTT(i, j) = up_i + d(r_i, r_j) + down_j  +  up_j + d(r_j, r_i) + down_i.

It is applied on the sender's side, per destination (harness/net/engines.py plans it; the delay line
delays each frame by its destination address, harness/net/delayline/schedule.py). This module is pure:
the schema, the presets (harness/net/region_presets.py) and the matrix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.net.region_presets import REGION_PRESETS
from harness.units import Duration, format_duration

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
    `intra` is the one-way delay between two nodes of the same region."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False,
                              json_schema_extra=_schema_with_shorthand)

    preset: str | None = None
    intra: Duration = 0.0
    symmetric: bool = True
    delays: dict[str, dict[str, Duration]] = Field(default_factory=dict)

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

    @property
    def regions(self) -> list[str]:
        return sorted({r for pair in self.one_way for r in pair})

    def delay(self, src: str, dst: str) -> float:
        if src == dst:
            return self.intra_s
        return self.one_way[(src, dst)]

    def has(self, src: str, dst: str) -> bool:
        return src == dst or (src, dst) in self.one_way

    def rtt(self, a: str, b: str) -> float:
        return self.delay(a, b) + self.delay(b, a)


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
    import re

    problems = []
    if spec.preset is not None and spec.preset not in REGION_PRESETS:
        return [f"regions.preset: unknown preset {spec.preset!r}; known: {', '.join(sorted(REGION_PRESETS))}"]
    names = set(spec.delays) | {b for row in spec.delays.values() for b in row}
    for name in sorted(names | set(used)):
        if not re.match(REGION_PATTERN, name):
            problems.append(f"regions: invalid region name {name!r}: 1-32 lower-case letters, digits and '-', "
                            "starting with a letter")
    for a, row in spec.delays.items():
        if a in row:
            problems.append(f"regions.delays.{a}.{a}: a region's delay to itself is regions.intra, not a pair")
    table, _ = _table(spec)
    if spec.symmetric:
        for a, row in spec.delays.items():
            for b, d in row.items():
                back = spec.delays.get(b, {}).get(a)
                if back is not None and back != d and a < b:
                    problems.append(f"regions.delays: {a} -> {b} is {format_duration(d)} but {b} -> {a} is "
                                    f"{format_duration(back)}; set regions.symmetric: false for asymmetric delays, "
                                    "or give one direction")
    regions = sorted(used)
    for i, a in enumerate(regions):
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
    return RegionMatrix(intra_s=spec.intra, one_way=one_way, source=source)


def pair_delays(regions: list[str | None], matrix: RegionMatrix | None) -> list[tuple[tuple[int, float], ...]]:
    """Per rank, the extra one-way delay of its uplink to every other rank, `((dest_rank, seconds), ...)`
    (zero entries left out). Nodes without a region, or no matrix, add nothing."""
    out = []
    for i, ri in enumerate(regions):
        row = []
        for j, rj in enumerate(regions):
            if i == j or matrix is None or ri is None or rj is None:
                continue
            d = matrix.delay(ri, rj)
            if d:
                row.append((j, d))
        out.append(tuple(row))
    return out
