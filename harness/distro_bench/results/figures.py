"""One table of a run's figures: the keys of summary.json, each carrying its row (issue 50).

A row says, for one figure: its summary key, its label, unit and format, where it is computed from the step
records (a function here, or a reference to the one that does), how its seeds aggregate, how two methods compare
(a ratio or a difference, and which direction is better), and the gates that judge it. Everything that lists
figures iterates this table rather than naming them:

| reader | what it takes from a row |
|---|---|
| harness/distro_bench/results/metrics.py | `SUMMARY_KEYS` (the order of summary.json and summary.csv), seed aggregation, `compute` |
| harness/distro_bench/results/summary.py | `OptimizerSummary`'s fields (one per key, its type) |
| harness/distro_bench/report/check.py | the gates each figure carries (scenario/gates.py's rows) and how they pair |
| harness/distro_bench/report/verdict.py | the verdict block's rows: the figures with a `verdict`, compared as their rows say |
| harness/distro_bench/cli/report.py, api.py | `check`'s threshold flags and keywords: one per gate |
| harness/distro_bench/studies/sweep.py | `POINT_KEYS`: the rows marked `point` |
| scripts/gen_docs.py | docs/run-folder.md's table of summary keys |

Bytes are decided here once: `total_bytes` (tx + rx per worker per step, on one basis) and `reduction` (baseline
bytes over candidate bytes) with one basis rule, `reduction_basis`: wire bytes where BOTH sides of the comparison
measured them on every seed compared, else payload bytes. A ratio of a wire count over a payload count would
mix what the kernel counted with what the optimizer handed over; so each comparison picks the one basis both
sides have, and says which (`reduction_basis`).

Adding a figure: a row here (with its `compute` where the figure is one seed's, from its records and figures),
and a line in the docs (scripts/gen_docs.py regenerates the table). Import-light: no pandas, no pydantic.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from distro_bench.results.format import fmt_num, fmt_seconds, fmt_times
from distro_bench.scenario.gates import GATES, Gate

Aggregate = Literal["mean", "all", "min", "count", "same", "n"]


@dataclass(frozen=True)
class Figure:
    """One figure of one optimizer's summary: everything the harness needs to know about it, in one place."""

    key: str  # the summary key (summary.json, summary.csv's column, OptimizerSummary's attribute)
    label: str  # in words, for tables and docs
    unit: str  # "s", "bytes", "x", "nats", "steps", "tokens", "USD", "J", "h", "1" (a fraction or a count), "" (a label)
    fmt: str  # one value, as shown: a format spec ("{:.3f}")
    source: str  # where it is computed from the step records: this row's `compute`, or the function that does
    # How the seeds of one optimizer aggregate (results/metrics.py _aggregate): "mean" (with a 95% Student-t
    # interval in ci95), "all" (true when no seed says false), "min" (the earliest), "count" (seeds where true),
    # "same" (kept where the seeds agree), "n" (the number of seeds).
    seeds: Aggregate = "mean"
    # How two methods compare on it: "ratio" (baseline / candidate, or the reverse for better="higher") or
    # "difference" (candidate - baseline); None: not compared.
    compare: Literal["ratio", "difference"] | None = None
    better: Literal["lower", "higher"] | None = None
    kind: Any = float  # the type of one value in the summary model (int, float, bool, str; int | float)
    # a mean's interval cut to what is possible: (lowest, the key of this seed's highest or None) (issue 35)
    within: tuple[float, str | None] | None = None
    gates: tuple[Gate, ...] = ()  # the `check` gates that judge this figure (scenario/gates.py's rows)
    point: bool = False  # one of a sweep point's figures (studies/sweep.py POINT_KEYS)
    # one seed's value from its records and the figures computed before it (SeedRecords); None: `source` does it
    compute: Callable[[SeedRecords], Any] | None = None
    # a column of the summary table `run` and `node` print (cli/summary.py): (its place, its heading, its cell)
    column: tuple[int, str, Callable[[Any], str]] | None = None
    # a row of the verdict's block, this optimizer against the baseline (report/verdict.py rows)
    verdict: VerdictRow | None = None

    def text(self, value: Any) -> str:
        return "n/a" if value is None else self.fmt.format(value)


