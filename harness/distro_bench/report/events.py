"""Network events (issue 18) joined to the steps they disturbed: per change, the mean step time before,
during and after it, and the training time each optimizer lost to it.

Reads RUN/events.parquet (harness/distro_bench/results/events.py's contract) and metrics.parquet; writes nothing.

Definitions (docs/reports.md says the same for readers):

- A *change* is the marked rows (`MARKED_KINDS`) of one optimizer/seed run that were due together: the same
  kind and `scheduled_s` (a schedule step that changes rate and loss on four nodes is one change). Trace rows
  are not changes: they are drawn as a rate line and summarised per link.
- Its *during* window runs on the wall clock from when it took effect (the earliest `time`) to the end of
  its window (`until_s`, an outage's or straggler's) or, without one, to the next schedule or compute
  change on the same link or worker (node "*" is every node, direction "both" both; an outage without
  `until_s` ends at its restore), or to the run's last step. So a 1 Mbit window from 30 s to 60 s is one
  window even with an outage inside it (which has its own row; the optimizer's total counts it once).
- *before* is the same length just before it, cut where an earlier change took hold (its start, or the
  end of its `until_s` window when that ended before this change); *after* is the same length just after
  the window, cut at the next change that starts after the window ends (restores do not cut it: they are
  the return to normal it measures) and at the run's end.
- A window's *mean step time* is the seconds of steps inside it divided by the steps inside it, each step
  (slowest rank's `step_time_s`, from its earliest `t_start`) counted by the fraction of it inside the
  window: a 40 s step that straddles a 5 s outage counts 1/8 there. Step 0 (warm-up) is left out.
- *Pre-event pace*: that mean over the run's steps before its first change. *Time lost* to a change: its
  during window's step seconds minus what its steps would have taken at the pre-event pace; percent is
  that over the pace's time. Gaps between steps (evaluations) are not steps, so they are never counted.
  An optimizer's total is over the union of its changes' windows (overlaps counted once), restores left out
  (a restore ends its outage's window; its effect is that outage's *after*).
- Over several seeds, changes are matched by their order in the run and their label, and every figure is
  the mean over seeds with a 95% Student-t interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from distro_bench.report.analysis import per_step
from distro_bench.results import fair
from distro_bench.results.events import EVENTS_FILE, MARKED_KINDS, events_frame, read_events
from distro_bench.results.fair import evaluations, split_seeds, value_at
from distro_bench.results.runfiles import RunFileError
from distro_bench.results.stats import Interval, t_interval
from distro_bench.scenario.units import parse_rate

WINDOW_KINDS = ("schedule", "outage", "compute")  # changes that get an impact row (restores end windows)


# ---- typed results ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Change:
    """Marked event rows of one optimizer/seed run that were due together, on the wall clock (epoch s)."""

    optimizer: str
    seed: int | None
    index: int  # order among the run's changes (matches a change across seeds and optimizers)
    kind: str
    label: str  # "up 1Mbit", "outage 5s", "node2 compute 0.25x"
    start: float  # epoch seconds it took effect
    until: float | None  # epoch end of its own window (until_s), None when open-ended
    t_s: float  # seconds since the run's first step
    rows: int = 1
    targets: frozenset = frozenset()  # (node, direction) pairs it touched; ("node2", "compute") for a straggler

    def touches(self, other: Change) -> bool:
        """Whether the two changes touched one link (or one worker's speed): "*" is every node, "both" both
        directions."""
        def same(a, b) -> bool:
            (n1, d1), (n2, d2) = a, b
            node = n1 == n2 or "*" in (n1, n2)
            if "compute" in (d1, d2):
                return node and d1 == d2
            return node and (d1 == d2 or "both" in (d1, d2) or "" in (d1, d2))

        return any(same(a, b) for a in self.targets for b in other.targets)


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    steps: float  # fractional steps inside
    step_seconds: float  # seconds of steps inside

    @property
    def mean_step_s(self) -> float | None:
        return self.step_seconds / self.steps if self.steps > 1e-9 else None


@dataclass(frozen=True)
class Impact:
    """One change in one optimizer/seed run."""

    change: Change
    before: Window
    during: Window
    after: Window
    pace_s: float | None  # pre-event mean step time
    lost_s: float | None  # extra step seconds in `during` versus the pace
    lost_pct: float | None
    run_ended_inside: bool = False  # its own window (until_s) outlasted the run: a run a long outage ended


@dataclass(frozen=True)
class ImpactSummary:
    """One change for one optimizer, over its seeds."""

    optimizer: str
    index: int
    kind: str
    label: str
    at_s: float  # mean t_s
    seeds: int
    before: Interval | None
    during: Interval | None
    after: Interval | None
    lost: Interval | None
    lost_pct: Interval | None
    run_ended_inside: int = 0  # seeds whose run ended inside this change's window


@dataclass(frozen=True)
class OptimizerLoss:
    """What one optimizer lost to all its changes (union of their windows), over seeds."""

    optimizer: str
    changes: int
    lost: Interval | None
    lost_pct: Interval | None
    largest: ImpactSummary | None  # the change it lost most to


@dataclass
class EventsAnalysis:
    events: pd.DataFrame  # every row of events.parquet
    changes: list[Change] = field(default_factory=list)
    impacts: list[Impact] = field(default_factory=list)
    summaries: list[ImpactSummary] = field(default_factory=list)
    losses: list[OptimizerLoss] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be shown, and why

    @property
    def empty(self) -> bool:
        return not len(self.events)

    @property
    def marked(self) -> pd.DataFrame:
        return self.events[self.events["kind"].isin(MARKED_KINDS)]

    @property
    def trace(self) -> pd.DataFrame:
        return self.events[self.events["kind"] == "trace"]


# ---- labels ----------------------------------------------------------------------------------------------

def text_of(v) -> str:
    """A string cell; empty for null."""
    return "" if v is None or (not isinstance(v, str) and pd.isna(v)) else str(v)


def float_of(v) -> float | None:
    """A float; None for null or not a number."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _secs(v: float) -> str:
    return f"{v:.3g}s" if v < 100 else f"{v:.0f}s"


def row_label(r: pd.Series | dict) -> str:
    """A short label for one event row: "up 1Mbit", "up loss 5%", "outage 5s", "compute 0.25x", "restored"."""
    kind, fld = text_of(r.get("kind")), text_of(r.get("field"))
    req, direction = text_of(r.get("requested")), text_of(r.get("direction"))
    if kind == "outage":  # as the scenario wrote it; else the window it was due to last
        due, until = float_of(r.get("scheduled_s")), float_of(r.get("until_s"))
        if due is None:
            due = float_of(r.get("t_s"))
        dur = req or (_secs(until - due) if due is not None and until is not None else "")
        return f"outage {dur}".strip()
    if kind == "restore":
        return "restored"
    if kind == "compute" or fld == "compute_scale":
        return f"compute {req}x" if req and not req.endswith("x") else f"compute {req}".strip()
    what = req if fld in ("rate", "") else f"{fld} {req}"
    return " ".join(p for p in (direction if direction not in ("", "both") else "", what) if p)


def _group_label(rows: pd.DataFrame, with_node: bool) -> str:
    labels = list(dict.fromkeys(row_label(r) for _, r in rows.iterrows()))
    dirs = {text_of(d) for d in rows["direction"]}
    if len(labels) > 1 and len(dirs) == 1 and (d := dirs.pop()) and all(x.startswith(d + " ") for x in labels):
        labels = [labels[0]] + [x[len(d) + 1:] for x in labels[1:]]  # "up 2Mbit, loss 5%": the direction once
    text = ", ".join(labels)
    if not with_node:
        return text
    nodes = list(dict.fromkeys(text_of(n) for n in rows["node"]))
    if nodes == ["*"]:
        where = "all nodes"
    elif len(nodes) == 1:
        where = nodes[0]
    else:
        where = f"{len(nodes)} nodes"
    return f"{where} {text}" if where else text


# ---- steps on the wall clock -----------------------------------------------------------------------------

def step_spans(df: pd.DataFrame) -> pd.DataFrame:
    """One optimizer/seed's steps: step, start (earliest rank's t_start), dur (slowest rank's step_time_s),
    end, and `elapsed` (the training clock of the plots, harness/distro_bench/results/fair.py's) at the step's end."""
    g = df.groupby("step")
    out = pd.DataFrame({"start": g["t_start"].min(), "dur": g["step_time_s"].max()})
    out["end"] = out["start"] + out["dur"]
    out["elapsed"] = fair.curve(df).set_index("step")["elapsed_s"]
    return out.reset_index().sort_values("start").reset_index(drop=True)


def window(spans: pd.DataFrame, a: float, b: float) -> Window:
    """Steps inside [a, b) on the wall clock, each counted by its fraction inside; step 0 left out."""
    if b <= a or not len(spans):
        return Window(a, max(a, b), 0.0, 0.0)
    s = spans[spans["step"] > 0] if spans["step"].nunique() > 1 else spans
    overlap = (np.minimum(s["end"], b) - np.maximum(s["start"], a)).clip(lower=0.0)
    frac = np.where(s["dur"] > 0, overlap / s["dur"].where(s["dur"] > 0, 1.0), 0.0)
    return Window(a, b, float(frac.sum()), float(overlap.sum()))


def to_elapsed(spans: pd.DataFrame, times) -> np.ndarray:
    """Wall-clock epoch seconds -> the plots' training clock (seconds since the first step, evaluations left
    out): linear inside a step, flat across a gap between steps."""
    xs = np.column_stack([spans["start"], spans["end"]]).ravel()
    ys = np.column_stack([spans["elapsed"] - spans["dur"], spans["elapsed"]]).ravel()
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], np.maximum.accumulate(ys[order])
    t = np.asarray(times, dtype=float)
    # Before the first step: the training clock runs with the wall clock (negative), after the last likewise.
    inside = np.interp(t, xs, ys)
    return np.where(t < xs[0], ys[0] - (xs[0] - t), np.where(t > xs[-1], ys[-1] + (t - xs[-1]), inside))


