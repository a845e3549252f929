"""The methods shoot-out: every method of a scenario at its own tuned learning rate, at an equal time budget,
ranked by time to target loss.

    python benchmarks/methods_shootout.py [--scenario scenarios/methods-home-dsl.yaml] [--lrs 1e-3,3e-3,1e-2]
        [--sweep-budget 15s] [--budget 25s] [--seeds 3] [--backend netns] [--out results/shootout]
        [--only muloco,sparta]                                   # tune only these; the others keep their lr
    python benchmarks/methods_shootout.py --run RUN_DIR          # only the ranking table of a finished run

1. Tuning: for each optimizer, a one-method copy of the scenario is swept over `--lrs` with
   `distro-bench sweep --set optimizers.<name>.lr=... --time-budget <sweep budget> --pick best` (one seed: a
   short, coarse sweep). Each method gets the lr with the lowest tuning-split loss (what `--pick best` minimises: held-out
   text disjoint from the validation split, docs/sweeps.md) at the end of that budget. `--only` tunes only the
   optimizers it names; the others keep the scenario's lr. Each lr's tuning loss, val loss and steps are printed.
2. The shoot-out: the scenario with every method at its picked lr, `--budget` seconds of training each,
   `--seeds` seeds (same data order per seed across methods), `distro-bench run`.
3. The table: methods ranked by time to the run's target (the worst method's best validation loss, so all
   reach it; 95% intervals over seeds), validation loss at equal time, payload bytes per worker and step.

Everything goes through the CLI (no second training path); `--skip-sweep` takes the scenario's lrs as they are.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))

from distro_bench.errors import InputError  # after the path insert: runs from a checkout


def _cli(args: list[str]) -> Path:
    """Run `python -m distro_bench ARGS`; the folder it names on its last line."""
    done = subprocess.run([sys.executable, "-m", "distro_bench", *args], capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: a check failed; the folder stands
        raise SystemExit(f"harness {' '.join(args[:2])} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1].strip())


def only_names(doc: dict, only: str | None) -> list[str]:
    """The optimizers to tune: all of the scenario's, or those `--only` names (each must be one of them)."""
    names = list(doc["optimizers"])
    if only is None:
        return names
    wanted = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in names]
    if unknown or not wanted:
        raise InputError(f"--only: {only!r} names no optimizer or unknown ones {unknown}; valid: {', '.join(names)}")
    return wanted


def lr_figures(sweep_dir: Path, name: str) -> str:
    """Each lr point's tuning-split loss (what --pick best minimises), val loss and steps, from sweep.json."""
    try:
        points = json.loads((sweep_dir / "sweep.json").read_text())["points"]
    except (OSError, ValueError, KeyError):
        return "no sweep.json"
    parts = []
    for pt in points:
        lr = next(iter(pt.get("texts", {}).values()), "?")
        figs = (pt.get("optimizers") or {}).get(name) or {}
        if pt.get("state") != "complete" or not figs:
            parts.append(f"{lr}: {pt.get('state')} ({pt.get('reason') or 'no figures'})")
            continue
        tune_loss, val = figs.get("final_tune_loss"), figs.get("final_val_loss")
        parts.append(f"{lr}: tune {_num(tune_loss)}, val {_num(val)}, {figs.get('steps')} steps")
    return "; ".join(parts)


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def tune(doc: dict, lrs: str, budget: str, backend: str, out: Path, names: list[str]) -> dict[str, float]:
    """Each named optimizer's best lr over `lrs` at `budget` (one one-method sweep each)."""
    picked = {}
    for name in names:
        cfg = doc["optimizers"][name]
        one = {**doc, "optimizers": {name: cfg}, "baseline": name}
        one.pop("checks", None)
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=out, delete=False) as f:
            yaml.safe_dump(one, f, sort_keys=False)
        sweep_dir = _cli(["sweep", f.name, "--set", f"optimizers.{name}.lr={lrs}", "--time-budget", budget,
                          "--repeat", "1", "--allow-few-seeds", "--backend", backend, "--pick", "best", "--out", str(out / "sweeps")])
        best = yaml.safe_load((sweep_dir / "best.yaml").read_text()) if (sweep_dir / "best.yaml").exists() else None
        lr = ((best or {}).get("optimizers", {}).get(name) or {}).get("lr", cfg.get("lr"))
        picked[name] = float(lr)
        print(f"  {name}: lr {picked[name]:g}  ({sweep_dir}; uptime {os.getloadavg()[0]:.2f})", flush=True)
        print(f"    {lr_figures(sweep_dir, name)}", flush=True)
    return picked