@dataclass(frozen=True)
class VerdictRow:
    """How a figure shows in the verdict's block (report/verdict.py): its place, its label there (short: the block
    fits 80 columns, where the figure's own label may not), and whether the row shows where the figure is missing
    ("not recorded" / "n/a": a figure every verdict has) or only where both sides have it."""

    place: int
    label: str
    always: bool = True


@dataclass(frozen=True)
class SeedRecords:
    """What a row's `compute` reads for one optimizer's seed: its step rows (a pandas frame of METRIC_COLUMNS),
    its `start`/`end`/`churn` records, and its figures computed so far (by `source` functions and earlier rows)."""

    rows: Any
    events: list[dict]
    figures: Mapping[str, Any]


# ---- bytes: decided here once ------------------------------------------------------------------------------

BytesBasis = Literal["wire", "payload"]


def total_bytes(figures: Mapping[str, Any] | Any, basis: str) -> float | None:
    """tx + rx bytes per worker per step of one optimizer's (or one seed's) figures on `basis` (wire, payload);
    None unless both directions were counted. Takes a summary dict or an OptimizerSummary."""
    tx, rx = figures.get(f"{basis}_tx_bytes_per_step"), figures.get(f"{basis}_rx_bytes_per_step")
    if tx is None or rx is None:
        return None
    return float(tx) + float(rx)


def reduction_basis(*sides: Iterable[Mapping[str, Any] | Any]) -> BytesBasis:
    """The one basis rule: "wire" where every figure set of every side (each seed of the baseline and of the
    candidate) counted wire bytes, else "payload"."""
    every = [f for side in sides for f in side]
    return "wire" if every and all(total_bytes(f, "wire") for f in every) else "payload"


def reduction(base: Mapping[str, Any] | Any, cand: Mapping[str, Any] | Any, basis: str) -> float | None:
    """The reduction: baseline bytes over candidate bytes (tx + rx per worker per step) on `basis`; None where
    either side lacks them or the candidate sent none."""
    b, c = total_bytes(base, basis), total_bytes(cand, basis)
    return b / c if b and c else None


def bytes_per_step(figures: Mapping[str, Any] | Any) -> float | None:
    """tx + rx per worker per step of one side on its own: wire where counted, else payload."""
    wire = total_bytes(figures, "wire")
    return wire if wire is not None else total_bytes(figures, "payload")


# ---- figures computed by their own row ---------------------------------------------------------------------

def wire_bytes_to_target(seed: SeedRecords) -> float | None:
    """Wire bytes (tx + rx) per worker over the steps until the target was reached: every step up to and including
    the one whose evaluation crossed it (ceil(steps_to_target) steps, warm-up step 0 included: its bytes were
    sent too), summed over ranks and divided by them. None where the seed missed the target or a step in that
    range has no wire counter (never mixed with payload bytes)."""
    steps = seed.figures.get("steps_to_target")
    if steps is None or not len(seed.rows):
        return None
    rows = seed.rows[(seed.rows["step"] >= 0) & (seed.rows["step"] < math.ceil(steps - 1e-9))]
    if not len(rows) or rows["wire_tx_bytes"].isna().any() or rows["wire_rx_bytes"].isna().any():
        return None
    total = float(rows["wire_tx_bytes"].astype("float64").sum() + rows["wire_rx_bytes"].astype("float64").sum())
    return total / rows["rank"].nunique()


# ---- the table ---------------------------------------------------------------------------------------------

