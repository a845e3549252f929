"""Published operating points: figures from papers and reports, the scenario that sets each one up, and what
the projection model (harness/distro_bench/train/projection.py) makes of it.

The figures live in a sidecar, distro_bench/data/published/points.yaml (value, unit, source and its words, the
point's `basis`, what the figure measures, why ours differs where it does), shipped as package data beside the
scenarios it names, because the scenario schema forbids unknown keys. Each scenario's settings carry a comment
citing their source. A figure we could not find in any source we could read is recorded with `confirmed: false`;
one whose inputs are unpublished has no `measure`, and the table says why instead of showing a number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from distro_bench.errors import InputError
from distro_bench.scenario.loading import load_scenario
from distro_bench.train.optim import STRATEGIES
from distro_bench.train.projection import (
    DEFAULT_ROUND_OVERHEAD_S,
    analytic_shapes,
    nodes_like,
    paper_accounting,
    project,
)

# Package data, so `pip install .` (not only an editable install) finds it.
POINTS_FILE = Path(str(resources.files("distro_bench") / "data" / "published" / "points.yaml"))
TOLERANCE = 0.15  # bytes and ratios: ours within 15% of the published figure
TIME_BAND = (0.75, 1.33)  # times and fractions: issue 34's band, ours / published
REPLAYED_NOT_RUN = "not run"  # the replay column until replay mode (issue 34 item 1) fills it


class PublishedPoint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    figure: str  # what the source states, in words
    published: float | None  # None where no figure could be confirmed
    unit: Literal["bytes", "ratio", "seconds", "fraction"]
    source: str  # paper, section / table
    quote: str = ""  # the source's words for the figure
    # definitional: reproduced by construction (`own` gives our own accounting beside it); input: taken from the
    # source, not projected; independent: ours comes from the model, not from the figure
    basis: Literal["definitional", "input", "independent"]
    own: str | None = None  # a name in OWN: our own accounting of the same quantity, shown beside the figure
    confirmed: bool = True  # False: the figure was not found in the sources we could read
    scenario: str | None = None  # file beside points.yaml
    measure: str | None = None  # a name in MEASURES; None where the inputs are not published
    optimizer: str | None = None
    baseline: str | None = None
    workers: int | None = Field(default=None, ge=1)
    n_kv_heads: int | None = Field(default=None, ge=1)  # grouped-query attention (not in the scenario schema)
    mfu: float = Field(default=0.4, gt=0, le=1)
    # the system's own collective layout and per-round software cost, where they are not ours (projection.py)
    layout: Literal["ring", "int8_ring", "via_store"] = "ring"
    round_overhead_s: float = Field(default=DEFAULT_ROUND_OVERHEAD_S, ge=0)
    why: str = ""  # the gap explained, or why there is no number

    @property
    def band(self) -> tuple[float, float]:
        """The (low, high) of ours / published that counts as reproduced."""
        return TIME_BAND if self.unit in ("seconds", "fraction") else (1 - TOLERANCE, 1 + TOLERANCE)


@dataclass(frozen=True)
class PointResult:
    point: PublishedPoint
    ours: float | None  # the projection's figure (None: not projected)
    own: float | None = None  # our own accounting of the same quantity (definitional rows)
    replayed: float | None = None  # replay mode's measurement (None: not run)

    @property
    def ratio(self) -> float | None:
        if self.ours is None or not self.point.published:
            return None
        return self.ours / self.point.published

    @property
    def within(self) -> bool | None:
        r = self.ratio
        if r is None:
            return None
        lo, hi = self.point.band
        return lo <= r <= hi


@dataclass(frozen=True)
class _Context:
    """One point's projections, by run name, and what each needs beside them."""

    projections: dict  # run name -> projection.Projection (the point's layout and per-round cost)
    kinds: dict[str, str]  # run name -> strategy type
    period_steps: dict[str, int]  # run name -> steps per synchronisation
    ours: dict  # run name -> projection.Projection as this harness runs it (our layout), for OWN


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
    # seconds per step: compute (datasheet TFLOPS x MFU) + communication over the point's links
    "step_s": lambda c, p: _step(c, _named(p.optimizer)),
    # baseline seconds per step / this method's
    "step_ratio": lambda c, p: _step(c, _named(p.baseline)) / _step(c, _named(p.optimizer)),
}


def _step(ctx: _Context, name: str) -> float:
    step = ctx.projections[name].step_s
    if step is None:
        raise InputError(f"published point: the hardware of {name!r} has no `tflops`, so no step time")
    return step