# ---- the analysis ----------------------------------------------------------------------------------------

def _seed_of(v) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def _run_events(events: pd.DataFrame, optimizer: str, seed: int | None, nseeds: int) -> pd.DataFrame:
    e = events[events["optimizer"] == optimizer]
    if nseeds == 1:  # one seed: every row of the optimizer (rows written without a seed included)
        return e if seed is None else e[e["seed"].isna() | (e["seed"] == seed)]
    return e[e["seed"] == seed]


def _changes(ev: pd.DataFrame, optimizer: str, seed: int | None, first_start: float, with_node: bool) -> list[Change]:
    m = ev[ev["kind"].isin(MARKED_KINDS)].copy()
    if not len(m):
        return []
    # Epoch time; a row without one (not read back) is placed by its run clock.
    m["at"] = m["time"].where(m["time"].notna(), first_start + m["t_s"])
    m = m[m["at"].notna()]
    m["due"] = m["scheduled_s"].where(m["scheduled_s"].notna(), m["t_s"]).round(3)
    m["win_end"] = m["at"] + (m["until_s"] - m["t_s"])
    groups = [g for _, g in m.groupby(["kind", "due"], sort=False, dropna=False)]
    groups.sort(key=lambda g: float(g["at"].min()))
    out = []
    for i, g in enumerate(groups):
        ends = g["win_end"].dropna()
        t_s = g["t_s"].dropna()
        out.append(Change(optimizer=optimizer, seed=seed, index=i, kind=str(g["kind"].iloc[0]),
                          # a straggler is one node's: always name it
                          label=_group_label(g, with_node or (g["kind"] == "compute").all()),
                          start=float(g["at"].min()),
                          until=float(ends.max()) if len(ends) else None,
                          t_s=float(t_s.min()) if len(t_s) else float(g["at"].min() - first_start), rows=len(g),
                          targets=frozenset((text_of(r["node"]) or "*",
                                             "compute" if r["kind"] == "compute" else text_of(r["direction"]))
                                            for _, r in g.iterrows())))
    return out


