"""Recorded bandwidth traces: Mahimahi's format and a simple CSV, turned into a rate per window.

- Mahimahi (`.trace`, `.mahi` or any file of bare integers): one line per delivery opportunity of one
  1500-byte packet, the line being its time in ms since the trace began; several lines may share a
  time. The file loops with a period of its last timestamp (Mahimahi's own rule).
- CSV (`.csv`): `t_s,rate_bit_s` rows (a header line is allowed), the rate holding from each `t_s`
  until the next; it loops with a period of the last `t_s` plus the spacing of the last two rows.

`Trace.windows(resolution)` is the rate averaged over each window of one period: what the scheduler
sets tbf to (harness/netchange.py). A window with no opportunity gets FLOOR_BPS (tbf's floor: tc
cannot shape to zero); docs/network-changes.md says why tbf and not the delay line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

MTU_BYTES = 1500
FLOOR_BPS = 8000  # the smallest rate the scenario's units and tbf accept


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file, the line and what is valid."""


@dataclass(frozen=True)
class Trace:
    path: str
    kind: str  # "mahimahi" | "csv"
    period_s: float
    # Mahimahi: opportunity times (s); CSV: (t_s, rate) steps.
    opportunities: tuple[float, ...] = ()
    steps: tuple[tuple[float, float], ...] = ()

    def windows(self, resolution_s: float) -> list[int]:
        """The rate (bit/s) averaged over each `resolution_s` window of one period (the last window may be
        shorter), each at least FLOOR_BPS."""
        n = max(1, math.ceil(self.period_s / resolution_s - 1e-9))
        if self.kind == "mahimahi":
            counts = [0] * n
            for t in self.opportunities:
                counts[min(n - 1, int(t / resolution_s))] += 1
            lens = [min(resolution_s, self.period_s - i * resolution_s) for i in range(n)]
            rates = [c * MTU_BYTES * 8 / w for c, w in zip(counts, lens)]
        else:
            rates = []
            for i in range(n):
                a, b = i * resolution_s, min((i + 1) * resolution_s, self.period_s)
                rates.append(self._csv_mean(a, b))
        return [max(FLOOR_BPS, int(round(r))) for r in rates]

    def _csv_mean(self, a: float, b: float) -> float:
        total = 0.0
        for i, (t, r) in enumerate(self.steps):
            end = self.steps[i + 1][0] if i + 1 < len(self.steps) else self.period_s
            lo, hi = max(a, t), min(b, end)
            if hi > lo:
                total += r * (hi - lo)
        return total / (b - a) if b > a else 0.0

    def mean_bps(self) -> float:
        if self.kind == "mahimahi":
            return len(self.opportunities) * MTU_BYTES * 8 / self.period_s
        return self._csv_mean(0.0, self.period_s)


def _fail(path: Path, where: str, what: str) -> TraceError:
    return TraceError(f"trace {path}: {where}: {what}")


def load_trace(path: str | Path) -> Trace:
    """Read a Mahimahi or CSV trace; TraceError naming the file, line and what is valid."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceError(f"trace {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"trace {path}: cannot be read ({e})") from None
    lines = [(i + 1, ln.strip()) for i, ln in enumerate(text.splitlines()) if ln.strip() and not ln.startswith("#")]
    if not lines:
        raise TraceError(f"trace {path}: empty")
    if path.suffix.lower() == ".csv" or "," in lines[0][1]:
        return _load_csv(path, lines)
    return _load_mahimahi(path, lines)


def _load_mahimahi(path: Path, lines) -> Trace:
    times = []
    for no, ln in lines:
        try:
            ms = int(ln)
        except ValueError:
            raise _fail(path, f"line {no}", f"{ln!r} is not a whole number of milliseconds (Mahimahi format: "
                                           "one delivery opportunity per line)") from None
        if ms < 0 or (times and ms < times[-1]):
            raise _fail(path, f"line {no}", f"{ms} ms is negative or earlier than the line before; times must not decrease")
        times.append(ms)
    if times[-1] <= 0:
        raise _fail(path, "last line", "the trace's period (its last time) must be more than 0 ms")
    return Trace(path=str(path), kind="mahimahi", period_s=times[-1] / 1000.0,
                 opportunities=tuple(t / 1000.0 for t in times))


def _load_csv(path: Path, lines) -> Trace:
    steps = []
    for k, (no, ln) in enumerate(lines):
        parts = [p.strip() for p in ln.split(",")]
        if k == 0 and parts and not _is_number(parts[0]):
            if parts != ["t_s", "rate_bit_s"]:
                raise _fail(path, f"line {no}", f"header {ln!r}; expected 't_s,rate_bit_s'")
            continue
        if len(parts) != 2 or not all(_is_number(p) for p in parts):
            raise _fail(path, f"line {no}", f"{ln!r}; expected two numbers: t_s,rate_bit_s")
        t, r = float(parts[0]), float(parts[1])
        if r < 0 or t < 0 or (steps and t <= steps[-1][0]):
            raise _fail(path, f"line {no}", "times must increase from 0 and rates must be >= 0")
        steps.append((t, r))
    if len(steps) < 2:
        raise _fail(path, "rows", "at least two rows are needed (the period is the last time plus the last spacing)")
    if steps[0][0] != 0:
        raise _fail(path, "first row", f"starts at {steps[0][0]} s; a trace starts at t_s 0")
    period = steps[-1][0] + (steps[-1][0] - steps[-2][0])
    return Trace(path=str(path), kind="csv", period_s=period, steps=tuple(steps))


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False
