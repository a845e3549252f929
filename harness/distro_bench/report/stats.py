"""Samples for the comparison's table and bars: a mean and a standard deviation over seeds.

Whether a difference is real or noise is judged in one place, harness/distro_bench/results/stats.py, over seeds (paired
where the seeds match, else Welch on the seeds): report/compare.py's `seed_change`. Per-step samples are not
repeats, so nothing here tests them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from distro_bench.results.stats import t_critical  # the one t quantile (exact, any df), re-exported for the plots

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


__all__ = ["NOT_SIGNIFICANT", "Sample", "t_critical"]
