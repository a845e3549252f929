"""Recorded bandwidth traces: Mahimahi's format and a simple CSV, turned into a rate per window.

- Mahimahi (`.trace`, `.mahi` or any file of bare integers): one line per delivery opportunity of one
  1500-byte packet, the line being its time in ms since the trace began; several lines may share a
  time. The file loops with a period of its last timestamp (Mahimahi's own rule).
- CSV (`.csv`): `t_s,rate_bit_s` rows (a header line is allowed), the rate holding from each `t_s`
  until the next; it loops with a period of the last `t_s` plus the spacing of the last two rows.

`Trace.windows(resolution)` is the rate averaged over each window of one period: what the scheduler
sets tbf to (harness/distro_bench/net/netchange.py). A window with no opportunity gets FLOOR_BPS (tbf's floor: tc
cannot shape to zero); docs/network-changes.md says why tbf and not the delay line.
"""

from __future__ import annotations

import math
import stat
from dataclasses import dataclass
from pathlib import Path

from distro_bench.scenario.confined import ConfinedReadError, read_confined

MTU_BYTES = 1500
FLOOR_BPS = 8000  # the smallest rate the scenario's units and tbf accept
# Caps on what a trace may cost to read: a recorded trace of minutes is a few MB and ~10^5 lines (Mahimahi at
# 100Mbit/s for 2 minutes: 10^6); past these is a mistake (/dev/zero, a log file) that would eat memory and
# minutes at every validation and run.
MAX_TRACE_BYTES = 16 * 2**20
MAX_TRACE_ENTRIES = 1_000_000
MAX_PERIOD_S = 24 * 3600.0
MAX_WINDOWS = 1_000_000
MAX_RATE_BPS = 10**12  # the scenario's largest rate (harness/distro_bench/scenario/units.py)


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
        if n > MAX_WINDOWS:
            raise TraceError(f"trace {self.path}: its period {self.period_s:g} s at {resolution_s * 1e3:g} ms "
                             f"windows makes {n} windows; at most {MAX_WINDOWS} (a coarser trace_resolution or a "
                             "shorter trace)")
        if self.kind == "mahimahi":
            counts = [0] * n
            for t in self.opportunities:
                counts[min(n - 1, int(t / resolution_s))] += 1
            lens = [min(resolution_s, self.period_s - i * resolution_s) for i in range(n)]
            rates = [c * MTU_BYTES * 8 / w for c, w in zip(counts, lens)]
        else:
            rates, k = [], 0  # one sweep: window i starts in row k, rows never go back
            for i in range(n):
                a, b = i * resolution_s, min((i + 1) * resolution_s, self.period_s)
                while k + 1 < len(self.steps) and self.steps[k + 1][0] <= a:
                    k += 1
                rates.append(self._csv_mean(a, b, first=k))
        return [max(FLOOR_BPS, round(r)) for r in rates]

    def _csv_mean(self, a: float, b: float, first: int = 0) -> float:
        total = 0.0
        for i in range(first, len(self.steps)):
            t, r = self.steps[i]
            if t >= b:
                break
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


@dataclass(frozen=True)
class TraceFile:
    """A trace file's bytes as read once, with where it was (resolved) and its permission bits: what a run
    copies into its folder is these bytes, never the path read again (the file may have changed since)."""

    path: Path
    data: bytes
    mode: int

    @property
    def copy_mode(self) -> int:
        """The run folder's copy: 0644 if the source was readable by everyone, else 0600 (a private trace stays
        private, whatever the umask)."""
        return 0o644 if self.mode & stat.S_IROTH else 0o600


def open_trace(path: Path, folder: Path | None = None) -> TraceFile:
    """Read `path` once through scenario/confined.py (pass a resolved path: its last component must not be a
    symlink), a regular file within MAX_TRACE_BYTES lying in `folder` when given. TraceError naming the file."""
    try:
        f = read_confined(path, MAX_TRACE_BYTES, folder)
    except ConfinedReadError as e:
        if e.why == "missing":
            raise TraceError(f"trace {path}: no such file") from None
        if e.why == "unopenable":
            why = "a symlink (only resolved paths are opened)" if e.symlink else e.detail
            raise TraceError(f"trace {path}: cannot be opened ({why})") from None
        if e.why == "not_regular":
            raise TraceError(f"trace {path}: {e.detail}, not a regular file; a trace is a Mahimahi or CSV file") from None
        if e.why == "outside":
            raise TraceError(f"trace {path}: the file opened is {e.detail}, outside {folder} (a folder on the way "
                             "changed while it was opened)") from None
        size = f"{e.detail} bytes, " if e.detail is not None else ""
        raise TraceError(f"trace {path}: {size}above the cap of {MAX_TRACE_BYTES} bytes "
                         f"({MAX_TRACE_BYTES // 2**20} MiB) for a trace file") from None
    return TraceFile(path=f.path, data=f.data, mode=f.mode)