def _ci(s: dict, key: str, fmt: str) -> str:
    v, ci = s.get(key), (s.get("ci95") or {}).get(key)
    if v is None:
        return "not reached"
    text = format(v, fmt)
    return f"{text} [{format(ci[0], fmt)}, {format(ci[1], fmt)}]" if ci else text


def _goodput(s: dict) -> str:
    """Useful model FLOP/s in all (issue 37: the same measure for every method), with the share of peak where
    the workers ran on a profile's GPU; "-" for a run from before it."""
    v, ci = s.get("goodput_model_flops_per_s"), (s.get("ci95") or {}).get("goodput_model_flops_per_s")
    if v is None:
        return "-"
    text = f"{v / 1e6:,.0f}" + (f" [{ci[0] / 1e6:,.0f}, {ci[1] / 1e6:,.0f}]" if ci else "")
    return text + (f" ({s['goodput_of_peak']:.1%} of peak)" if s.get("goodput_of_peak") is not None else "")


def table(run_dir: Path) -> str:
    from distro_bench.api import load_run

    run = load_run(run_dir)
    summ = run.summary.model_dump() if hasattr(run.summary, "model_dump") else dict(run.summary)
    opts = summ.get("optimizers", summ)
    target = (summ.get("target") or {}).get("val_loss")
    if target is None:  # a summary from before the `target` key: the same rule, from the metrics
        from distro_bench.results.metrics import comparison_target

        target = comparison_target(run.metrics)["val_loss"]

    def key(item):
        t = item[1].get("time_to_target_s")
        return (t is None, t if t is not None else math.inf, item[1].get("val_loss_at_equal_time") or math.inf)

    lrs = {n: c.get("lr") for n, c in (run.scenario.get("optimizers") or {}).items()}
    lines = [f"target val loss {target:.3f}" if target else "no common target",
             ("| rank | method | lr | time to target s | val loss at equal time | payload B/step (tx+rx) | steps "
              "| seeds reaching | goodput MFLOP/s |"),
             "|---:|---|---:|---|---|---:|---:|---:|---|"]
    for i, (name, s) in enumerate(sorted(opts.items(), key=key), 1):
        payload = (s.get("payload_tx_bytes_per_step") or 0) + (s.get("payload_rx_bytes_per_step") or 0)
        lines.append(f"| {i} | {name} | {lrs.get(name, '')} | {_ci(s, 'time_to_target_s', '.1f')} | "
                     f"{_ci(s, 'val_loss_at_equal_time', '.3f')} | {payload:,.0f} | {s.get('steps')} | "
                     f"{s.get('target_reached')}/{s.get('seeds')} | {_goodput(s)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scenario", default="scenarios/methods-home-dsl.yaml")
    p.add_argument("--lrs", default="1e-3,3e-3,1e-2")
    p.add_argument("--sweep-budget", default="15s")
    p.add_argument("--budget", default="25s")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--backend", default="netns")
    p.add_argument("--out", type=Path, default=Path("results/shootout"))
    p.add_argument("--skip-sweep", action="store_true")
    p.add_argument("--only", default=None, help="NAME[,NAME...]: tune only these optimizers; the others keep their lr")
    p.add_argument("--run", type=Path, default=None, help="print the table of this finished run and exit")
    args = p.parse_args(argv)
    if args.run:
        print(table(args.run))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    doc = yaml.safe_load(Path(args.scenario).read_text())
    print(f"load average {os.getloadavg()}", flush=True)
    names = only_names(doc, args.only)
    if not args.skip_sweep:
        print(f"tuning {', '.join(names)}: lr in {args.lrs}, {args.sweep_budget} each, one seed", flush=True)
        for name, lr in tune(doc, args.lrs, args.sweep_budget, args.backend, args.out, names).items():
            doc["optimizers"][name]["lr"] = lr
    tuned = args.out / "methods-tuned.yaml"
    tuned.write_text(yaml.safe_dump(doc, sort_keys=False))
    print(f"shoot-out: {args.budget} per method, {args.seeds} seeds ({tuned})", flush=True)
    run_dir = _cli(["run", str(tuned), "--backend", args.backend, "--time-budget", args.budget,
                    "--repeat", str(args.seeds), "--seed", "0", "--out", str(args.out)])
    print(f"run {run_dir}; load average {os.getloadavg()}")
    print(table(run_dir))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except InputError as e:
        sys.exit(f"error: {e}")
