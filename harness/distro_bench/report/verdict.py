"""The verdict: one block per optimizer against the baseline, from summary.json alone; its console layout and the
ranking of three or more optimizers.

Both the report and the end of `distro-bench run` lead with it. Each side's figure is a mean over seeds with
its 95% interval (`ci95`); every comparison (a loss gap, a speed-up) is paired seed by seed from `per_seed`
(harness/distro_bench/results/stats.py), since seeds share initial weights and data order. A run folder written
before those keys existed still gets a verdict, with "not recorded" where a figure is missing (and unpaired
intervals). Nothing here imports torch or matplotlib: the CLI prints `verdict_lines(summary)` as it is.

One concern a module (issue 50): report/verdict_estimates.py (the estimates and their pairing: `Verdict`,
`verdicts`), report/verdict_cost.py (the cost to target in cells and words), report/verdict_words.py (the English:
sentence, decision, headline, `run`'s closing figures) and this module (the block's rows and lines, the ranking).
Callers import from here (`__all__`).
"""
from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from distro_bench.report.verdict_cost import cost_comparison, cost_label, cost_text
from distro_bench.report.verdict_estimates import (
    Compared,
    Estimate,
    Verdict,
    _budget_cap,
    _count,
    _diff,
    _estimate,
    _factor,
    _recorded,
    _time_budget,
    is_post_hoc,
    restricted_estimate,
    verdicts,
)
from distro_bench.report.verdict_words import (
    Decision,
    _bytes_words,
    _faster,
    _lower_higher,
    _range,
    _seeds_of,
    closing_line,
    decision,
    heading,
    headline,
    sentence,
    speedup_text,
    verdict_figures,
)
from distro_bench.results.figures import Figure, reduction_basis, total_bytes, verdict_rows
from distro_bench.results.format import fmt_bytes
from distro_bench.results.stats import (
    restricted_time,
    restriction_s,
)
from distro_bench.results.summary import OptimizerSummary, Summary

WIDTH = 80  # the block `run` prints fits an 80-column terminal or log


Row = tuple[str, str, str, str]  # (figure, this optimizer, the baseline, comparison)


def rows(v: Verdict) -> list[Row]:
    """(figure, this optimizer, the baseline, comparison) for the block's table: one row per figure row with a
    `verdict` (results/figures.py), in its place, read as the row says (`_compared`) unless `_SHOWN` words it."""
    out: list[Row] = []
    for fig in verdict_rows():
        out += _SHOWN.get(fig.key, _compared)(v, fig)
    return out


UNITS_SHOWN = ("s", "h", "J")  # a unit read after the number; a loss reads as a bare number (nats)


def _unit(fig: Figure) -> str:
    return f" {fig.unit}" if fig.unit in UNITS_SHOWN else ""


def _compared(v: Verdict, fig: Figure) -> list[Row]:
    """A figure row as the table says: its verdict label, each side's mean and interval in the row's unit, and the
    comparison its row names (a difference: "0.41 ± 0.05 lower"; a ratio: "2.0x more [1.8, 2.2]"). A row not
    `always` shown appears only where this optimizer has the figure and the baseline a non-zero one."""
    c, row = v.figures.get(fig.key), fig.verdict
    if c is None or row is None or (not row.always and not (c.mine.known and c.base.mean)):
        return []
    missing = "n/a" if c.recorded else "not recorded"
    return [(row.label, c.mine.text(_unit(fig)) if c.mine.known else missing,
             c.base.text(_unit(fig)) if c.base.known else missing, _comparison(fig, c))]


def _comparison(fig: Figure, c: Compared) -> str:
    if fig.compare == "difference":
        return _lower_higher(c.difference)
    r = c.ratio
    if not r:
        return "n/a"
    return (f"about the same ({_factor(r)}{_range(c.paired)})" if 0.95 <= r <= 1.05 else
            f"{_factor(r)} more" + _range(c.paired) if r > 1 else f"{_factor(1 / r)} less" + _range(c.paired, True))