def _impacts(spans: pd.DataFrame, changes: list[Change]) -> list[Impact]:
    run_start, run_end = float(spans["start"].min()), float(spans["end"].max())
    first = min(c.start for c in changes)
    pace = window(spans, run_start, first).mean_step_s
    out = []
    for i, c in enumerate(changes):
        # Open-ended: until the same link (or worker) changes state again; an outage without until_s, until
        # anything on it changes (its restore).
        ends = ("restore", "schedule", "compute") if c.kind == "outage" else ("schedule", "compute")
        later = [d.start for d in changes[i + 1:] if d.start > c.start and d.kind in ends and d.touches(c)]
        end = c.until if c.until is not None else (min(later) if later else run_end)
        end = max(end, c.start)
        length = end - c.start
        # An earlier change holds from its start, or is over at its window's end when that came first.
        bound = max([run_start] + [(d.until if d.until is not None and d.until <= c.start else d.start)
                                   for d in changes[:i]])
        # A restore is the return to normal, which is what *after* measures: it does not cut it.
        nxt = min([d.start for d in changes if d.start > end and d.kind != "restore"] + [run_end])
        before = window(spans, max(c.start - length, bound), c.start)
        during = window(spans, c.start, end)
        after = window(spans, end, min(end + length, nxt))
        lost = pct = None
        if pace is not None and c.start < run_end:
            lost = during.step_seconds - during.steps * pace
            pct = 100.0 * lost / (during.steps * pace) if during.steps * pace > 0 else None
        out.append(Impact(c, before, during, after, pace, lost, pct,
                          run_ended_inside=c.until is not None and c.start < run_end < c.until))
    return out


