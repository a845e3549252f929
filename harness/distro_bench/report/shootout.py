"""A shoot-out's claims, corrected for asking many questions of the same seeds (results/multiple.py).

Two figures, each in two families: time to target (restricted to the run's horizon, compared as a ratio)
and validation loss at equal time (compared as a difference); each method against the baseline (Holm over
those m - 1), and every pair of methods (Holm over all m(m-1)/2). Orders between methods, "the best" and the
set that may be the best come from the all-pairs family only (issue 49: tested against a best picked by mean
from the same data, some false claim appeared in 9-12% of shoot-outs of 14 equal methods). A time to a
post-hoc target supports no test: its families are descriptive (no p, no star).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distro_bench.report.verdict import _time_budget, is_post_hoc
from distro_bench.results.multiple import AllPairs, Family, all_pairs, best_by_mean, compare_family
from distro_bench.results.stats import before_first_evaluation, finite, restricted_bounds, restriction_s
from distro_bench.results.summary import Summary

TIME, LOSS = "time_to_target_s", "val_loss_at_equal_time"


@dataclass(frozen=True)
class FigureComparisons:
    """One figure's two families, and the methods left out of them (each with why). `best` is the best by mean
    (for display only); `best_claim` is the method the all-pairs family shows lower than every other (None
    when none is)."""

    figure: str
    best: str
    vs_baseline: Family
    pairs: AllPairs
    left_out: dict[str, str] = field(default_factory=dict)

    def indistinguishable_from_best(self) -> list[str]:
        """The methods that may be the best: no other is shown lower, over all pairs."""
        return self.pairs.may_be_best()

    @property
    def best_claim(self) -> str | None:
        return self.pairs.best


def _per_seed(summary: Summary) -> dict[str, dict[str, dict]]:
    """method -> its `per_seed` figures, for the methods that have any."""
    return {n: s.per_seed for n, s in summary.optimizers.items() if s.per_seed}


def seed_losses(summary: Summary | dict) -> dict[str, dict[str, float]]:
    """method -> {seed: val loss at equal time} for every finite figure."""
    return {n: {k: float(v[LOSS]) for k, v in per.items() if finite(v.get(LOSS))}
            for n, per in _per_seed(Summary.of(summary)).items()}


def seed_times(summary: Summary | dict) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """method -> {seed: min(T, tau)} (a miss counts tau, the run's horizon: results/stats.restriction_s; a
    crossing, interval-censored between two evaluations, counts its interpolated estimate), and the methods
    that cannot take part, with why: a seed that crossed before its first evaluation (known only as (0, t]),
    or a miss with no training time to bound it."""
    typed = Summary.of(summary)
    opts = _per_seed(typed)
    tau = restriction_s(list(opts.values()), _time_budget(typed.to_dict()))
    out, left_out = {}, {}
    for name, per in opts.items():
        vals = restricted_bounds(per, tau)
        if vals is None:
            left_out[name] = "a seed missed the target and its training time is not recorded"
        elif any(before_first_evaluation(lo, hi) for lo, _, hi in vals.values()):
            left_out[name] = "a seed reached the target before its first evaluation (its time is an interval from 0)"
        else:
            out[name] = {k: est for k, (_, est, _) in vals.items()}
    return out, left_out


def _families(figure: str, values: dict[str, dict[str, float]], baseline: str, log: bool,
              left_out: dict[str, str], descriptive: bool = False) -> FigureComparisons | None:
    if baseline not in values or len(values) < 2:
        return None
    best = best_by_mean(values)
    return FigureComparisons(figure, best, compare_family(values, baseline, figure, log=log, descriptive=descriptive),
                             all_pairs(values, figure, log=log, descriptive=descriptive), left_out)


def comparisons(summary: Summary | dict) -> dict[str, FigureComparisons]:
    """{figure: its families} for the figures the run allows (a figure is absent where the baseline lacks it)."""
    summary = Summary.of(summary)
    baseline = summary.baseline or next(iter(summary.optimizers), "")
    times, left_out = seed_times(summary)
    post_hoc = is_post_hoc(summary.to_dict())  # times to a target chosen after the data: described, never tested
    out = {}
    for figure, values, log, why in ((TIME, times, True, left_out), (LOSS, seed_losses(summary), False, {})):
        fam = _families(figure, values, baseline, log, why, descriptive=post_hoc and figure == TIME)
        if fam is not None:
            out[figure] = fam
    return out


__all__ = ["LOSS", "TIME", "FigureComparisons", "comparisons", "seed_losses", "seed_times"]
