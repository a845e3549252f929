"""Many methods compared at once: paired tests against one reference, Holm-corrected.

A shoot-out of m methods asks m - 1 questions of the same seeds ("is X different from the baseline?", "is X
different from the best?"). Each 95% interval alone is wrong 5% of the time, so among 13 comparisons of
equal methods one is "significant" half the time, and ranking by means crowns a winner biased towards luck.
Holm's step-down procedure keeps the chance of any false claim in the family at 5% without assuming the tests
independent (they share seeds and a reference, so they are not). It is uniformly more powerful than Bonferroni
and needs only the p-values; scipy and statsmodels have it, but neither is a dependency, and it is six lines.

Each test is a paired t-test over seeds (results/stats.py: seed k of every method shares initial weights and
data order). Losses compare as differences; times as log-ratios (2x and 0.5x equally far from 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from distro_bench.results.stats import Interval, as_ratio, finite, paired, t_interval, t_two_sided_p

ALPHA = 0.05


def holm(pvalues: Mapping[str, float], alpha: float = ALPHA) -> dict[str, float]:
    """Holm-adjusted p-values (reject where adjusted < alpha): sorted ascending, the i-th (0-based) of m is
    multiplied by m - i, made monotone, capped at 1. A NaN p (no test possible) stays NaN and does not count
    towards m."""
    real = sorted(((p, k) for k, p in pvalues.items() if not math.isnan(p)), key=lambda x: x[0])
    m, out, running = len(real), dict.fromkeys(pvalues, math.nan), 0.0
    for i, (p, k) in enumerate(real):
        running = max(running, min(1.0, (m - i) * p))
        out[k] = running
    return out


def paired_p(diffs: list[float]) -> float:
    """The two-sided p of a paired t-test that the mean difference is 0; NaN under two seeds. Differences all
    equal: 0 if they are not zero (a consistent effect with no spread), else 1."""
    if len(diffs) < 2:
        return math.nan
    mean = sum(diffs) / len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1))
    if sd == 0:
        return 0.0 if mean != 0 else 1.0
    return t_two_sided_p(abs(mean) / (sd / math.sqrt(len(diffs))), len(diffs) - 1)


@dataclass(frozen=True)
class Comparison:
    """One method against the reference: the paired difference (a ratio for `log` figures) with its own 95%
    interval, the test's p and the Holm-adjusted p over the family. `distinct` is the family-wise claim."""

    method: str
    reference: str
    interval: Interval | None  # None: fewer than two common seeds, or a figure missing
    p: float
    p_holm: float
    why_not: str = ""  # why there is no test, when there is none

    @property
    def distinct(self) -> bool:
        return not math.isnan(self.p_holm) and self.p_holm < ALPHA

    @property
    def p_text(self) -> str:
        """The Holm-adjusted p for a table, with `*` where the family-wise claim holds."""
        if math.isnan(self.p_holm):
            return "p n/a"
        return ("p<0.001" if self.p_holm < 0.001 else f"p={self.p_holm:.3f}") + (" *" if self.distinct else "")


@dataclass(frozen=True)
class Family:
    """Every method against one reference, Holm-corrected together."""

    figure: str
    reference: str
    log: bool  # compared as ratios
    comparisons: dict[str, Comparison]

    def same_as_reference(self) -> list[str]:
        """The reference and every method the family cannot tell from it (including those without a test)."""
        return [self.reference] + [m for m, c in self.comparisons.items() if not c.distinct]


def compare_family(values: Mapping[str, Mapping[str, float]], reference: str, figure: str, *,
                   log: bool = False, alpha: float = ALPHA) -> Family:
    """Every method of `values` (method -> {seed: value}) other than `reference` against it, paired by seed:
    differences (method - reference), or log-ratios when `log` (intervals then shown as ratios). A method with
    fewer than two seeds in common with the reference gets no test (p NaN) and says why."""
    ref = values[reference]
    intervals: dict[str, Interval | None] = {}
    ps: dict[str, float] = {}
    why: dict[str, str] = {}
    for name, vals in values.items():
        if name == reference:
            continue
        pairs = paired(vals, ref)
        if log:
            pairs = [(k, x, y) for k, x, y in pairs if x > 0 and y > 0]
        diffs = [math.log(x / y) if log else x - y for _, x, y in pairs]
        iv = t_interval(diffs)
        intervals[name] = None if iv is None else (as_ratio(iv) if log else iv)
        ps[name] = paired_p(diffs)
        if math.isnan(ps[name]):
            why[name] = f"{len(diffs)} common seed(s) with {reference}; a test needs 2"
    adjusted = holm(ps, alpha)
    return Family(figure, reference, log, {n: Comparison(n, reference, intervals[n], ps[n], adjusted[n], why.get(n, ""))
                                           for n in intervals})


def best_by_mean(values: Mapping[str, Mapping[str, float]], lower_is_better: bool = True) -> str:
    """The method with the best mean over its finite seeds (the one a ranking by means would crown)."""
    scored = {n: sum(xs) / len(xs) for n, v in values.items() if (xs := [float(x) for x in v.values() if finite(x)])}
    if not scored:
        raise ValueError("no method has a finite value")
    return min(scored, key=lambda n: scored[n] if lower_is_better else -scored[n])


__all__ = ["ALPHA", "Comparison", "Family", "best_by_mean", "compare_family", "holm", "paired_p"]