def _union_lost(spans: pd.DataFrame, impacts: list[Impact]) -> tuple[float | None, float | None]:
    """Lost seconds and percent over the union of the windows of `impacts` (overlaps counted once)."""
    if not impacts or impacts[0].pace_s is None:
        return None, None
    pace = impacts[0].pace_s
    spans_ = sorted((i.during.start, i.during.end) for i in impacts)
    merged: list[list[float]] = []
    for a, b in spans_:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    ws = [window(spans, a, b) for a, b in merged]
    secs, steps = sum(w.step_seconds for w in ws), sum(w.steps for w in ws)
    lost = secs - steps * pace
    return lost, (100.0 * lost / (steps * pace) if steps * pace > 0 else None)


def analyze(events: pd.DataFrame, metrics: pd.DataFrame, optimizers: list[str] | None = None) -> EventsAnalysis:
    """Events joined to steps: changes, their per-run impact, and per optimizer the means over seeds."""
    result = EventsAnalysis(events=events)
    if events.empty or metrics.empty:
        return result
    marked = events[events["kind"].isin(MARKED_KINDS)]
    with_node = marked["node"].nunique(dropna=True) > 1  # name the node only where it tells changes apart
    names = optimizers or [str(o) for o in metrics["optimizer"].unique()]
    union: dict[str, list[tuple[float | None, float | None]]] = {}
    for name in names:
        rows = metrics[metrics["optimizer"] == name]
        if not len(rows):
            continue
        seeds = split_seeds(rows)
        for seed, seed_rows in seeds:
            spans = step_spans(seed_rows)
            ev = _run_events(events, name, seed, len(seeds))
            changes = _changes(ev, name, seed, float(spans["start"].min()), with_node)
            if not changes:
                continue
            result.changes += changes
            imps = _impacts(spans, changes)
            result.impacts += imps
            union.setdefault(name, []).append(_union_lost(spans, [i for i in imps if i.change.kind in WINDOW_KINDS]))
    result.summaries = _summarise(result.impacts)
    for name in names:
        if name not in union:
            continue
        mine = [s for s in result.summaries if s.optimizer == name]
        largest = max((s for s in mine if s.lost is not None), key=lambda s: s.lost.mean if s.lost is not None else -math.inf,
                      default=None)
        result.losses.append(OptimizerLoss(
            optimizer=name, changes=len(mine), lost=t_interval([u[0] for u in union[name]]),
            lost_pct=t_interval([u[1] for u in union[name]]), largest=largest))
    return result


def _summarise(impacts: list[Impact]) -> list[ImpactSummary]:
    groups: dict[tuple, list[Impact]] = {}
    for i in impacts:
        if i.change.kind in WINDOW_KINDS:
            groups.setdefault((i.change.optimizer, i.change.index, i.change.label), []).append(i)
    out = []
    for (opt, index, label), imps in groups.items():
        out.append(ImpactSummary(
            optimizer=opt, index=index, kind=imps[0].change.kind, label=label,
            at_s=float(np.mean([i.change.t_s for i in imps])), seeds=len(imps),
            before=t_interval([i.before.mean_step_s for i in imps]),
            during=t_interval([i.during.mean_step_s for i in imps]),
            after=t_interval([i.after.mean_step_s for i in imps]),
            lost=t_interval([i.lost_s for i in imps]), lost_pct=t_interval([i.lost_pct for i in imps]),
            run_ended_inside=sum(i.run_ended_inside for i in imps)))
    return out


def analyze_run(run) -> EventsAnalysis:
    """`analyze` for a loaded run folder (distro_bench.report.load.LoadedRun); a damaged events.parquet gives an
    empty analysis with a note (the rest of the report still stands)."""
    try:
        events = read_events(run.data.path)
    except (OSError, ValueError, RunFileError) as e:  # pyarrow's errors are ValueError / OSError subclasses
        return EventsAnalysis(events=events_frame([]), notes=[(f"{EVENTS_FILE} could not be read ({type(e).__name__}: "
                                                               f"{e}); network events are not shown.")])
    return analyze(events, run.data.metrics, run.optimizers)


# ---- what the plots draw ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Mark:
    """A change on one optimizer's training clock (mean over seeds): a line at x0, or a span x0..x1."""

    label: str
    kind: str
    x0: float
    x1: float | None  # end of an until_s window; None: a line


