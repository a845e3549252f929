"""Many methods compared at once: paired tests against one reference, or between every pair, Holm-corrected.

A shoot-out of m methods asks m - 1 questions of the same seeds ("is X different from the baseline?", "is X
different from the best?"). Each 95% interval alone is wrong 5% of the time, so among 13 comparisons of
equal methods one is "significant" half the time, and ranking by means crowns a winner biased towards luck.
Holm's step-down procedure keeps the chance of any false claim in the family at 5% without assuming the tests
independent (they share seeds and a reference, so they are not). It is uniformly more powerful than Bonferroni
and needs only the p-values; statsmodels has it (scipy's false_discovery_control only Benjamini-Hochberg), but
it is not a dependency, and it is six lines.

An order between methods, or "the best", is a claim about pairs, so it comes from the family of all pairs
(`all_pairs`), never from tests against a best picked by the same data (issue 49).

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
    equal: 1 when they are zero; NaN (no test) when they are not: the t statistic is then mean / 0, and a
    spread of exactly zero over a few seeds says the figure is quantised or capped (two seeds both counted
    at the horizon, bytes fixed by the method), not that the effect is certain (issue 49: this returned 0,
    a claim as strong as any)."""
    if len(diffs) < 2:
        return math.nan
    mean = sum(diffs) / len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1))
    if sd <= 1e-12 * max(1.0, abs(mean)):
        return 1.0 if abs(mean) <= 1e-12 else math.nan
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
    descriptive: bool = False  # a figure that supports no test (a time to a post-hoc target): no claim, no star

    @property
    def distinct(self) -> bool:
        return not self.descriptive and not math.isnan(self.p_holm) and self.p_holm < ALPHA

    @property
    def p_text(self) -> str:
        """The Holm-adjusted p for a table, with `*` where the family-wise claim holds ("descriptive" in place of
        a p where the figure supports no test)."""
        if self.descriptive:
            return "descriptive"
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
                   log: bool = False, alpha: float = ALPHA, descriptive: bool = False) -> Family:
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
            why[name] = (f"{len(diffs)} common seed(s) with {reference}; a test needs 2" if len(diffs) < 2 else
                         "every seed differs by the same amount: no spread to test against")
    adjusted = holm(ps, alpha)
    return Family(figure, reference, log, {n: Comparison(n, reference, intervals[n], ps[n], adjusted[n], why.get(n, ""),
                                                      descriptive) for n in intervals})


def _pair_test(a: Mapping[str, float], b: Mapping[str, float], log: bool) -> tuple[Interval | None, float, str]:
    pairs = paired(a, b)
    if log:
        pairs = [(k, x, y) for k, x, y in pairs if x > 0 and y > 0]
    diffs = [math.log(x / y) if log else x - y for _, x, y in pairs]
    iv = t_interval(diffs)
    p = paired_p(diffs)
    why = "" if not math.isnan(p) else (f"{len(diffs)} common seed(s); a test needs 2" if len(diffs) < 2 else
                                        "every seed differs by the same amount: no spread to test against")
    return (None if iv is None else as_ratio(iv) if log else iv), p, why


