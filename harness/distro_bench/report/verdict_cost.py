"""The verdict's cost to target in words and cells: each side's dollars and worker-hours, and how they compare."""

from __future__ import annotations

import math

from distro_bench.report.verdict_estimates import Verdict, _factor, _ratio
from distro_bench.report.verdict_words import _bound, _range
from distro_bench.results import cost as _cost


def _apart(v: Verdict, mine: _cost.CostSide, base: _cost.CostSide) -> str:
    """Egress bytes and hours, each as its own factor."""
    capped = ("both" if mine.capped and base.capped else "mine" if mine.capped else "base" if base.capped
              else None)
    parts = []
    for x, fewer, more in ((_ratio(base.egress_bytes, mine.egress_bytes), "less egress", "more egress"),
                           (_ratio(base.hours, mine.hours), f"fewer {v.cost_unit}", f"more {v.cost_unit}")):
        if not x:
            parts.append("n/a")
        elif 0.95 <= x <= 1.05:
            parts.append(f"same {more.split()[-1]}")
        else:
            parts.append(f"{_bound(capped, x < 1)}{_factor(x if x >= 1 else 1 / x)} {fewer if x >= 1 else more}")
    return ", ".join(parts)


def _money(x: float) -> str:
    """Two significant digits, never in e-notation ($0.000023, $0.018, $1.50, $120)."""
    if x >= 100 or x <= 0:
        return f"${x:,.0f}"
    return f"${x:.{max(2, 1 - math.floor(math.log10(x)))}f}"


def cost_label(v: Verdict) -> str:
    """'cost to target $, CPU-h': the units live in the label so each side stays as narrow as a step time."""
    priced = (v.mine.cost is not None and v.mine.cost.usd is not None and v.base.cost is not None
              and v.base.cost.usd is not None)
    return f"cost to target {'$, ' if priced else ''}{v.cost_unit}"


def cost_text(c: _cost.CostSide | None, priced: bool = True) -> str:
    """'$0.018, 0.11' (dollars where priced, then worker-hours); '>=' when a seed missed and counts at its
    whole run (a lower bound)."""
    if c is None:
        return "n/a"
    pre = ">=" if c.capped else ""
    hours = f"{c.hours:.2g}"
    return f"{pre}{_money(c.usd)}, {hours}" if priced and c.usd is not None else f"{pre}{hours}"


def cost_comparison(v: Verdict) -> str:
    """'98x cheaper [90, 107]' on dollars where they price both the bytes and the hours; else the two apart,
    '40x less egress, 2.5x fewer CPU-h' (a bytes win is not a verdict when the hours went the other way)."""
    mine, base = v.mine.cost, v.base.cost
    if mine is None or base is None:
        return "n/a"
    if v.post_hoc:  # a cost to a target chosen after the data: descriptive, as its time is
        return "post-hoc target: descriptive"
    if not _cost.one_currency(base, mine):
        return _apart(v, mine, base)
    key = "usd"
    x = v.cost_ratio.mean if v.cost_ratio is not None else _ratio(getattr(base, key), getattr(mine, key))
    if not x:
        return "n/a"
    capped = ("both" if mine.capped and base.capped else "mine" if mine.capped else "base" if base.capped
              else None)
    b = _bound(capped, x < 0.95)
    what = "cheaper" if key == "usd" else "fewer hours"
    if 0.95 <= x <= 1.05:
        return f"about the same ({b}{_factor(x)}{_range(v.cost_ratio)})"
    word = what if x >= 1 else "dearer" if key == "usd" else "more hours"
    return f"{b}{_factor(x if x >= 1 else 1 / x)} {word}" + _range(v.cost_ratio, x < 1)

