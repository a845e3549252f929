"""Intervals over seeds: the one place the verdict, `check` and the console get their 95% intervals from.

Seeds of different optimizers are *paired*: seed k of every optimizer starts from the same initial weights
and reads the same data order, so what varies with the seed moves both. Differences are therefore taken
seed by seed (a loss gap as candidate - baseline, a speed-up as the log of the ratio) and one Student-t
interval is put on their mean. Treating the two sides as independent (half-widths added in quadrature)
counts the shared seed-to-seed spread twice and calls a consistent gain noise. The t quantiles and p-values
are scipy.stats' (exact for any degrees of freedom, fractional ones too).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeGuard

import numpy as np


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| > t) for Student's t with `df` degrees of freedom (any df > 0, not only whole ones)."""
    from scipy import stats  # late: scipy.stats takes ~0.3 s to import, and `validate` and `--help` need no test

    return float(2.0 * stats.t.sf(abs(t), df))


def t_critical(df: float, level: float = 0.95) -> float:
    """The exact two-sided `level` quantile of Student's t for any df > 0 (Welch's fractional df too): the t with
    P(|T| > t) = 1 - level (12.706 at df 1, 2.042 at 30, 1.984 at 100; no table and no cut-over to the normal's
    1.96 until df is infinite). NaN for df <= 0."""
    if not df > 0:
        return math.nan
    from scipy import stats  # late, as in t_two_sided_p

    return float(stats.t.ppf(1.0 - (1.0 - level) / 2.0, df))


def finite(v: object) -> TypeGuard[float]:
    """A real, finite number (not a bool); the type checker then knows `v` as a number."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class Interval:
    """A mean over n seeds and its two-sided 95% interval [lo, hi] (lo = hi = mean for one seed)."""

    mean: float
    lo: float
    hi: float
    n: int

    @property
    def half(self) -> float | None:
        """Half the width (None for one seed: no spread to measure)."""
        return None if self.n < 2 else (self.hi - self.lo) / 2

    @property
    def spans(self) -> bool:
        """True when the interval holds zero (a difference) or one (a ratio, see `ratio_interval`): noise."""
        return self.lo <= 0 <= self.hi

    def clipped(self, lo: float | None = None, hi: float | None = None) -> Interval:
        """The interval cut to what is possible (a time is >= 0 and at most the budget)."""
        a = self.lo if lo is None else max(lo, self.lo)
        b = self.hi if hi is None else min(hi, self.hi)
        return Interval(self.mean, a, b, self.n)


def t_interval(values: Iterable) -> Interval | None:
    """The 95% Student-t interval of the mean of `values`; None, NaN and inf are left out; None if none is left."""
    a = np.asarray([v for v in values if finite(v)], dtype=float)
    if not len(a):
        return None
    m = float(a.mean())
    if len(a) < 2:
        return Interval(m, m, m, 1)
    half = t_critical(len(a) - 1) * float(a.std(ddof=1)) / math.sqrt(len(a))
    return Interval(m, m - half, m + half, len(a))


def paired(a: Mapping, b: Mapping) -> list[tuple[object, float, float]]:
    """(seed, a's value, b's value) for every seed both have a finite value for, in a's order."""
    return [(k, float(a[k]), float(b[k])) for k in a if k in b and finite(a[k]) and finite(b[k])]


def unpaired_difference(a: Iterable, b: Iterable) -> Interval | None:
    """mean(a) - mean(b) for two sets of seeds that are NOT paired (different seeds): Welch's 95% interval,
    with the exact t quantile at its fractional degrees of freedom. n is the smaller side's count; with one
    value a side there is no spread to judge: the difference alone (lo = hi, n 1). None when a side is empty."""
    x = np.asarray([v for v in a if finite(v)], dtype=float)
    y = np.asarray([v for v in b if finite(v)], dtype=float)
    if not len(x) or not len(y):
        return None
    d = float(x.mean() - y.mean())
    n = min(len(x), len(y))
    if n < 2:
        return Interval(d, d, d, 1)
    va, vb = float(x.var(ddof=1)) / len(x), float(y.var(ddof=1)) / len(y)
    if va + vb == 0:
        return Interval(d, d, d, n)
    df = (va + vb) ** 2 / (va ** 2 / (len(x) - 1) + vb ** 2 / (len(y) - 1))
    half = t_critical(df) * math.sqrt(va + vb)
    return Interval(d, d - half, d + half, n)


def paired_difference(a: Mapping, b: Mapping) -> Interval | None:
    """The mean of a[seed] - b[seed] over the seeds both ran, with its paired 95% interval."""
    return t_interval([x - y for _, x, y in paired(a, b)])


