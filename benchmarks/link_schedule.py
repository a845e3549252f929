"""Does a changing link follow its schedule and its trace? (issue 18) Prints figures; asserts nothing.

1. Schedule: one node's uplink 10 Mbit -> 1 Mbit at T -> 10 Mbit at 2T (T = 30 s by default), saturated by
   one TCP stream; per 1 s window the wire rate (egress tx bytes) and goodput against the rate asked for,
   outside the windows that straddle a change, and how late each change was applied.
2. Trace: one node's uplink following scenarios/traces/lte-drive.mahi (100 ms tbf steps) for 60 s; the
   correlation of the wire rate per 1 s with the trace's, and the totals.

    python benchmarks/link_schedule.py [--period 30] [--trace-seconds 60] [--link-engine auto]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from distro_bench.backends.base import BackendOptions
from distro_bench.backends.netns import NetnsBackend
from distro_bench.net.schedtest import measure_schedule
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.scenario.timeline import compile_timeline

REPO = Path(__file__).resolve().parents[1]


def scenario(link: dict):
    return scenario_from_dict({
        "name": "link-schedule-bench", "workers": [{"count": 2, "hardware": "host", "link": "l"}],
        "links": {"l": link}, "model": {"preset": "tiny"}, "train": {"steps": 1, "eval_every": 1},
        "optimizers": {"adamw": {"lr": 1e-3}}}, base_dir=REPO / "scenarios")


def run(link: dict, seconds: float, engine: str):
    s = scenario(link)
    with tempfile.TemporaryDirectory() as tmp:
        with NetnsBackend(s, Path(tmp), BackendOptions(link_engine=engine)) as backend:
            return measure_schedule(backend, compile_timeline(s), rank=0, direction="up", seconds=seconds)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--period", type=float, default=30.0, help="seconds between the changes (T)")
    p.add_argument("--trace-seconds", type=float, default=60.0)
    p.add_argument("--link-engine", default="auto")
    args = p.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} (machine shared; figures are as measured)")

    T = args.period
    m = run({"up": "10Mbit", "down": "50Mbit",
             "schedule": [{"at": f"{T:g}s", "up": "1Mbit"}, {"at": f"{2 * T:g}s", "up": "10Mbit"}]}, 3 * T, args.link_engine)
    print(f"\n1. schedule: up 10Mbit -> 1Mbit at {T:g}s -> 10Mbit at {2 * T:g}s, {len(m.wire_bps)} windows of 1 s")
    print(f"{'window':>6} {'asked Mbit/s':>12} {'wire Mbit/s':>11} {'goodput':>8}")
    for i, (e, w, g) in enumerate(zip(m.expected_bps, m.wire_bps, m.goodput_bps)):
        if i % 5 == 0 or any(abs(i - k * T) <= 2 for k in (1, 2)):
            print(f"{i:>6} {e / 1e6:>12.2f} {w / 1e6:>11.2f} {g / 1e6:>8.2f}")
    ratios = m.ratios()
    for name, lo, hi in (("10Mbit before", 0, T), ("1Mbit", T, 2 * T), ("10Mbit after", 2 * T, 3 * T)):
        sel = [r for r in ratios if lo <= r[0] < hi]
        if sel:
            wr, gr = [r[1] for r in sel], [r[2] for r in sel]
            print(f"  {name:<14} wire/asked median {statistics.median(wr):.3f} (min {min(wr):.3f}, max {max(wr):.3f}); "
                  f"goodput/asked median {statistics.median(gr):.3f} (min {min(gr):.3f}); windows within 10% (wire): "
                  f"{sum(abs(x - 1) <= 0.10 for x in wr)}/{len(wr)}")
    late = m.lateness_s()
    print(f"  changes applied late by (s): {', '.join(f'{x:.3f}' for x in late)} (max {max(late):.3f})")

    m = run({"up_trace": "traces/lte-drive.mahi", "down": "50Mbit"}, args.trace_seconds, args.link_engine)
    late = m.lateness_s()
    print(f"\n2. trace lte-drive.mahi on the uplink, {len(m.wire_bps)} windows of 1 s (first left out)")
    print(f"  correlation of wire bit/s with the trace's: r = {m.correlation():.3f}")
    good_total = sum(m.goodput_bps[1:]) / sum(m.expected_bps[1:])
    print(f"  total wire / trace = {m.total_ratio():.3f}; goodput / trace = {good_total:.3f} "
          "(goodput counts TCP payload, ~95% of frames)")
    print(f"  {len(late)} rate changes; applied late by median {statistics.median(late) * 1e3:.0f} ms, "
          f"max {max(late) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
