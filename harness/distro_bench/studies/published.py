"""Published operating points: figures from papers and reports, the scenario that sets each one up, and what
the projection model (harness/distro_bench/train/projection.py) makes of it.

The figures live in a sidecar, distro_bench/data/published/points.yaml (value, unit, source and its words, the
point's `basis`, what the figure measures, why ours differs where it does), shipped as package data beside the
scenarios it names, because the scenario schema forbids unknown keys. Each scenario's settings carry a comment
citing their source. A figure we could not find in any source we could read is recorded with `confirmed: false`;
one whose inputs are unpublished has no `measure`, and the table says why instead of showing a number.

Every point quotes its source verbatim (`quote`), says where (`place`: table, page, section) and in which
document (`document`: URL and version or commit), and names a stored short excerpt of the source's text
(data/published/excerpts/); loading fails where a quote is not in its excerpt (whitespace aside). A point without
an excerpt (its source could not be read here) is `unverified` and counted apart (`counts`).

Time rows take their settings from the dated time model (studies/time_model.py); a row that uses a setting
chosen after its figure was seen is `calibrated`, not `independent`, and every time row shows its figure with
each of its settings moved -25% and +25% (`sensitivity`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from distro_bench.errors import InputError
from distro_bench.results.rundir import predicted_optimizers, read_scenario, read_summary
from distro_bench.scenario.loading import load_scenario
from distro_bench.scenario.model import LinkSpec
from distro_bench.studies.time_model import (
    TIME_MODEL_FILE,
    OptimizerCompute,
    Setting,
    TimeModel,
    load_optimizer_compute,
    load_time_model,
    perturbed,
)
from distro_bench.train.optim import get_strategy
from distro_bench.train.projection import (
    DEFAULT_ROUND_OVERHEAD_S,
    analytic_shapes,
    nodes_like,
    paper_accounting,
    project,
)

# Package data, so `pip install .` (not only an editable install) finds it.
POINTS_FILE = Path(str(resources.files("distro_bench") / "data" / "published" / "points.yaml"))
EXCERPTS = "excerpts"  # folder beside points.yaml: short excerpts of the sources' own text
TOLERANCE = 0.15  # bytes and ratios: ours within 15% of the published figure
TIME_BAND = (0.75, 1.33)  # times and fractions: issue 34's band, ours / published
REPLAYED_NOT_RUN = "not run"  # the replay column where no replay run of the point was given


class PublishedPoint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    figure: str  # what the source states, in words
    published: float | None  # None where no figure could be confirmed
    unit: Literal["bytes", "ratio", "seconds", "fraction", "loss"]
    source: str  # paper, section / table
    # the source's words for the figure, verbatim (several where the figure is derived from more than one place)
    quote: str | list[str] = ""
    place: str = ""  # where in the document: table, page, section
    document: str = ""  # which document: URL, and version or commit
    # file(s) in excerpts/ holding the source's text the quotes are checked against
    excerpt: str | list[str] | None = None
    derivation: str = ""  # how `published` follows from the quoted words, where it is not one of them
    # definitional: reproduced by construction (`own` gives our own accounting beside it); input: taken from the
    # source, not projected; independent: ours comes from the model, not from the figure (shown `calibrated`
    # where the time model says one of its settings was chosen after the figure was seen)
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
    # the name of the replay scenario (scenarios/published/*-replay.yaml) whose run measures this point's quantity
    replay: str | None = None

    @property
    def band(self) -> tuple[float, float]:
        """The (low, high) of ours / published that counts as reproduced."""
        return TIME_BAND if self.unit in ("seconds", "fraction") else (1 - TOLERANCE, 1 + TOLERANCE)

    @property
    def quotes(self) -> list[str]:
        return [q for q in ([self.quote] if isinstance(self.quote, str) else self.quote) if q]

    @property
    def excerpts(self) -> list[str]:
        return [self.excerpt] if isinstance(self.excerpt, str) else list(self.excerpt or [])

    @property
    def quote_check(self) -> Literal["verified", "unverified"]:
        """verified: every quote was found in the stored excerpt (load_points refuses one that is not);
        unverified: no excerpt of the source could be stored (its text could not be read here)."""
        return "verified" if self.excerpt and self.quotes else "unverified"


def _words(text: str) -> str:
    """Text with every run of white space made one space: a PDF's table columns and a line break inside a
    sentence are not part of the quoted words."""
    return " ".join(text.split())


def excerpt_text(path: Path) -> str:
    """An excerpt file's text without its header (lines starting with #: which document, where, how read)."""
    return "\n".join(line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#"))


def quote_problem(point: PublishedPoint, base: Path) -> str | None:
    """Why the point's quotes are not all found verbatim in its excerpt (None: they are, or it names none)."""
    if not point.excerpts:
        return None
    texts = []
    for name in point.excerpts:
        path = base / EXCERPTS / name
        try:
            texts.append(_words(excerpt_text(path)))
        except OSError as e:
            return f"excerpt: cannot read {path}: {e}"
    if not point.quotes:
        return f"excerpt: {', '.join(point.excerpts)} named but the point quotes nothing"
    missing = [q for q in point.quotes if not any(_words(q) in text for text in texts)]
    return f"quote: {missing[0]!r} is not in excerpts/{', '.join(point.excerpts)}" if missing else None


@dataclass(frozen=True)
class PointResult:
    point: PublishedPoint
    ours: float | None  # the projection's figure (None: not projected)
    own: float | None = None  # our own accounting of the same quantity (definitional rows)
    replayed: float | None = None  # replay mode's measurement (None: not run, or not comparable: see replay_note)
    replay_note: str = ""  # where and how it was replayed (workers, links, the model's figure for them)
    calibrated_by: tuple[str, ...] = ()  # time-model settings chosen after this row's figure was seen
    settings: tuple[tuple[str, object], ...] = ()  # the time model's settings this row used (name, value)
    optimizer_compute_s: tuple[tuple[str, float], ...] = ()  # measured optimizer compute in the step (name, s)
    sensitivity: tuple[dict, ...] = ()  # the row's figure with each setting moved (evaluate_all)

    @property
    def basis(self) -> str:
        """The point's basis, `calibrated` where an independent row used a setting chosen after its figure."""
        return "calibrated" if self.calibrated_by and self.point.basis == "independent" else self.point.basis

    @property
    def ratio(self) -> float | None:
        if self.ours is None or not self.point.published:
            return None
        return self.ours / self.point.published

    @property
    def within(self) -> bool | None:
        r = self.ratio
        if r is None or self.ours is None or self.point.published is None:
            return None
        lo, hi = self.point.band
        if self.point.measure in ORDERED and (self.ours - 1) * (self.point.published - 1) <= 0:
            return False  # a faster/slower ratio on the wrong side of 1 says the wrong method wins
        return lo <= r <= hi


@dataclass(frozen=True)
class _Context:
    """One point's projections, by run name, and what each needs beside them."""

    projections: dict  # run name -> projection.Projection (the point's layout and per-round cost)
    kinds: dict[str, str]  # run name -> strategy type
    period_steps: dict[str, int]  # run name -> steps per synchronisation
    ours: dict  # run name -> projection.Projection as this harness runs it (our layout), for OWN


# Ratios whose side of 1 is the claim (which method is faster): on the wrong side they are outside the band.
ORDERED = {"step_ratio"}


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


@dataclass(frozen=True)
class ReplayRun:
    """A replay's run folder (issue 34, docs/replay.md) as `project --published --replayed` reads it."""

    path: Path
    scenario: str
    workers: int
    links: str  # the replay's links, in words
    optimizers: dict[str, dict]  # summary.json's per optimizer
    predicted_step_s: dict[str, float | None]  # the projection for the replay's own links (prediction.json)

    def fraction(self, name: str) -> float:
        return float(((self.optimizers.get(name) or {}).get("replay") or {}).get("fraction") or 1.0)

    def step_s(self, name: str) -> float | None:
        return (self.optimizers.get(name) or {}).get("step_time_s_mean")


def load_replay(path: Path) -> ReplayRun:
    """A replay run folder; InputError where it is not one (no summary, or a training run)."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"--replayed {path}: not a run folder (no such directory)")
    # summary.json, scenario.yaml and prediction.json are all it reads (benchmarks/replays/ keeps just those)
    summary, scenario = read_summary(path), read_scenario(path)
    if summary is None or scenario is None:
        raise InputError(f"--replayed {path}: not a finished run folder (summary.json or scenario.yaml is missing)")
    run = summary.get("run") or {}
    if run.get("mode") != "replay":
        raise InputError(f"--replayed {path}: a training run, not a replay (its summary's run.mode is "
                         f"{run.get('mode')!r}); replay one with scenarios/published/*-replay.yaml")
    links = sorted({f"{v.get('up', '?')} up, {v.get('down', '?')} down" for v in (scenario.get("links") or {}).values()
                    if isinstance(v, dict)})
    return ReplayRun(path=path, scenario=str(run.get("scenario")), workers=int(run.get("world_size") or 0),
                     links="; ".join(links) or "unshaped links", optimizers=dict(summary.get("optimizers") or {}),
                     predicted_step_s={k: v.get("step_s") for k, v in predicted_optimizers(path).items()})


def _replayed_step(r: ReplayRun, name: str) -> tuple[float | None, str]:
    step, model = r.step_s(name), r.predicted_step_s.get(name)
    where = f"{r.workers} workers on {r.links}; the model for those links: {_fmt(model, 'seconds')}"
    if r.fraction(name) < 1:
        return None, f"{r.fraction(name):g} of {name}'s bytes replayed: {_fmt(step, 'seconds')} a step ({where})"
    return step, where


def _replayed_ratio(r: ReplayRun, p: PublishedPoint) -> tuple[float | None, str]:
    (base, why_base), (mine, _) = _replayed_step(r, _named(p.baseline)), _replayed_step(r, _named(p.optimizer))
    if base is None or not mine:
        return None, why_base
    return base / mine, f"{r.workers} workers on {r.links}"


def _replayed_utilisation(r: ReplayRun, p: PublishedPoint) -> tuple[float | None, str]:
    value = ((r.optimizers.get(_named(p.optimizer)) or {}).get("replay") or {}).get("utilisation")
    return value, f"{r.workers} workers on {r.links}"


# What a replay measures of a point's quantity, and where: (figure or None where not comparable, words).
REPLAYED: dict[str, Callable[[ReplayRun, PublishedPoint], tuple[float | None, str]]] = {
    "step_s": lambda r, p: _replayed_step(r, _named(p.optimizer)),
    "step_ratio": _replayed_ratio,
    "compute_utilisation": _replayed_utilisation,
}


def replayed(point: PublishedPoint, replays: list[ReplayRun]) -> tuple[float | None, str]:
    """The point's figure from the first replay run of its replay scenario (None, "" where none was given)."""
    run = next((r for r in replays if point.replay and r.scenario == point.replay), None)
    if run is None or point.measure not in REPLAYED:
        return None, ""
    return REPLAYED[point.measure](run, point)


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
        problem = quote_problem(point, Path(path).parent)
        if problem:
            raise InputError(f"{path}: points[{i}] ({point.id}).{problem}")
        out.append(point)
    return out


@functools.cache
def _time_model(base: Path) -> TimeModel | None:
    """The dated time model beside the points file (None where a points file elsewhere has none)."""
    path = base / TIME_MODEL_FILE.name
    return load_time_model(path) if path.is_file() else None


_MEASURED: dict[tuple[Path, str], OptimizerCompute] = {}


def _optimizer_compute(base: Path, model: TimeModel) -> OptimizerCompute:
    key = (base, model.optimizer_compute)
    if key not in _MEASURED:
        _MEASURED[key] = load_optimizer_compute(model, base)
    return _MEASURED[key]


def _with_options(scenario, used: dict[str, Setting], values: dict[str, object]):
    """The scenario with every `option` setting put on each of its optimizers that has that option."""
    opts = {used[n].option: values[n] for n in used if used[n].kind == "option" and used[n].option}
    if not opts:
        return scenario
    optimizers = {name: cfg.model_copy(update={k: v for k, v in opts.items() if k in type(cfg).model_fields})
                  for name, cfg in scenario.optimizers.items()}
    return scenario.model_copy(update={"optimizers": optimizers})


def _with_links(nodes: list, used: dict[str, Setting], values: dict[str, object]) -> list:
    """The nodes with every link setting's rate (both ways, up or down) in place of the scenario's."""
    rates: dict[str, int] = {}
    for name, st in used.items():
        if st.kind in ("link", "link_up"):
            rates["up"] = int(float(values[name]))  # type: ignore[arg-type]
        if st.kind in ("link", "link_down"):
            rates["down"] = int(float(values[name]))  # type: ignore[arg-type]
    if not rates:
        return nodes
    return [n.model_copy(update={"link": (n.link or LinkSpec()).model_copy(update=rates)}) for n in nodes]


def evaluate(point: PublishedPoint, base: Path = POINTS_FILE.parent, replays: list[ReplayRun] | None = None,
             model: TimeModel | None = None, overrides: dict[str, object] | None = None) -> PointResult:
    """Our figure for one published point (None where the point has no measure), and a replay's where given.
    A time row takes its settings from the time model (`model`, default: the dated file beside the points),
    `overrides` replacing some of their values (its sensitivity)."""
    value, note = replayed(point, replays or [])
    if point.measure is None:
        return PointResult(point, None, replayed=value, replay_note=note)
    model = model if model is not None else _time_model(Path(base))
    used = model.for_row(point.id) if model else {}
    values: dict[str, object] = {name: st.value for name, st in used.items()} | (overrides or {})
    s = _with_options(load_scenario(base / _named(point.scenario)), used, values)
    shapes = analytic_shapes(s.resolved_model(), n_kv_heads=point.n_kv_heads)
    nodes = _with_links(nodes_like(s, point.workers or s.world_size), used, values)
    args: dict[str, object] = {"mfu": point.mfu, "round_overhead_s": point.round_overhead_s}
    args |= {used[n].option or n: values[n] for n in used if used[n].kind == "project"}
    names = [n for n in (point.optimizer, point.baseline) if n]
    cfgs = s.optimizer_configs()
    periods = {n: get_strategy(cfgs[n].type).predict_period(cfgs[n], shapes, len(nodes)).steps for n in names}
    compute: dict[str, float] = {}
    if model and point.id in model.optimizer_compute_rows:
        device = [n for n in used if used[n].kind == "device_bandwidth"]
        if not device:
            raise InputError(f"time model: row {point.id!r} includes optimizer compute but no device_bandwidth "
                             f"setting applies to it")
        measured = _optimizer_compute(Path(base), model)
        params = sum(math.prod(x) for x in shapes.values())
        codec = {used[n].option: str(values[n]) for n in used if used[n].kind == "codec"}
        for n in names:
            seconds = measured.seconds_per_step(codec.get(cfgs[n].type, cfgs[n].type), params, len(nodes), periods[n],
                                                float(values[device[0]]))  # type: ignore[arg-type]
            if seconds is not None:
                compute[n] = seconds

    def run(layout: str, overhead: float, extra: dict[str, float] | None) -> dict:
        return {p.optimizer: p for p in project(s, nodes=nodes, shapes=shapes, mfu=float(args["mfu"]),  # type: ignore[arg-type]
                                                 optimizers=names, layout=layout, round_overhead_s=overhead,
                                                 optimizer_compute_s=extra)}

    ctx = _Context(run(point.layout, float(args["round_overhead_s"]), compute),  # type: ignore[arg-type]
                   {n: cfgs[n].type for n in names}, periods, run("ring", DEFAULT_ROUND_OVERHEAD_S, None))
    own = OWN[point.own](ctx, point) if point.own else None
    return PointResult(point, MEASURES[point.measure](ctx, point), own=own, replayed=value, replay_note=note,
                       calibrated_by=tuple(model.calibrated(point.id)) if model else (),
                       settings=tuple((n, values[n]) for n in used),
                       optimizer_compute_s=tuple(sorted(compute.items())))


def sensitivity(result: PointResult, base: Path = POINTS_FILE.parent) -> tuple[dict, ...]:
    """The row's figure and its ratio to the published one with each of its time-model settings moved (-25%
    and +25% of a number; the alternative of a choice), one at a time."""
    model = _time_model(Path(base))
    if model is None or result.ours is None:
        return ()
    out = []
    for name, setting in model.for_row(result.point.id).items():
        for label, v in perturbed(setting):
            moved = evaluate(result.point, base, model=model, overrides={name: v})
            out.append({"setting": name, "assumed": setting.assumed, "at": label, "value": v, "ours": moved.ours,
                        "ratio": moved.ratio, "within_band": moved.within})
    return tuple(out)


def evaluate_all(path: Path = POINTS_FILE, replays: list[ReplayRun] | None = None) -> list[PointResult]:
    out = []
    for p in load_points(path):
        r = evaluate(p, Path(path).parent, replays)
        out.append(dataclasses.replace(r, sensitivity=sensitivity(r, Path(path).parent)))
    return out


def counts(results: list[PointResult]) -> dict[str, int]:
    """Quotes checked against their excerpt apart from those that could not be; and rows within their band by
    basis, independent apart from calibrated."""
    out = {"points": len(results),
           "quotes_verified": sum(r.point.quote_check == "verified" for r in results),
           "quotes_unverified": sum(r.point.quote_check == "unverified" for r in results)}
    for basis in ("independent", "calibrated", "definitional"):
        rows = [r for r in results if r.basis == basis and r.within is not None]
        out[f"{basis}_rows"] = len(rows)
        out[f"{basis}_within_band"] = sum(bool(r.within) for r in rows)
    return out


def counts_line(results: list[PointResult]) -> str:
    c = counts(results)
    return (f"{c['points']} points: quotes verified against the source's stored text {c['quotes_verified']}, "
            f"unverified {c['quotes_unverified']}; within band: independent {c['independent_within_band']} of "
            f"{c['independent_rows']}, calibrated {c['calibrated_within_band']} of {c['calibrated_rows']} "
            f"(settings chosen after the figure was seen: not evidence), definitional "
            f"{c['definitional_within_band']} of {c['definitional_rows']} (by construction)")


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "bytes":
        return f"{value / 1e9:.1f} GB" if value >= 1e9 else f"{value / 1e6:.1f} MB"
    if unit == "ratio":
        return f"{value:.3g}x" if value < 10 else f"{value:.0f}x"
    if unit == "fraction":
        return f"{value:.1%}"
    if unit == "loss":
        return f"{value:.3f}"
    return f"{value:.2f} s" if value < 10 else f"{value:.0f} s"


COLUMNS = ["published figure", "source", "quote", "published", "projected", "replayed", "ratio", "within band?",
           "basis", "why"]


def table_rows(results: list[PointResult]) -> list[list[str]]:
    """The published-points table, one row per point, as strings (COLUMNS). A definitional row shows our own
    accounting of the same quantity beside the projected figure; a row with measured optimizer compute says it."""
    rows = []
    for r in results:
        p = r.point
        figure = p.figure + ("" if p.confirmed else " (not confirmed)")
        within = {True: "yes", False: "no", None: "n/a"}[r.within]
        projected = _fmt(r.ours, p.unit)
        if r.own is not None:
            projected += f" (ours, {OWN_WORDS[p.own or '']}: {_fmt(r.own, p.unit)})"
        if r.optimizer_compute_s:
            projected += " (incl. optimizer compute " + ", ".join(f"{n} {s:.3f} s" for n, s in r.optimizer_compute_s) + ")"
        band = "15%" if p.band[0] == 1 - TOLERANCE else f"[{p.band[0]:g}, {p.band[1]:g}]"
        basis = r.basis + (f" ({', '.join(r.calibrated_by)})" if r.basis == "calibrated" else "")
        rows.append([figure, f"{p.source}, {p.place}" if p.place else p.source, p.quote_check,
                     _fmt(p.published, p.unit), projected,
                     _replayed_cell(r),
                     "-" if r.ratio is None else f"{r.ratio:.2f}",
                     within if r.within is None else f"{within} ({band})", basis,
                     "" if r.within else p.why])
    return rows


def _replayed_cell(r: PointResult) -> str:
    if r.replayed is None:
        return r.replay_note or REPLAYED_NOT_RUN
    return f"{_fmt(r.replayed, r.point.unit)} ({r.replay_note})" if r.replay_note else _fmt(r.replayed, r.point.unit)


OWN_WORDS = {"payload_tx_rx": "sent + received", "payload_ratio": "sent + received",
             "txrx_reduction": "wire sent + received"}


def _plain(v: object) -> object:
    return v if isinstance(v, bool | str) or v is None else float(v)  # type: ignore[arg-type]


def as_records(results: list[PointResult]) -> list[dict]:
    """`project --published --json`: one record per point (numbers as numbers)."""
    out = []
    for r in results:
        p = r.point
        lo, hi = p.band
        out.append({"id": p.id, "figure": p.figure, "published": p.published, "unit": p.unit, "source": p.source,
                    "quote": p.quote, "place": p.place, "document": p.document, "excerpt": p.excerpt,
                    "quote_check": p.quote_check, "derivation": p.derivation,
                    "confirmed": p.confirmed, "basis": r.basis, "declared_basis": p.basis,
                    "calibrated_by": list(r.calibrated_by), "projected": r.ours,
                    "ours": r.ours, "own": r.own, "own_accounting": p.own, "replayed": r.replayed, "replay_note": r.replay_note,
                    "ratio": r.ratio, "band": [lo, hi], "within_band": r.within,
                    "within_15pct": None if r.ratio is None else abs(r.ratio - 1) <= TOLERANCE,
                    "settings": {n: _plain(v) for n, v in r.settings},
                    "optimizer_compute_s": dict(r.optimizer_compute_s),
                    "sensitivity": [{**s, "value": _plain(s["value"])} for s in r.sensitivity], "why": p.why})
    return out


def markdown_table(results: list[PointResult]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in table_rows(results)]
    return "\n".join([*lines, "", counts_line(results)])


SENSITIVITY_COLUMNS = ["row", "setting", "value", "assumed?", "ratio at -25%", "ratio at +25% (or the alternative)"]


def sensitivity_rows(results: list[PointResult]) -> list[list[str]]:
    """One line per time row and setting: ours / published with the setting at -25% and +25% (a choice: at its
    alternative), beside the row's own ratio."""
    rows = []
    for r in results:
        by: dict[str, dict[str, dict]] = {}
        for s in r.sensitivity:
            by.setdefault(s["setting"], {})[s["at"]] = s
        for name, value in r.settings:
            at = by.get(name, {})
            rows.append([f"{r.point.id} ({r.ratio:.2f})" if r.ratio is not None else r.point.id, name,
                         _setting_fmt(value), "yes" if _setting_assumed(name) else "no",
                         _moved(at.get("-25%")), _moved(at.get("+25%") or at.get("alternative"))])
    return rows


def _moved(s: dict | None) -> str:
    return "-" if s is None or s["ratio"] is None else f"{s['ratio']:.2f} (at {_setting_fmt(s['value'])})"


def _setting_assumed(name: str) -> bool:
    model = _time_model(POINTS_FILE.parent)
    return bool(model and name in model.settings and model.settings[name].assumed)


def _setting_fmt(v: object) -> str:
    if isinstance(v, bool | str):
        return str(v).lower() if isinstance(v, bool) else v
    x = float(v)  # type: ignore[arg-type]
    return f"{x:.3g}"


def sensitivity_table(results: list[PointResult]) -> str:
    rows = sensitivity_rows(results)
    lines = ["| " + " | ".join(SENSITIVITY_COLUMNS) + " |", "|" + "---|" * len(SENSITIVITY_COLUMNS)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
