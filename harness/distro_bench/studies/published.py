"""Published operating points: figures from papers and reports, the scenario that sets each one up, and what
the projection model (harness/distro_bench/train/projection.py) makes of it.

The figures live in a sidecar, scenarios/published/points.yaml (value, unit, source, what the figure
measures, why ours differs where it does), because the scenario schema forbids unknown keys; each point
names a scenario file beside it whose settings carry a comment citing their source. A figure we could not
find in any source we could read is recorded with `confirmed: false`; one whose inputs are unpublished has
no `measure`, and the table says why instead of showing a number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from distro_bench.errors import InputError
from distro_bench.scenario.model import load_scenario
from distro_bench.train.optim import STRATEGIES
from distro_bench.train.projection import analytic_shapes, nodes_like, paper_accounting, project

POINTS_FILE = Path(__file__).resolve().parents[3] / "scenarios" / "published" / "points.yaml"
TOLERANCE = 0.15  # the bar: ours within 15% of the published figure


class PublishedPoint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    figure: str  # what the source states, in words
    published: float | None  # None where no figure could be confirmed
    unit: Literal["bytes", "ratio", "seconds", "fraction"]
    source: str  # paper, section / table
    confirmed: bool = True  # False: the figure was not found in the sources we could read
    scenario: str | None = None  # file in scenarios/published/
    measure: str | None = None  # a name in MEASURES; None where the inputs are not published
    optimizer: str | None = None
    baseline: str | None = None
    workers: int | None = Field(default=None, ge=1)
    n_kv_heads: int | None = Field(default=None, ge=1)  # grouped-query attention (not in the scenario schema)
    mfu: float = Field(default=0.4, gt=0, le=1)
    why: str = ""  # the gap explained, or why there is no number


@dataclass(frozen=True)
class PointResult:
    point: PublishedPoint
    ours: float | None

    @property
    def ratio(self) -> float | None:
        if self.ours is None or not self.point.published:
            return None
        return self.ours / self.point.published

    @property
    def within(self) -> bool | None:
        r = self.ratio
        return None if r is None else abs(r - 1) <= TOLERANCE


@dataclass(frozen=True)
class _Context:
    """One point's projections, by run name, and what each needs beside them."""

    projections: dict  # run name -> projection.Projection
    kinds: dict[str, str]  # run name -> strategy type
    period_steps: dict[str, int]  # run name -> steps per synchronisation


def _named(name: str | None) -> str:
    """The optimizer, baseline or scenario of a point with a measure (points.yaml gives them all there)."""
    if name is None:
        raise KeyError("a published point with a measure names its scenario, optimizer and baseline")
    return name


def _paper_bytes(ctx: _Context, name: str) -> float:
    return paper_accounting(ctx.projections[name], ctx.kinds[name])["paper_style"]


def _per_sync_tx(ctx: _Context, name: str) -> float:
    return ctx.projections[name].payload_tx_bytes * ctx.period_steps[name]


MEASURES: dict[str, Callable[[_Context, PublishedPoint], float]] = {
    # the DisTrO report's accounting: bytes received from the N-1 peers per step (the baseline as bf16)
    "paper_bytes": lambda c, p: _paper_bytes(c, _named(p.optimizer)),
    "paper_ratio": lambda c, p: _paper_bytes(c, _named(p.baseline)) / _paper_bytes(c, _named(p.optimizer)),
    # bytes each worker sends per step, baseline / this method (a sync every H steps counts as 1/H a step)
    "sent_reduction": lambda c, p: c.projections[p.baseline].payload_tx_bytes / c.projections[p.optimizer].payload_tx_bytes,
    # a dense fp32 copy of the parameters / what one worker sends per synchronisation
    "compression_vs_fp32": lambda c, p: 4 * c.projections[p.optimizer].params / _per_sync_tx(c, _named(p.optimizer)),
    # communication seconds of one synchronisation
    "comm_s_per_sync": lambda c, p: c.projections[p.optimizer].comm_s * c.period_steps[_named(p.optimizer)],
    # compute / (compute + communication) over a period
    "compute_utilisation": lambda c, p: c.projections[p.optimizer].compute_s / c.projections[p.optimizer].step_s,
}


def load_points(path: Path = POINTS_FILE) -> list[PublishedPoint]:
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"published points: cannot read {path}: {e}") from None
    out = []
    for i, item in enumerate((raw or {}).get("points", [])):
        try:
            point = PublishedPoint(**item)
        except (TypeError, ValidationError) as e:
            raise InputError(f"{path}: points[{i}]: {e}") from None
        if point.measure is not None and point.measure not in MEASURES:
            raise InputError(f"{path}: points[{i}].measure: {point.measure!r} is not one of {', '.join(MEASURES)}")
        out.append(point)
    return out


def evaluate(point: PublishedPoint, base: Path = POINTS_FILE.parent) -> PointResult:
    """Our figure for one published point (None where the point has no measure)."""
    if point.measure is None:
        return PointResult(point, None)
    s = load_scenario(base / _named(point.scenario))
    shapes = analytic_shapes(s.resolved_model(), n_kv_heads=point.n_kv_heads)
    nodes = nodes_like(s, point.workers or s.world_size)
    names = [n for n in (point.optimizer, point.baseline) if n]
    projections = {p.optimizer: p for p in project(s, nodes=nodes, shapes=shapes, mfu=point.mfu, optimizers=names)}
    cfgs = s.optimizer_configs()
    ctx = _Context(projections, {n: cfgs[n].type for n in names},
                   {n: STRATEGIES[cfgs[n].type].predict_period(cfgs[n], shapes, len(nodes)).steps for n in names})
    return PointResult(point, MEASURES[point.measure](ctx, point))


def evaluate_all(path: Path = POINTS_FILE) -> list[PointResult]:
    return [evaluate(p, Path(path).parent) for p in load_points(path)]


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "bytes":
        return f"{value / 1e9:.1f} GB" if value >= 1e9 else f"{value / 1e6:.1f} MB"
    if unit == "ratio":
        return f"{value:.0f}x"
    if unit == "fraction":
        return f"{value:.1%}"
    return f"{value:.0f} s"


COLUMNS = ["published figure", "source", "ours", "ratio", "within 15%?", "why not"]


def table_rows(results: list[PointResult]) -> list[list[str]]:
    """The published-points table, one row per point, as strings (COLUMNS)."""
    rows = []
    for r in results:
        p = r.point
        figure = f"{p.figure}: {_fmt(p.published, p.unit)}" + ("" if p.confirmed else " (not confirmed)")
        within = {True: "yes", False: "no", None: "n/a"}[r.within]
        rows.append([figure, p.source, _fmt(r.ours, p.unit), "-" if r.ratio is None else f"{r.ratio:.2f}",
                     within, "" if r.within else p.why])
    return rows


def markdown_table(results: list[PointResult]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in table_rows(results)]
    return "\n".join(lines)