_M = "results/metrics.py summarize_optimizer"
_FAIR = "results/fair.py fairness"
_RED = "results/metrics.py summarize (figures.reduction)"
_COST = "results/cost.py"
_CHURN = "results/metrics.py churn_figures"
_GOOD = "results/metrics.py goodput_figures"
_BUILD = "results/build.py"
_RUN = "results/metrics.py summarize"
_S = "{:.4g} s"
_B = "{:,.0f} B"
_L = "{:.4f}"
_X = "{:.3g}x"
_N = "{:.4g}"
_T = "{}"
_NUM = int | float


def _loss_cell(v: Any) -> str:
    return fmt_num(v, ".3f")


def _f(key: str, label: str, unit: str, fmt: str, source: str, **kw: Any) -> Figure:
    return Figure(key, label, unit, fmt, source, **kw)


FIGURES: tuple[Figure, ...] = (
    # DESIGN.md contract
    _f("steps", "steps", "steps", "{:,.0f}", _M, kind=_NUM, compare="ratio", point=True),
    _f("step_time_s_mean", "step time (mean)", "s", _S, _M, compare="ratio", better="lower", point=True,
       column=(1, "step", fmt_seconds), verdict=VerdictRow(0, "step time")),
    _f("step_time_s_p50", "step time (median)", "s", _S, _M, compare="ratio", better="lower"),
    _f("compute_s_mean", "compute time per step", "s", _S, _M, better="lower"),
    _f("comm_s_mean", "communication time per step", "s", _S, _M, better="lower", point=True,
       column=(2, "comm", fmt_seconds)),
    _f("payload_tx_bytes_per_step", "payload sent per worker per step", "bytes", _B, _M, better="lower", point=True),
    _f("payload_rx_bytes_per_step", "payload received per worker per step", "bytes", _B, _M, better="lower",
       point=True),
    _f("wire_tx_bytes_per_step", "wire bytes sent per worker per step", "bytes", _B, _M, better="lower", point=True),
    _f("wire_rx_bytes_per_step", "wire bytes received per worker per step", "bytes", _B, _M, better="lower",
       point=True),
    _f("final_loss", "final training loss", "nats", _L, _M, compare="difference", better="lower", point=True,
       column=(5, "loss", _loss_cell)),
    _f("final_val_loss", "final validation loss", "nats", _L, _M, compare="difference", better="lower", point=True,
       column=(6, "val loss", _loss_cell)),
    _f("reduction_vs_baseline", "fewer bytes than the baseline (baseline / this, tx + rx on reduction_basis)",
       "x", _X, _RED, better="higher", point=True, column=(4, "fewer", fmt_times),
       gates=(GATES["min_reduction"], GATES["max_reduction_drop"]), verdict=VerdictRow(4, "bytes/step (tx+rx)")),
    # additions
    _f("reduction_basis", "bytes basis of the reduction (wire where both sides counted it, else payload)", "", _T,
       _RED, kind=str, seeds="same", point=True),
    _f("compress_s_mean", "compression time per step", "s", _S, _M, better="lower"),
    _f("apply_s_mean", "update time per step", "s", _S, _M, better="lower"),
    _f("wait_s_mean", "wait for the slowest rank per step", "s", _S, _M, better="lower"),
    _f("collectives_per_step", "collectives per step", "1", _N, _M),
    _f("ring_bytes_per_step", "ring-algorithm bytes per worker per step", "bytes", _B, _M, better="lower"),
    _f("wire_overhead", "wire bytes over ring bytes, minus 1", "1", "{:+.1%}", _M, better="lower"),
    _f("first_val_loss", "first validation loss", "nats", _L, _M),
    _f("wall_time_s", "wall time", "s", _S, _M, better="lower", point=True),
    _f("tokens_per_s", "tokens per second", "tokens/s", "{:,.0f}", _M, compare="ratio", better="higher"),
    _f("ranks", "workers", "1", _T, _M, kind=int, seeds="same"),
    _f("replicas_identical", "replicas identical", "", _T, _M, kind=bool, seeds="all",
       column=(7, "replicas", lambda v: {True: "same", False: "DIFFER"}.get(v, "n/a"))),
    _f("replicas_diverged_at_step", "first step the replicas differ", "steps", _T, _M, kind=int, seeds="min"),
    _f("param_checksum", "parameter checksum", "", _T, _M, kind=str, seeds="same"),
    # issue 16: repeats, time to target, equal-budget losses
    _f("seeds", "seeds", "1", _T, _RUN, kind=int, seeds="n", point=True),
    _f("train_time_s", "training time (evaluations left out)", "s", _S, "results/fair.py end_of", better="lower"),
    _f("lr_schedule_steps", "steps of the lr schedule", "steps", _N, _RUN),
    _f("time_to_target_s", "time to the target loss", "s", _S, _FAIR, compare="ratio", better="lower",
       within=(0.0, "train_time_s"), point=True, verdict=VerdictRow(1, "time to target")),
    _f("tokens_to_target", "tokens to the target loss", "tokens", "{:,.0f}", _FAIR, compare="ratio", better="lower",
       within=(0.0, None), point=True),
    _f("steps_to_target", "steps to the target loss", "steps", "{:,.1f}", _FAIR, compare="ratio", better="lower",
       within=(0.0, "steps"), point=True),
    _f("target_reached", "seeds that reached the target", "1", _T, _FAIR, kind=int, seeds="count", point=True),
    _f("val_loss_at_equal_time", "validation loss at equal time", "nats", _L, _FAIR, compare="difference",
       better="lower", point=True, gates=(GATES["max_loss_gap"], GATES["max_loss_regression"]),
       verdict=VerdictRow(2, "val loss at equal time")),
    _f("val_loss_at_equal_steps", "validation loss at equal steps", "nats", _L, _FAIR, compare="difference",
       better="lower", point=True, verdict=VerdictRow(3, "val loss at equal steps")),
    # issue 27
    _f("final_tune_loss", "final loss on the tuning split", "nats", _L, _M, better="lower", point=True),
    # issue 29: cost to the target
    _f("egress_bytes_to_target", "egress to the target, all workers", "bytes", _B, _COST, compare="ratio",
       better="lower"),
    _f("egress_usd_to_target", "egress cost to the target", "USD", "${:,.2f}", _COST, compare="ratio",
       better="lower", verdict=VerdictRow(6, "cost to target", always=False)),
    _f("gpu_hours_to_target", "worker-hours to the target", "h", "{:.4g} h", _COST, compare="ratio", better="lower"),
    _f("gpu_usd_to_target", "compute cost to the target", "USD", "${:,.2f}", _COST, compare="ratio", better="lower"),
    _f("energy_j_to_target", "energy to the target", "J", "{:.4g} J", _COST, compare="ratio", better="lower"),
    # issue 29: churn
    _f("churn_leaves", "workers that left", "1", _N, _CHURN, point=True),
    _f("lost_steps", "worker-steps lost with a leaver", "steps", _N, _CHURN, better="lower", point=True),
    _f("worker_availability", "share of worker-steps trained", "1", "{:.1%}", _CHURN, better="higher", point=True),
    _f("goodput_tokens_per_s", "tokens that reached the model per training second", "tokens/s", "{:,.0f}", _CHURN,
       compare="ratio", better="higher", point=True),
    _f("state_handover_bytes", "state sent to workers that came back", "bytes", _B, _CHURN, better="lower",
       point=True),
    # issue 35 / 49: the crossing's interval
    _f("time_to_target_exact", "time to target known as a point", "", _T, _FAIR, kind=bool, seeds="all"),
    _f("time_to_target_lo_s", "time to target, lower bound", "s", _S, _FAIR, within=(0.0, "train_time_s")),
    # issue 37
    _f("floor_ratio", "payload bits over the encoding's information floor", "x", _X, _BUILD, better="lower"),
    _f("framing_ratio", "wire bytes over payload bytes", "x", _X, _M, better="lower"),
    _f("floor_ratio_empirical", "payload bits over the empirical floor of what was sent", "x", _X, _M,
       better="lower"),
    _f("goodput_model_flops_per_s", "useful model FLOP/s", "FLOP/s", "{:.3g}", _GOOD, compare="ratio",
       better="higher", verdict=VerdictRow(5, "goodput, model FLOP/s", always=False)),
    _f("goodput_model_flops_per_s_per_worker", "useful model FLOP/s per worker", "FLOP/s", "{:.3g}", _GOOD,
       compare="ratio", better="higher"),
    _f("goodput_of_peak", "useful FLOP/s of the profiles' peak", "1", "{:.1%}", _GOOD, better="higher"),
    # issue 34
    _f("max_rss_bytes", "largest peak resident memory of a worker", "bytes", _B, _BUILD, kind=int, better="lower"),
    # issue 47
    _f("payload_predicted_bytes_per_step", "predicted payload per worker per step", "bytes", _B, _BUILD),
    _f("bytes_vs_prediction", "counted payload against the prediction", "", _T, _BUILD, kind=str, seeds="same"),
    # issue 48
    _f("replay_fraction", "fraction of the predicted bytes a replay carried", "1", _N, _BUILD, seeds="same"),
    # issue 49
    _f("time_to_target_hi_s", "time to target, upper bound", "s", _S, _FAIR, within=(0.0, "train_time_s")),
    # issue 50: what reaching the target cost on the wire, per worker (the per-step figures hide the step count)
    _f("wire_bytes_to_target", "wire bytes per worker until the target was reached (tx + rx)", "bytes", _B,
       "results/figures.py wire_bytes_to_target", compare="ratio", better="lower", within=(0.0, None),
       compute=wire_bytes_to_target),
)

