"""Is a difference between two runs real or noise? A Welch t-test at 95%, no scipy needed."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from distro_bench.results.stats import t_critical  # the one table of t quantiles

NOT_SIGNIFICANT = "not significant"


@dataclass
class Sample:
    mean: float
    std: float
    n: int

    @classmethod
    def of(cls, values) -> Sample:
        a = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
        if not len(a):
            return cls(math.nan, math.nan, 0)
        return cls(float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0, len(a))


def significant(a: Sample, b: Sample) -> bool | None:
    """True if b differs from a beyond noise; None when either side has no data."""
    if a.n == 0 or b.n == 0 or math.isnan(a.mean) or math.isnan(b.mean):
        return None
    va, vb = (a.std ** 2 / a.n if a.n else 0.0), (b.std ** 2 / b.n if b.n else 0.0)
    diff = b.mean - a.mean
    if va + vb == 0:  # deterministic quantities (bytes): any difference is real
        return abs(diff) > 1e-9 * max(abs(a.mean), abs(b.mean), 1e-30)
    if a.n < 2 or b.n < 2:
        return None  # one value with no spread cannot be tested against noise
    dof = (va + vb) ** 2 / ((va ** 2 / (a.n - 1) if a.n > 1 else 0) + (vb ** 2 / (b.n - 1) if b.n > 1 else 0) or 1e-300)
    return abs(diff) / math.sqrt(va + vb) > t_critical(dof)


def describe_change(ref: Sample, other: Sample) -> str:
    """'+12.3%' / '-4.0%', or 'not significant' when the difference is within noise (never a noisy percentage)."""
    sig = significant(ref, other)
    if sig is None:
        return "n/a"
    if not sig:
        return "no change" if other.mean == ref.mean else NOT_SIGNIFICANT
    if ref.mean == 0:
        return "changed (reference is 0)"
    return f"{(other.mean - ref.mean) / abs(ref.mean) * 100:+.1f}%"