def _txrx(p) -> float:
    return p.wire_tx_bytes + p.wire_rx_bytes


# Our own accounting of a definitional row's quantity, as this harness reports it for its own implementation
# (summary.json: bytes sent + received per worker per step; ring wire bytes; our layout).
OWN: dict[str, Callable[[_Context, PublishedPoint], float]] = {
    "payload_tx_rx": lambda c, p: c.ours[p.optimizer].payload_tx_bytes + c.ours[p.optimizer].payload_rx_bytes,
    "payload_ratio": lambda c, p: ((c.ours[p.baseline].payload_tx_bytes + c.ours[p.baseline].payload_rx_bytes)
                                   / (c.ours[p.optimizer].payload_tx_bytes + c.ours[p.optimizer].payload_rx_bytes)),
    "txrx_reduction": lambda c, p: _txrx(c.ours[p.baseline]) / _txrx(c.ours[p.optimizer]),
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
        if point.own is not None and point.own not in OWN:
            raise InputError(f"{path}: points[{i}].own: {point.own!r} is not one of {', '.join(OWN)}")
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

    def run(layout: str, overhead: float) -> dict:
        return {p.optimizer: p for p in project(s, nodes=nodes, shapes=shapes, mfu=point.mfu, optimizers=names,
                                                 layout=layout, round_overhead_s=overhead)}

    cfgs = s.optimizer_configs()
    ctx = _Context(run(point.layout, point.round_overhead_s), {n: cfgs[n].type for n in names},
                   {n: STRATEGIES[cfgs[n].type].predict_period(cfgs[n], shapes, len(nodes)).steps for n in names},
                   run("ring", DEFAULT_ROUND_OVERHEAD_S))
    own = OWN[point.own](ctx, point) if point.own else None
    return PointResult(point, MEASURES[point.measure](ctx, point), own=own)


def evaluate_all(path: Path = POINTS_FILE) -> list[PointResult]:
    return [evaluate(p, Path(path).parent) for p in load_points(path)]


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "bytes":
        return f"{value / 1e9:.1f} GB" if value >= 1e9 else f"{value / 1e6:.1f} MB"
    if unit == "ratio":
        return f"{value:.2f}x" if value < 10 else f"{value:.0f}x"
    if unit == "fraction":
        return f"{value:.1%}"
    return f"{value:.2f} s" if value < 10 else f"{value:.0f} s"


COLUMNS = ["published figure", "source", "published", "projected", "replayed", "ratio", "within band?", "basis",
           "why"]


def table_rows(results: list[PointResult]) -> list[list[str]]:
    """The published-points table, one row per point, as strings (COLUMNS). A definitional row shows our own
    accounting of the same quantity beside the projected figure."""
    rows = []
    for r in results:
        p = r.point
        figure = p.figure + ("" if p.confirmed else " (not confirmed)")
        within = {True: "yes", False: "no", None: "n/a"}[r.within]
        projected = _fmt(r.ours, p.unit)
        if r.own is not None:
            projected += f" (ours, {OWN_WORDS[p.own or '']}: {_fmt(r.own, p.unit)})"
        band = "15%" if p.band[0] == 1 - TOLERANCE else f"[{p.band[0]:g}, {p.band[1]:g}]"
        rows.append([figure, p.source, _fmt(p.published, p.unit), projected,
                     REPLAYED_NOT_RUN if r.replayed is None else _fmt(r.replayed, p.unit),
                     "-" if r.ratio is None else f"{r.ratio:.2f}",
                     within if r.within is None else f"{within} ({band})", p.basis,
                     "" if r.within else p.why])
    return rows


OWN_WORDS = {"payload_tx_rx": "sent + received", "payload_ratio": "sent + received",
             "txrx_reduction": "wire sent + received"}


def as_records(results: list[PointResult]) -> list[dict]:
    """`project --published --json`: one record per point (numbers as numbers)."""
    out = []
    for r in results:
        p = r.point
        lo, hi = p.band
        out.append({"id": p.id, "figure": p.figure, "published": p.published, "unit": p.unit, "source": p.source,
                    "quote": p.quote, "confirmed": p.confirmed, "basis": p.basis, "projected": r.ours,
                    "ours": r.ours, "own": r.own, "own_accounting": p.own, "replayed": r.replayed,
                    "ratio": r.ratio, "band": [lo, hi], "within_band": r.within,
                    "within_15pct": None if r.ratio is None else abs(r.ratio - 1) <= TOLERANCE, "why": p.why})
    return out


def markdown_table(results: list[PointResult]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in table_rows(results)]
    return "\n".join(lines)
