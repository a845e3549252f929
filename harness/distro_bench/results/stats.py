"""Intervals over seeds: the one place the verdict, `check` and the console get their 95% intervals from.

Seeds of different optimizers are *paired*: seed k of every optimizer starts from the same initial weights
and reads the same data order, so what varies with the seed moves both. Differences are therefore taken
seed by seed (a loss gap as candidate - baseline, a speed-up as the log of the ratio) and one Student-t
interval is put on their mean. Treating the two sides as independent (half-widths added in quadrature)
counts the shared seed-to-seed spread twice and calls a consistent gain noise. Pure numpy, no scipy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeGuard

import numpy as np

# Two-sided 95% critical values of Student's t by degrees of freedom (beyond 30, the normal's 1.96 is close enough).
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t_critical(df: float) -> float:
    if df < 1:
        return _T95[0]
    return _T95[int(df) - 1] if df <= 30 else 1.96


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


def paired_difference(a: Mapping, b: Mapping) -> Interval | None:
    """The mean of a[seed] - b[seed] over the seeds both ran, with its paired 95% interval."""
    return t_interval([x - y for _, x, y in paired(a, b)])


def ratio_interval(num: Mapping, den: Mapping) -> Interval | None:
    """num[seed] / den[seed] over the paired seeds, on the log scale (a speed-up is a ratio: 2x and 0.5x are
    equally far from 1): the geometric mean and exp of the log interval; `spans` then means it holds 1."""
    logs = [math.log(x / y) for _, x, y in paired(num, den) if x > 0 and y > 0]
    iv = t_interval(logs)
    if iv is None:
        return None
    return _RatioInterval(math.exp(iv.mean), math.exp(iv.lo), math.exp(iv.hi), iv.n)


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


def independent_difference_half(a_half: float | None, b_half: float | None) -> float | None:
    """The half-width an unpaired comparison would give (quadrature): kept only to show, in tests and docs,
    how much wider it is than the paired one."""
    if a_half is None and b_half is None:
        return None
    return math.hypot(a_half or 0.0, b_half or 0.0)


__all__ = ["Interval", "finite", "independent_difference_half", "paired", "paired_difference", "ratio_interval",
           "t_critical", "t_interval"]