# Rows worded by hand where the table cannot say it:
def _step_time(v: Verdict, fig: Figure) -> list[Row]:
    """A time ratio reads as a speed-up ("2.0x faster"), paired as baseline / this optimizer."""
    (label, mine, theirs, _), = _compared(v, fig)
    sp = v.step_speedup
    return [(label, mine, theirs, "n/a" if sp is None else _faster(sp, v.paired_step_speedup))]


def _time_to_target(v: Verdict, fig: Figure) -> list[Row]:
    """Times to target are restricted means to the verdict's tau (a missed seed counts tau), labelled with the
    target, compared as a censored speed-up or in words for who reached it (verdict_estimates.py)."""
    if v.mine.reached is None:
        return [("time to target", "not recorded", "not recorded", "n/a")]

    def shown(reached, est, restricted, k):
        if reached or (restricted is not None and v.tau is not None):  # a miss counts tau: restricted mean
            return est.text(" s") + ("" if reached else _seeds_of(k, v.seeds, short=True))
        return "not reached" + _seeds_of(k, v.seeds)

    mine = shown(v.mine.reached, v.mine.time_to_target, v.mine.restricted, v.mine.reached_seeds)
    theirs = shown(v.base.reached, v.base.time_to_target, v.base.restricted, v.base.reached_seeds)
    k, kb = v.mine.reached_seeds or 0, v.base.reached_seeds or 0
    cmp = ("post-hoc target: descriptive" if v.post_hoc else
           speedup_text(v, short=True) if v.target_speedup else
           "not estimable" if v.speedup_why else
           "only this one reached it" if v.mine.reached else
           f"only {v.baseline} reached it" if v.base.reached else
           f"seeds hit {k}/{v.seeds} vs {kb}/{v.seeds}" if k or kb else "neither reached it")
    return [(f"time to val loss {v.target:.4g}" if v.target is not None else fig.verdict.label if fig.verdict else "",
             mine, theirs, cmp)]


def _bytes(v: Verdict, fig: Figure) -> list[Row]:
    """The reduction as bytes on the verdict's one basis (results/figures.py's rule), per step and, where both
    sides' steps are known, over the whole run: per step hides what a budget costs (at equal time the quicker
    method takes more steps). The short labels keep the CLI's block within 80 columns; the report's text says
    what each figure is."""
    bw = _bytes_words(v)
    basis = v.bytes_basis or "payload"
    mine_b, base_b = v.mine.bytes_per_step, v.base.bytes_per_step
    known = mine_b is not None and base_b is not None
    out = [(f"{basis} {fig.verdict.label if fig.verdict else ''}", fmt_bytes(mine_b) if known else "",
            fmt_bytes(base_b) if known else "", bw or "n/a")]
    if mine_b is not None and base_b is not None and v.mine.steps.mean and v.base.steps.mean and v.mine.steps.known \
            and v.base.steps.known:
        mine_t, base_t = mine_b * v.mine.steps.mean, base_b * v.base.steps.mean
        r = base_t / mine_t if mine_t else None
        out.append((f"{basis} bytes, whole run", fmt_bytes(mine_t), fmt_bytes(base_t),
                    "n/a" if not r else f"{_factor(r)} fewer bytes" if r >= 1 else f"{_factor(1 / r)} more bytes"))
    return out


def _goodput(v: Verdict, fig: Figure) -> list[Row]:
    """Issue 37: FLOP/s scaled to G or T, with the share of peak beside it; compared as the table says."""
    found = _compared(v, fig)
    return [(label, _flops_text(v.mine.goodput, v.mine.goodput_of_peak),
             _flops_text(v.base.goodput, v.base.goodput_of_peak), cmp) for label, _, _, cmp in found]


def _cost(v: Verdict, fig: Figure) -> list[Row]:
    """Issue 29: egress and worker-hours to the target in one row, in dollars where priced, else hours
    (report/verdict_cost.py); the note under the block says how it is costed."""
    if v.mine.cost is None or v.base.cost is None:
        return []
    label = cost_label(v)
    priced = "$" in label
    return [(label, cost_text(v.mine.cost, priced), cost_text(v.base.cost, priced), cost_comparison(v))]