def ratio_interval(num: Mapping, den: Mapping) -> Interval | None:
    """num[seed] / den[seed] over the paired seeds, on the log scale (a speed-up is a ratio: 2x and 0.5x are
    equally far from 1): the geometric mean and exp of the log interval; `spans` then means it holds 1."""
    logs = [math.log(x / y) for _, x, y in paired(num, den) if x > 0 and y > 0]
    iv = t_interval(logs)
    return None if iv is None else as_ratio(iv)


def as_ratio(log_iv: Interval) -> Interval:
    """An interval of a log-ratio shown as the ratio (exp of each end); `spans` then means it holds 1."""
    return _RatioInterval(math.exp(log_iv.mean), _exp(log_iv.lo), _exp(log_iv.hi), log_iv.n)


def _exp(x: float) -> float:
    """exp, with -inf -> 0 and +inf -> inf (an unbounded end of a ratio's interval)."""
    return 0.0 if x == -math.inf else math.inf if x == math.inf else math.exp(x)


class _RatioInterval(Interval):
    @property
    def spans(self) -> bool:
        return self.lo <= 1 <= self.hi

    @property
    def half(self) -> float | None:
        return None if self.n < 2 else (self.hi - self.lo) / 2

    def clipped(self, lo: float | None = None, hi: float | None = None) -> Interval:
        iv = super().clipped(lo, hi)
        return _RatioInterval(iv.mean, iv.lo, iv.hi, iv.n)


# ---- time to target: censored, so restricted to a horizon --------------------------------------------------

def restriction_s(sides: Iterable[Mapping], budget_s: float | None = None) -> float | None:
    """The horizon tau that times to target are restricted to: the time budget where the run had one, and no
    later than the shortest training of any seed (of any side) that missed the target, whose time is known only
    to exceed its run. None when no seed missed and no time budget is known: nothing needs restricting.
    `sides`: each optimizer's `per_seed` mapping (seed -> that seed's summary figures)."""
    horizons = [float(budget_s)] if finite(budget_s) and budget_s > 0 else []
    for per in sides:
        for v in per.values():
            if not finite(v.get("time_to_target_s")) and finite(v.get("train_time_s")):
                horizons.append(float(v["train_time_s"]))
    return min(horizons) if horizons else None


@dataclass(frozen=True)
class RestrictedTime:
    """One optimizer's time to target restricted to `tau`: the mean over seeds of min(T, tau) (the restricted
    mean; a seed that missed counts exactly tau, since its T is beyond its run, which is at least tau).

    Every crossing is read on the method's own evaluations and is interval-censored: T lies in (lo, hi], the
    last evaluation above the target and the first at or below it (results/fair.py). `interval.mean` is the
    mean of the seeds' point estimates (linear interpolation between lo and hi); the interval runs from the
    lower end of the 95% t interval of the lower bounds to the upper end of that of the upper bounds, so it
    carries the evaluations' spacing as well as the seed-to-seed spread (each end is wrong at most 2.5% of the
    time when every seed's bounds hold its crossing), cut to [0, tau]."""

    interval: Interval  # mean of the estimates; [lower end over lower bounds, upper end over upper bounds]
    lo_mean: float  # the mean of the lower bounds
    tau: float | None  # None: not restricted (every seed reached the target, no time budget)
    n: int
    missed: int  # seeds counted at tau (right-censored: their T is at least tau)
    censored: int  # seeds known only to lie in an interval of some width
    hi_mean: float | None = None  # the mean of the upper bounds

    @property
    def exact(self) -> bool:
        return self.censored == 0


def interval_censored(lo: float, hi: float) -> bool:
    """A restricted time known only as (lo, hi], not as one value."""
    return hi - lo > 1e-12 * max(1.0, hi)


def before_first_evaluation(lo: float, hi: float) -> bool:
    """A crossing known only as (0, hi]: the method's first evaluation was already at or below the target."""
    return lo <= 0.0 < hi


def restricted_bounds(per: Mapping, tau: float | None) -> dict[str, tuple[float, float, float]] | None:
    """seed -> (lower bound, estimate, upper bound) of min(T, tau); all three tau for a miss. A folder from
    before issue 49 has no upper bound: an interpolated crossing (`exact` true) is then a point, one before its
    first evaluation lies in (lo, t]. None when a seed's figure cannot be restricted (it missed and nothing
    bounds its time: a folder without training times)."""
    out: dict[str, tuple[float, float, float]] = {}
    for k, v in per.items():
        t = v.get("time_to_target_s")
        if not finite(t):
            if tau is None:
                return None
            out[str(k)] = (tau, tau, tau)
            continue
        est = float(t)
        if v.get("time_to_target_exact") is False:
            lo = v.get("time_to_target_lo_s")
            lo = float(lo) if finite(lo) else 0.0
            hi_v = v.get("time_to_target_hi_s")
            hi = float(hi_v) if finite(hi_v) else est
        else:
            lo = hi = est
        lo, hi = min(lo, est), max(hi, est)
        if tau is not None:
            lo, est, hi = min(lo, tau), min(est, tau), min(hi, tau)
        out[str(k)] = (max(0.0, lo), max(0.0, est), max(0.0, hi))
    return out