def read_trace_bytes(path: Path) -> bytes:
    """The bytes of the regular file at `path` (resolved first), within MAX_TRACE_BYTES (open_trace)."""
    try:
        full = Path(path).resolve()
    except (OSError, RuntimeError, ValueError) as e:  # a symlink loop (RuntimeError before 3.13), a NUL
        raise TraceError(f"trace {path!r}: cannot be resolved ({e})") from None
    return open_trace(full).data


def load_trace(path: str | Path) -> Trace:
    """Read a Mahimahi or CSV trace; TraceError naming the file, line and what is valid. Errors never quote
    the file's contents (a trace path may name a file the user should not see echoed, such as /etc/shadow)."""
    path = Path(path)
    return parse_trace(path, read_trace_bytes(path))


def parse_trace(path: Path, data: bytes) -> Trace:
    """A trace from bytes already read (open_trace); `path` names it in errors and picks the format."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise TraceError(f"trace {path}: not UTF-8 text; a trace is a Mahimahi or CSV text file") from None
    lines = [(i + 1, ln.strip()) for i, ln in enumerate(text.splitlines()) if ln.strip() and not ln.startswith("#")]
    if not lines:
        raise TraceError(f"trace {path}: empty")
    if len(lines) > MAX_TRACE_ENTRIES:
        raise TraceError(f"trace {path}: {len(lines)} entries, above the cap of {MAX_TRACE_ENTRIES} per trace")
    if path.suffix.lower() == ".csv" or "," in lines[0][1]:
        return _load_csv(path, lines)
    return _load_mahimahi(path, lines)


def _load_mahimahi(path: Path, lines) -> Trace:
    times: list[int] = []
    for no, ln in lines:
        try:
            ms = int(ln) if len(ln) <= 20 else None  # 20 digits: past any period we accept
        except ValueError:
            ms = None
        if ms is None:
            raise _fail(path, f"line {no}", "not a whole number of milliseconds (Mahimahi format: one delivery "
                                           "opportunity per line)")
        if ms < 0 or (times and ms < times[-1]):
            raise _fail(path, f"line {no}", "a time that is negative or earlier than the line before; times must "
                                           "not decrease")
        times.append(ms)
    if times[-1] <= 0:
        raise _fail(path, "last line", "the trace's period (its last time) must be more than 0 ms")
    if times[-1] / 1000.0 > MAX_PERIOD_S:
        raise _fail(path, "last line", f"a period of {times[-1] / 1000.0:g} s; at most {MAX_PERIOD_S:g} s (24 h)")
    return Trace(path=str(path), kind="mahimahi", period_s=times[-1] / 1000.0,
                 opportunities=tuple(t / 1000.0 for t in times))


def _load_csv(path: Path, lines) -> Trace:
    steps: list[tuple[float, float]] = []
    for k, (no, ln) in enumerate(lines):
        parts = [p.strip() for p in ln.split(",")]
        if k == 0 and parts and not _is_number(parts[0]):
            if parts != ["t_s", "rate_bit_s"]:
                raise _fail(path, f"line {no}", "not the header 't_s,rate_bit_s' nor a row of two numbers")
            continue
        if len(parts) != 2 or not all(_is_number(p) for p in parts):
            raise _fail(path, f"line {no}", "expected two numbers: t_s,rate_bit_s")
        t, r = float(parts[0]), float(parts[1])
        if r < 0 or t < 0 or (steps and t <= steps[-1][0]):
            raise _fail(path, f"line {no}", "times must increase from 0 and rates must be >= 0")
        if t > MAX_PERIOD_S or r > MAX_RATE_BPS:
            raise _fail(path, f"line {no}", f"t_s at most {MAX_PERIOD_S:g} (24 h) and rate_bit_s at most "
                                           f"{MAX_RATE_BPS:g} (1Tbit)")
        steps.append((t, r))
    if len(steps) < 2:
        raise _fail(path, "rows", "at least two rows are needed (the period is the last time plus the last spacing)")
    if steps[0][0] != 0:
        raise _fail(path, "first row", f"starts at {steps[0][0]} s; a trace starts at t_s 0")
    period = steps[-1][0] + (steps[-1][0] - steps[-2][0])
    return Trace(path=str(path), kind="csv", period_s=period, steps=tuple(steps))


def _is_number(s: str) -> bool:
    try:
        return math.isfinite(float(s))  # 'nan', 'inf' and '1e400' are not rates or times
    except ValueError:
        return False