def marks(analysis: EventsAnalysis, metrics: pd.DataFrame) -> dict[str, list[Mark]]:
    """Per optimizer, its changes placed on the plots' x axis (training seconds since its first step)."""
    found: dict[tuple, list[tuple[float, float | None]]] = {}
    cache: dict[tuple, pd.DataFrame] = {}
    for c in analysis.changes:
        key = (c.optimizer, c.seed)
        if key not in cache:
            rows = metrics[metrics["optimizer"] == c.optimizer]
            if c.seed is not None and rows["seed"].notna().any():
                rows = rows[rows["seed"] == c.seed]
            cache[key] = step_spans(rows)
        x0 = float(to_elapsed(cache[key], [c.start])[0])
        x1 = float(to_elapsed(cache[key], [c.until])[0]) if c.until is not None else None
        found.setdefault((c.optimizer, c.index, c.label, c.kind), []).append((x0, x1))
    out: dict[str, list[Mark]] = {}
    for (opt, _, label, kind), xs in sorted(found.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        x1s = [x[1] for x in xs if x[1] is not None]
        out.setdefault(opt, []).append(Mark(label, kind, float(np.mean([x[0] for x in xs])),
                                            float(np.mean(x1s)) if x1s else None))
    return out


def trace_rates(analysis: EventsAnalysis, metrics: pd.DataFrame, optimizer: str) -> dict[str, pd.DataFrame]:
    """"node up" -> frame (x on the training clock, rate bit/s) of one optimizer's first seed's trace rows."""
    t = analysis.trace
    t = t[t["optimizer"] == optimizer]
    if not len(t):
        return {}
    seed = _seed_of(t["seed"].dropna().min()) if t["seed"].notna().any() else None
    if seed is not None:
        t = t[t["seed"] == seed]
    rows = metrics[metrics["optimizer"] == optimizer]
    if seed is not None and rows["seed"].notna().any():
        rows = rows[rows["seed"] == seed]
    if not len(rows):
        return {}
    spans = step_spans(rows)

    def rate(r) -> float | None:
        for v in (r["verified"], r["requested"]):
            try:
                return float(parse_rate(text_of(v)))
            except ValueError:
                continue
        return None

    out = {}
    for (node, direction), g in t.groupby(["node", "direction"], sort=True, dropna=False):
        g = g.sort_values("time")
        at = g["time"].where(g["time"].notna(), float(spans["start"].min()) + g["t_s"])
        frame = pd.DataFrame({"x": to_elapsed(spans, at), "rate": [rate(r) for _, r in g.iterrows()]}).dropna()
        if len(frame):
            out[f"{text_of(node)} {text_of(direction)}".strip()] = frame
    return out


# ---- against a run without events (a comparison of run folders) ---------------------------------------------

@dataclass(frozen=True)
class AgainstUnchanged:
    """One optimizer in a run with network events against the same optimizer in a run without them
    (each run's curve the mean over its seeds)."""

    optimizer: str
    steps: int  # steps both runs made
    extra_s: float  # training seconds the eventful run needed more for those steps
    extra_pct: float | None
    at_s: float | None  # equal training time: the earlier of the two runs' last evaluations
    val_with: float | None  # validation loss there (interpolated between evaluations), with the events
    val_without: float | None


def against_unchanged(with_events: pd.DataFrame, without: pd.DataFrame, optimizers: list[str]) -> list[AgainstUnchanged]:
    """Per optimizer both metrics frames have: the time the events cost at equal steps and the validation
    loss at equal time."""
    out = []
    for name in optimizers:
        a = per_step(with_events[with_events["optimizer"] == name])
        b = per_step(without[without["optimizer"] == name])
        if not len(a) or not len(b):
            continue
        steps = int(min(a["step"].max(), b["step"].max()))
        ta = float(a.loc[a["step"] == steps, "elapsed_s"].iloc[0])
        tb = float(b.loc[b["step"] == steps, "elapsed_s"].iloc[0])
        ends = [evaluations(c)["elapsed_s"].max() for c in (a, b)]  # the last evaluation of each
        at = float(min(ends)) if all(pd.notna(e) for e in ends) else None
        out.append(AgainstUnchanged(name, steps + 1, ta - tb, 100 * (ta - tb) / tb if tb > 0 else None, at,
                                    value_at(a, "elapsed_s", at) if at is not None else None,
                                    value_at(b, "elapsed_s", at) if at is not None else None))
    return out