BY_KEY: dict[str, Figure] = {f.key: f for f in FIGURES}


def columns() -> list[Figure]:
    """The figures of the summary table `run` and `node` print, in its order (cli/summary.py)."""
    return sorted((f for f in FIGURES if f.column), key=lambda f: f.column[0] if f.column else 0)


def verdict_rows() -> list[Figure]:
    """The figures of the verdict's block, in its order (report/verdict.py rows)."""
    return sorted((f for f in FIGURES if f.verdict), key=lambda f: f.verdict.place if f.verdict else 0)


def gated() -> list[tuple[Figure, Gate]]:
    """(figure, gate) for every gate of `check`, in the table's order."""
    return [(f, g) for f in FIGURES for g in f.gates]


def gate_signature(fn: Callable[..., Any], parameter: Callable[[Gate], inspect.Parameter] | None = None,
                   eval_str: bool = False) -> inspect.Signature:
    """`fn`'s signature (api.check's, the CLI's `check`) with one keyword per gate row, made by `parameter` (by
    default a `float | None` keyword): a gate added to a row is a keyword and a flag there, and `help()`, `--help`
    and the docs list it. The gates on the run's own baseline after the first parameter, those against a
    reference run after `against`; run_checks rejects a key that is no gate."""
    def keyword(g: Gate) -> inspect.Parameter:
        return inspect.Parameter(g.key, inspect.Parameter.KEYWORD_ONLY, default=None, annotation="float | None")

    make = parameter or keyword
    sig = inspect.signature(fn, eval_str=eval_str)
    fixed = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
    first, rest = fixed[0], [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in fixed[1:]]
    at = [p.name for p in rest].index("against") + 1
    own = [make(g) for _, g in gated() if not g.against]
    ref = [make(g) for _, g in gated() if g.against]
    return sig.replace(parameters=[first, *own, *rest[:at], *ref, *rest[at:]])


__all__ = ["BY_KEY", "FIGURES", "Figure", "SeedRecords", "VerdictRow", "bytes_per_step", "columns", "gate_signature", "gated", "reduction",
           "reduction_basis", "total_bytes", "verdict_rows"]