@dataclass(frozen=True)
class AllPairs:
    """Every pair of methods compared, paired by seed, Holm-corrected over all m(m-1)/2 of them (issue 49).

    The claims a shoot-out makes between methods come from here, so each holds family-wise at 5%: "A before
    B" (`lower(A, B)`: A's figure is lower, Holm-adjusted p < 0.05), an order A < B < C (`backs(chain)`: every
    pair of it, not only neighbours), "the best" (`best`: lower than every other method), and the methods that
    may be the best (`may_be_best`: those no other method is shown lower than). Nothing is picked from the data
    before it is tested: each method's claim to be the best is tested against every other, so the chance that
    the truly best is left out of `may_be_best`, or that a method is called best that is not, is at most 5%
    (the error the best-by-mean family made: 9-12% false claims with 14 equal methods)."""

    figure: str
    log: bool
    comparisons: dict[tuple[str, str], Comparison]  # (a, b) with a before b in the input's order: a - b
    descriptive: bool = False

    def pair(self, a: str, b: str) -> tuple[Comparison, bool] | None:
        """(the comparison, flipped): flipped when it is stored as (b, a), its interval then of b - a."""
        if (a, b) in self.comparisons:
            return self.comparisons[(a, b)], False
        if (b, a) in self.comparisons:
            return self.comparisons[(b, a)], True
        return None

    def versus(self, a: str, b: str) -> Comparison | None:
        """a against b (interval of a - b, or a / b when `log`), with the pair's Holm-adjusted p."""
        found = self.pair(a, b)
        if found is None:
            return None
        c, flipped = found
        if not flipped:
            return c
        iv = c.interval
        if iv is not None:
            iv = (as_ratio(Interval(-math.log(iv.mean), -math.log(iv.hi), -math.log(iv.lo), iv.n)) if self.log
                  else Interval(-iv.mean, -iv.hi, -iv.lo, iv.n))
        return Comparison(a, b, iv, c.p, c.p_holm, c.why_not, c.descriptive)

    def lower(self, a: str, b: str) -> bool:
        """a's figure is lower than b's, family-wise."""
        found = self.pair(a, b)
        if found is None:
            return False
        c, flipped = found
        if not c.distinct or c.interval is None:
            return False
        below = c.interval.mean < (0.0 if not self.log else 1.0)
        return below != flipped

    def backs(self, chain: list[str]) -> bool:
        """An order a < b < c ... holds family-wise: every earlier method lower than every later one."""
        return all(self.lower(chain[i], chain[j]) for i in range(len(chain)) for j in range(i + 1, len(chain)))

    @property
    def methods(self) -> list[str]:
        seen: dict[str, None] = {}
        for a, b in self.comparisons:
            seen.setdefault(a)
            seen.setdefault(b)
        return list(seen)

    @property
    def best(self) -> str | None:
        """The method lower than every other, family-wise; None when no method is."""
        for m in self.methods:
            if all(self.lower(m, o) for o in self.methods if o != m):
                return m
        return None

    def may_be_best(self) -> list[str]:
        """The methods no other is shown lower than: the set that holds the best with 95% confidence."""
        return [m for m in self.methods if not any(self.lower(o, m) for o in self.methods if o != m)]


def all_pairs(values: Mapping[str, Mapping[str, float]], figure: str, *, log: bool = False,
              alpha: float = ALPHA, descriptive: bool = False) -> AllPairs:
    """Every pair of `values` (method -> {seed: value}) compared, paired by seed (log-ratios when `log`), with
    Holm over all pairs (see AllPairs)."""
    names = list(values)
    tests = {(a, b): _pair_test(values[a], values[b], log) for i, a in enumerate(names) for b in names[i + 1:]}
    adjusted = holm({f"{a}\0{b}": p for (a, b), (_, p, _) in tests.items()}, alpha)
    comps = {(a, b): Comparison(a, b, iv, p, adjusted[f"{a}\0{b}"], why, descriptive)
             for (a, b), (iv, p, why) in tests.items()}
    return AllPairs(figure, log, comps, descriptive)


def best_by_mean(values: Mapping[str, Mapping[str, float]], lower_is_better: bool = True) -> str:
    """The method with the best mean over its finite seeds (the one a ranking by means would crown)."""
    scored = {n: sum(xs) / len(xs) for n, v in values.items() if (xs := [float(x) for x in v.values() if finite(x)])}
    if not scored:
        raise ValueError("no method has a finite value")
    return min(scored, key=lambda n: scored[n] if lower_is_better else -scored[n])


__all__ = ["ALPHA", "AllPairs", "Comparison", "Family", "all_pairs", "best_by_mean", "compare_family", "holm",
           "paired_p"]