def restricted_values(per: Mapping, tau: float | None) -> dict[str, tuple[float, float]] | None:
    """seed -> (lower, upper) bound of min(T, tau) (see `restricted_bounds`)."""
    b = restricted_bounds(per, tau)
    return None if b is None else {k: (lo, hi) for k, (lo, _, hi) in b.items()}


def restricted_estimates(per: Mapping, tau: float | None) -> dict[str, float] | None:
    """seed -> the point estimate of min(T, tau) (see `restricted_bounds`)."""
    b = restricted_bounds(per, tau)
    return None if b is None else {k: est for k, (_, est, _) in b.items()}


def restricted_time(per: Mapping, tau: float | None) -> RestrictedTime | None:
    """The restricted mean time to target of one optimizer over its seeds (see RestrictedTime); None when it
    is not estimable (no seed, or a miss with nothing to bound it)."""
    vals = restricted_bounds(per, tau)
    if not vals:
        return None
    iv_lo = t_interval([lo for lo, _, _ in vals.values()])
    iv_est = t_interval([est for _, est, _ in vals.values()])
    iv_hi = t_interval([hi for _, _, hi in vals.values()])
    if iv_lo is None or iv_est is None or iv_hi is None:
        return None
    runs = [float(v["train_time_s"]) for v in per.values() if finite(v.get("train_time_s"))]
    cap = tau if tau is not None else max(runs) if runs else math.inf  # a time to target is within its run
    censored = sum(1 for lo, _, hi in vals.values() if interval_censored(lo, hi))
    missed = sum(1 for v in per.values() if not finite(v.get("time_to_target_s")))
    interval = Interval(iv_est.mean, min(iv_lo.lo, iv_est.mean), max(iv_hi.hi, iv_est.mean), iv_est.n).clipped(0.0, cap)
    return RestrictedTime(interval, iv_lo.mean, tau, len(vals), missed, censored, iv_hi.mean)


def restricted_speedup(base: Mapping, cand: Mapping, tau: float | None) -> tuple[Interval | None, str | None]:
    """baseline / candidate restricted time to target, paired by seed on the log scale: the geometric mean of
    the per-seed ratios of the point estimates, and an interval that carries each side's censoring: its lower
    end is the 95% t interval's lower end of log(baseline's lower bound / candidate's upper bound), its upper
    end that of log(baseline's upper / candidate's lower) (infinite where a candidate crossed before its first
    evaluation, lower bound 0). (None, why) when it is not estimable (a miss without a training time, or no
    common seed)."""
    b, c = restricted_bounds(base, tau), restricted_bounds(cand, tau)
    if b is None or c is None:
        return None, "a seed missed the target and its training time is not recorded"
    common = [k for k in c if k in b]
    points = [math.log(b[k][1] / c[k][1]) for k in common if b[k][1] > 0 and c[k][1] > 0]
    if not points or len(points) < len(common):
        return (None, "no seed with a time on both sides") if not common else (
            None, "a time to target of 0 s on some seed: no ratio")
    low = [math.log(b[k][0] / c[k][2]) if b[k][0] > 0 else -math.inf for k in common]
    high = [math.log(b[k][2] / c[k][0]) if c[k][0] > 0 else math.inf for k in common]
    iv_p = t_interval(points)
    assert iv_p is not None  # points is not empty
    lo_end = _t_end(low, lower=True)
    hi_end = _t_end(high, lower=False)
    mean = iv_p.mean
    return as_ratio(Interval(mean, min(lo_end, mean), max(hi_end, mean), iv_p.n)), None


def _t_end(values: list[float], lower: bool) -> float:
    """The lower (or upper) end of the 95% t interval of `values`; -inf (+inf) when one of them is."""
    if any(math.isinf(v) for v in values):
        return -math.inf if lower else math.inf
    iv = t_interval(values)
    assert iv is not None
    return iv.lo if lower else iv.hi


def independent_difference_half(a_half: float | None, b_half: float | None) -> float | None:
    """The half-width an unpaired comparison would give (quadrature): kept only to show, in tests and docs,
    how much wider it is than the paired one."""
    if a_half is None and b_half is None:
        return None
    return math.hypot(a_half or 0.0, b_half or 0.0)


__all__ = ["Interval", "RestrictedTime", "as_ratio", "before_first_evaluation", "finite",
           "independent_difference_half", "interval_censored", "paired", "paired_difference", "ratio_interval",
           "restricted_bounds", "restricted_estimates", "restricted_speedup", "restricted_time", "restricted_values", "restriction_s", "t_critical", "t_interval", "t_two_sided_p", "unpaired_difference"]
