"""The churn goodput study (issue 29): goodput and time to target of each method as workers fail more often.

    python benchmarks/churn_goodput.py [--scenario scenarios/churn-home-dsl.yaml] [--rates 0,2,6]
        [--backend netns] [--out results/churn]
    python benchmarks/churn_goodput.py --sweep SWEEP_DIR       # only the table of a finished sweep

One `distro-bench sweep` over `churn.failures_per_minute` (every seed of every method meets the same
failures at the same training seconds), then a table per failure rate and method: goodput (tokens that
reached the shared model per training second), worker availability, local steps lost with leavers, time to
the scenario's fixed target and validation loss at equal time, each the mean over seeds with its 95%
interval, and how many seeds reached the target.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))

from distro_bench.errors import InputError  # after the path insert: runs from a checkout
from distro_bench.studies.sweep import PointResult, load_sweep

RATE_PATH = "churn.failures_per_minute"
# (summary key, column heading, number format)
COLUMNS = [("goodput_tokens_per_s", "goodput tok/s", ",.0f"), ("worker_availability", "availability", ".3f"),
           ("lost_steps", "lost steps", ".1f"), ("time_to_target_s", "time to target s", ".1f"),
           ("val_loss_at_equal_time", "val loss at equal time", ".3f")]


def _cli(args: list[str]) -> Path:
    """Run `python -m distro_bench ARGS`; the folder it names on its last line."""
    done = subprocess.run([sys.executable, "-m", "distro_bench", *args], capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: a check failed; the folder stands
        raise SystemExit(f"harness {' '.join(args[:2])} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1].strip())


def parse_rates(text: str) -> list[float]:
    """`--rates` as failures per minute per worker: comma-separated numbers, each >= 0."""
    try:
        rates = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        rates = []
    if not rates or any(r < 0 for r in rates):
        raise InputError(f"--rates: {text!r} is not a list of failure rates; valid: numbers >= 0, e.g. 0,2,6")
    return rates


def _with_ci(figs: dict, key: str, fmt: str) -> str:
    v, ci = figs.get(key), (figs.get("ci95") or {}).get(key)
    if v is None:
        return "not reached" if key == "time_to_target_s" else "n/a"
    text = format(v, fmt)
    return f"{text} [{format(ci[0], fmt)}, {format(ci[1], fmt)}]" if ci else text


def _rate(point: PointResult) -> str:
    return point.point.texts.get(RATE_PATH, point.point.label)


def table(points: list[PointResult], target: float | None) -> str:
    """The markdown table: one row per failure rate and method, in sweep order."""
    head = ["failures/min", "method", *(c[1] for c in COLUMNS), "target reached"]
    lines = [f"target val loss {target:g}" if target is not None else "no target val loss (checks.target_val_loss)",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for pt in points:
        if pt.state != "complete" or not pt.optimizers:
            lines.append(f"| {_rate(pt)} | {pt.state}: {pt.reason or 'no figures'} |" + " |" * (len(head) - 2))
            continue
        for name, figs in pt.optimizers.items():
            cells = [_with_ci(figs, key, fmt) for key, _, fmt in COLUMNS]
            reached = f"{figs.get('target_reached') if figs.get('target_reached') is not None else '?'}/{figs.get('seeds')}"
            lines.append("| " + " | ".join([_rate(pt), name, *cells, reached]) + " |")
    return "\n".join(lines)


def sweep_table(sweep_dir: Path) -> str:
    res, scenario = load_sweep(sweep_dir)
    return table(res.points, scenario.checks.target_val_loss)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--scenario", default="scenarios/churn-home-dsl.yaml")
    p.add_argument("--rates", default="0,2,6", help="failures per minute per worker, comma-separated")
    p.add_argument("--backend", default="netns")
    p.add_argument("--out", type=Path, default=Path("results/churn"))
    p.add_argument("--sweep", type=Path, default=None, help="print the table of this finished sweep and exit")
    args = p.parse_args(argv)
    if args.sweep:
        print(sweep_table(args.sweep))
        return 0
    rates = ",".join(f"{r:g}" for r in parse_rates(args.rates))
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"sweep {RATE_PATH}={rates} ({args.scenario}); load average {os.getloadavg()}", flush=True)
    sweep_dir = _cli(["sweep", args.scenario, "--set", f"{RATE_PATH}={rates}", "--backend", args.backend,
                      "--out", str(args.out)])
    print(f"sweep {sweep_dir}; load average {os.getloadavg()}")
    print(sweep_table(sweep_dir))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except InputError as e:
        sys.exit(f"error: {e}")