_SHOWN: dict[str, Callable[[Verdict, Figure], list[Row]]] = {
    "step_time_s_mean": _step_time, "time_to_target_s": _time_to_target, "reduction_vs_baseline": _bytes,
    "goodput_model_flops_per_s": _goodput, "egress_usd_to_target": _cost}


def _flops_text(e: Estimate, of_peak: float | None) -> str:
    """GFLOP/s (or TFLOP/s) with the interval, and the share of peak where there is one."""
    scale, unit = (1e12, " TFLOP/s") if (e.mean or 0) >= 1e12 else (1e9, " GFLOP/s")
    shown = Estimate(e.mean / scale if e.mean is not None else None, e.half / scale if e.half else e.half)
    return shown.text(unit) + (f" ({of_peak:.1%} of peak)" if isinstance(of_peak, (int, float)) else "")


def closing_lines(summary: dict | Summary) -> list[str]:
    """`closing_line` for every optimizer of the summary against its baseline."""
    model = Summary.model_validate(summary)
    base = model.optimizers.get(model.baseline or "")
    if base is None:
        return []
    return [closing_line(v, summary, verdict_figures(model.optimizers[v.optimizer], base))
            for v in verdicts(summary) if v.optimizer in model.optimizers]


def verdict_lines(summary: dict | Summary) -> list[str]:
    """Plain text (no markup) for the end of `distro-bench run`: one headline per optimizer (who won, on which
    figure, at what bytes), then per optimizer a heading, aligned figures (this optimizer | baseline |
    comparison) and the sentence. Empty when there is nothing to compare."""
    scenario = Summary.model_validate(summary).run.scenario
    found = verdicts(summary)
    lines: list[str] = []
    for v in found:
        lines += textwrap.wrap(headline(v, summary), WIDTH, subsequent_indent="  ", break_on_hyphens=False)
    local = Summary.model_validate(summary).run.backend == "local"
    for v in found:
        d = decision(v, summary)
        if d.decided:
            lines.append(heading(v, summary))
        else:  # labelled as what it is, as in the report: measurements side by side, not a verdict
            lines += textwrap.wrap(f"{heading(v, summary)}: no verdict ({d.why}); figures measured"
                                   f"{' on loopback' if local else ''}, not a verdict", WIDTH,
                                   subsequent_indent="  ", break_on_hyphens=False)
        table = rows(v)
        w = [max(len(r[i]) for r in table) for i in range(3)]
        for label, mine, theirs, cmp in table:
            if mine or theirs:
                line = f"  {label:<{w[0]}}  {mine:>{w[1]}}  vs {theirs:>{w[2]}}  {cmp}"
            else:
                line = f"  {label:<{w[0]}}  {'':>{w[1]}}     {'':>{w[2]}}  {cmp}"
                line = line if len(line) <= WIDTH else f"  {label:<{w[0]}}  {cmp}"
            if len(line) > WIDTH and cmp:  # the comparison on its own line, under the figures
                lines.append(line[:len(line) - len(cmp)].rstrip())
                lines.append(" " * max(4, WIDTH - len(cmp)) + cmp)
            else:
                lines.append(line)
        lines += textwrap.wrap(sentence(v, scenario), WIDTH, initial_indent="  ", subsequent_indent="  ",
                               break_on_hyphens=False)
        for n in v.notes:
            lines += textwrap.wrap(f"note: {n}", WIDTH, initial_indent="  ", subsequent_indent="    ",
                                   break_on_hyphens=False)
    return lines


@dataclass(frozen=True)
class Ranked:
    """One optimizer's place when several are compared: by time to target first, then by val loss at equal
    time. Times are restricted means to the run's horizon (a seed that missed counts the horizon: the time
    budget, or the shortest training of a seed that missed); a method without a time ranks last. A ranking
    by means, not a test: neighbours whose intervals overlap are not shown apart."""

    rank: int
    optimizer: str
    time_to_target: Estimate
    reached: str  # "3/3" seeds that reached the target, "" when the summary does not record it
    loss_equal_time: Estimate
    bytes_per_step: float | None  # tx + rx, wire where counted, else payload
    bytes_basis: str
    steps: Estimate


