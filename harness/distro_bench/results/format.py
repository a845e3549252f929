"""Numbers for people: short cells with their unit (`3.02 s`, `565x`, `4.26 kB`), readable at 80 columns."""

from __future__ import annotations

import math


def _bad(v) -> bool:
    # Callers test `v is None or _bad(v)`: the type checker then knows v is a number after it.
    return v is None or (isinstance(v, float) and math.isnan(v))


def fmt_seconds(v: float | None) -> str:
    if v is None or _bad(v):
        return "n/a"
    if v == 0:
        return "0 s"
    if abs(v) < 1e-3:
        return f"{v * 1e6:.3g} us"
    if abs(v) < 1:
        return f"{v * 1e3:.3g} ms"
    return f"{v:.3g} s" if abs(v) < 1000 else f"{v:,.0f} s"


def fmt_bytes(v: float | None) -> str:
    """Decimal units, as rates and the DESIGN's MB/step are: 4260 -> `4.26 kB`."""
    if v is None or _bad(v):
        return "n/a"
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.0f} B"


def fmt_times(v: float | None) -> str:
    """A ratio: `565x`, `8.0x`, `0.93x`."""
    if v is None or _bad(v):
        return "n/a"
    if v >= 100:
        return f"{v:,.0f}x"
    return f"{v:.1f}x" if v >= 1 else f"{v:.2f}x"


def fmt_num(v: float | None, spec: str = ".4g") -> str:
    return "n/a" if _bad(v) else format(v, spec)


def fmt_rate(bps: float | None) -> str:
    if bps is None or _bad(bps):
        return "n/a"
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.3g} {unit}"
    return f"{bps:.0f} bit/s"