def ranking(summary: dict | Summary) -> list[Ranked]:
    """Every optimizer of the run, best first (see Ranked). Empty for fewer than three: the verdict says it all."""
    model = Summary.model_validate(summary)
    opts = model.optimizers
    if len(opts) < 3:
        return []
    basis = reduction_basis(opts.values())

    per = {n: s.per_seed or {} for n, s in opts.items()}
    tau = restriction_s(per.values(), _time_budget(model)) if all(per.values()) else None

    def time_of(name: str, s: OptimizerSummary) -> Estimate:
        """The restricted mean to the run's shared tau where every optimizer has per-seed figures (a miss
        counts tau, intervals within [0, tau]); else the summary's mean, its interval cut at 0."""
        if all(per.values()) and _recorded(s, "time_to_target_s"):
            r = restricted_time(per[name], tau)
            if r is not None and (tau is not None or not r.missed):
                return restricted_estimate(r)
        return _estimate(s, "time_to_target_s").within(0.0, _budget_cap(model, s))

    times = {n: time_of(n, s) for n, s in opts.items()}

    def key(item):
        name, s = item
        ttt, loss = times[name], _estimate(s, "val_loss_at_equal_time")
        return (not ttt.known, ttt.mean if ttt.known else 0.0, loss.mean if loss.known else math.inf)

    out = []
    for i, (name, s) in enumerate(sorted(opts.items(), key=key), 1):
        reached, seeds = _count(s.target_reached), _count(s.seeds)
        out.append(Ranked(rank=i, optimizer=name, time_to_target=times[name],
                          reached=f"{reached}/{seeds}" if reached is not None and seeds else "",
                          loss_equal_time=_estimate(s, "val_loss_at_equal_time"),
                          bytes_per_step=total_bytes(s, basis), bytes_basis=basis, steps=_estimate(s, "steps")))
    return out


RANKING_COLUMNS = ["#", "optimizer", "to target", "reached", "val loss, equal time", "bytes/step", "steps"]


def ranking_rows(ranked: list[Ranked]) -> list[list[str]]:
    return [[str(r.rank), r.optimizer, r.time_to_target.text(" s"), r.reached or "-", r.loss_equal_time.text(),
             fmt_bytes(r.bytes_per_step) if r.bytes_per_step is not None else "n/a", r.steps.text(digits=3)]
            for r in ranked]


def ranking_lines(summary: dict | Summary) -> list[str]:
    """The ranking as aligned plain text for `run`'s output (empty for fewer than three optimizers)."""
    ranked = ranking(summary)
    if not ranked:
        return []
    # Steps are in each verdict above; without them the table fits 80 columns with long optimizer names.
    cols = ["#", "optimizer", "to target", "hit", "loss, eq. time", "bytes/step"]
    table = [cols] + [row[:len(cols)] for row in ranking_rows(ranked)]
    w = [max(len(r[i]) for r in table) for i in range(len(cols))]
    lines = [f"ranking by time to target, then val loss at equal time ({ranked[0].bytes_basis} bytes, tx+rx)"]
    lines += ["  " + "  ".join(c.ljust(w[i]) if i in (1, 3) else c.rjust(w[i]) for i, c in enumerate(row)).rstrip()
              for row in table]
    return lines


# What callers import from here (the verdict's modules: estimates and pairing, cost, words, and this layout).
__all__ = ["RANKING_COLUMNS", "WIDTH", "Decision", "Estimate", "Ranked", "Verdict", "_diff", "_lower_higher",
           "_time_budget", "closing_lines", "decision", "heading", "headline", "is_post_hoc", "ranking",
           "ranking_lines", "ranking_rows", "rows", "sentence", "verdict_lines", "verdicts"]
