"""The methods shoot-out: every method of a scenario at its own tuned learning rate, at an equal time budget,
ranked by time to target loss, each compared with the baseline and with the best, Holm-corrected.

    python benchmarks/methods_shootout.py [--scenario scenarios/methods-home-dsl.yaml] [--lrs 1e-3,3e-3,1e-2]
        [--sweep-budget BUDGET] [--budget 25s] [--seeds 5] [--first-seed 1] [--tune-seed 10] [--widen 0]
        [--backend netns] [--out results/shootout] [--keep DIR]
        [--only muloco,sparta]                                   # tune only these; the others keep their lr
        [--tune-only]                                            # write OUT/methods-tuned.yaml and stop
    python benchmarks/methods_shootout.py --run RUN_DIR          # only the table of a finished run

1. Tuning, on a seed the shoot-out does not use (`--tune-seed`): for each optimizer, a one-method copy of the
   scenario is swept over `--lrs` with `distro-bench sweep --set optimizers.<name>.lr=... --time-budget <sweep
   budget> --pick best` (one seed: a short, coarse sweep). Each method gets the lr with the lowest tuning-split
   loss (held-out text disjoint from the validation split, docs/sweeps.md) at the end of that budget. A pick
   on the grid's edge is swept again against the next rate beyond it (x3), at most `--widen` times. The
   defaults give every method the same tuning budget (issue 49): as many rates, each at the reported runs'
   budget, no widening; a pick on an edge is printed as such.
   `--only` tunes only the optimizers it names; the others keep the scenario's lr.
2. The shoot-out: the scenario with every method at its picked lr, `--budget` seconds of training each,
   `--seeds` seeds from `--first-seed` (same data order per seed across methods; the methods' order rotates
   per seed), `distro-bench run`. The scenario's `checks.target_val_loss` is the target (set before the run;
   without one the target is post-hoc and the table says so).
3. The table: the ranking of `distro-bench run` (restricted mean time to target, intervals within the
   horizon), and per method its paired ratio of time to target and difference of val loss at equal time
   against the baseline and against the best by mean, each with its 95% interval and a Holm-adjusted p over
   that column (report/shootout.py); then the methods not distinguishable from the best by each figure.
   `--keep DIR` copies the run's summary.json (per-seed figures), scenario.yaml and environment.json there.

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


def _sweep(doc: dict, name: str, lrs: list[float], budget: str, backend: str, out: Path, seed: int,
           budget_flag: str = "--time-budget") -> tuple[float, Path]:
    """One one-method sweep of `lrs` on one seed at `budget_flag budget` (a time budget, or `--tokens N`);
    (the picked lr, the sweep folder)."""
    one = {**doc, "optimizers": {name: doc["optimizers"][name]}, "baseline": name,
           "train": {**{k: v for k, v in doc["train"].items() if k != "seeds"}, "seed": seed}}
    one.pop("checks", None)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=out, delete=False) as f:
        yaml.safe_dump(one, f, sort_keys=False)
    try:
        sweep_dir = _cli(["sweep", f.name, "--set", f"optimizers.{name}.lr={','.join(f'{x:g}' for x in lrs)}",
                          budget_flag, budget, "--repeat", "1", "--allow-few-seeds", "--backend", backend,
                          "--pick", "best", "--out", str(out / "sweeps")])
    finally:
        Path(f.name).unlink(missing_ok=True)  # the sweep folder keeps its own copy (scenario.yaml)
    best = yaml.safe_load((sweep_dir / "best.yaml").read_text()) if (sweep_dir / "best.yaml").exists() else None
    lr = ((best or {}).get("optimizers", {}).get(name) or {}).get("lr", doc["optimizers"][name].get("lr"))
    return float(lr), sweep_dir


def widen(grid: list[float], pick: float, step: float = 3.0) -> float | None:
    """The next lr beyond the grid's edge when the pick sits on it (a pick at an edge may be short of the best
    rate); None when the pick is inside the grid."""
    lo, hi = min(grid), max(grid)
    if math.isclose(pick, hi):
        return hi * step
    if math.isclose(pick, lo):
        return lo / step
    return None


def tune(doc: dict, lrs: str, budget: str, backend: str, out: Path, names: list[str], seed: int,
         max_widen: int = 2, grids: dict[str, list[float]] | None = None,
         budget_flag: str = "--time-budget") -> dict[str, float]:
    """Each named optimizer's best lr over `lrs` (or its own grid in `grids`) at `budget` on tuning seed `seed`,
    the grid widened by one rate (x3) beyond its edge while the pick sits there, at most `max_widen` times."""
    picked = {}
    for name in names:
        grid = list(grids[name]) if grids else [float(x) for x in lrs.split(",")]
        lr, sweep_dir = _sweep(doc, name, grid, budget, backend, out, seed, budget_flag)
        print(f"  {name}: lr {lr:g} of {grid}  ({sweep_dir}; load {os.getloadavg()[0]:.2f})", flush=True)
        print(f"    {lr_figures(sweep_dir, name)}", flush=True)
        for _ in range(max_widen):
            nxt = widen(grid, lr)
            if nxt is None:
                break
            lr, sweep_dir = _sweep(doc, name, [lr, nxt], budget, backend, out, seed, budget_flag)
            grid.append(nxt)
            print(f"  {name}: pick at the grid's edge; {nxt:g} tried, lr {lr:g}  ({sweep_dir})", flush=True)
            print(f"    {lr_figures(sweep_dir, name)}", flush=True)
        picked[name] = lr
    return picked


def _goodput(s: dict) -> str:
    """Useful model FLOP/s in all (issue 37: the same measure for every method), with the share of peak where
    the workers ran on a profile's GPU; "-" for a run from before it."""
    v, ci = s.get("goodput_model_flops_per_s"), (s.get("ci95") or {}).get("goodput_model_flops_per_s")
    if v is None:
        return "-"
    text = f"{v / 1e6:,.0f}" + (f" [{ci[0] / 1e6:,.0f}, {ci[1] / 1e6:,.0f}]" if ci else "")
    return text + (f" ({s['goodput_of_peak']:.1%} of peak)" if s.get("goodput_of_peak") is not None else "")


def _versus(fams, figure: str, name: str, which: str) -> str:
    """One cell: the paired ratio (time) or difference (loss) against the baseline or the best, its 95%
    interval and Holm-adjusted p; '*' where the family-wise claim holds."""
    fc = fams.get(figure)
    if fc is None:
        return "-"
    if which == "baseline":
        fam = fc.vs_baseline
        if name == fam.reference:
            return "(ref)"
        c, log = fam.comparisons.get(name), fam.log
    else:  # the pair (name, best by mean) of the all-pairs family, Holm over every pair
        if name == fc.best:
            return "(ref)"
        c, log = fc.pairs.versus(name, fc.best), fc.pairs.log
    if c is None:
        return "n/a (left out)" if name in fc.left_out else "-"
    if c.interval is None or (math.isnan(c.p_holm) and not c.descriptive):
        return "n/a"
    iv, fmt = c.interval, (".2f" if log else "+.3f")
    unit = "x" if log else ""
    return (f"{format(iv.mean, fmt)}{unit} [{format(iv.lo, fmt)}, {format(iv.hi, fmt)}] "
            f"{c.p_text}")


def table(run_dir: Path) -> str:
    """The ranking (report/verdict.ranking: restricted times to target, intervals within [0, the horizon]),
    each method against the baseline and the best (Holm-corrected per family, report/shootout.py), and the
    set not distinguishable from the best by each figure."""
    from distro_bench.report.shootout import LOSS, TIME, comparisons
    from distro_bench.report.verdict import is_post_hoc, ranking
    from distro_bench.results.summary import migrate

    # summary.json and scenario.yaml are enough (what `--keep` copies; metrics.parquet is megabytes).
    try:
        summ = migrate(json.loads((run_dir / "summary.json").read_text()))
        scenario = yaml.safe_load((run_dir / "scenario.yaml").read_text()) or {}
    except (OSError, ValueError) as e:
        raise InputError(f"--run: {run_dir} has no readable summary.json and scenario.yaml ({e})") from None
    opts = summ.get("optimizers", summ)
    target = (summ.get("target") or {}).get("val_loss")
    if target is None:  # a summary from before the `target` key: the same rule, from the metrics
        from distro_bench.api import load_run
        from distro_bench.results.metrics import comparison_target

        target = comparison_target(load_run(run_dir).metrics)["val_loss"]
    fams = comparisons(summ)
    base = summ.get("baseline") or "baseline"
    lrs = {n: c.get("lr") for n, c in (scenario.get("optimizers") or {}).items()}
    seeds = max((len(s.get("per_seed") or {}) for s in opts.values()), default=0)
    lines = [(f"target val loss {target:.3f}" + (" (post-hoc, descriptive: chosen after the data)" if is_post_hoc(summ)
                                                  else "")) if target else "no common target",
             (f"{seeds} seeds; paired by seed, 95% interval; against {base}: Holm-adjusted p over that column's "
              "comparisons; against the best by mean: the pair's Holm-adjusted p over ALL pairs of methods (the "
              "family any order or 'best' is claimed from); * = distinct at family-wise 5%; ratios are geometric "
              "means of per-seed ratios, times arithmetic restricted means"),
             ("| rank | method | lr | time to target s | time vs " + base + " | time vs best | val loss at equal time "
              "| loss vs " + base + " | loss vs best | payload B/step (tx+rx) | steps | seeds reaching | goodput MFLOP/s |"),
             "|---:|---|---:|---|---|---|---|---|---|---:|---:|---:|---|"]
    for r in ranking(summ):
        s = opts[r.optimizer]
        payload = (s.get("payload_tx_bytes_per_step") or 0) + (s.get("payload_rx_bytes_per_step") or 0)
        lines.append(f"| {r.rank} | {r.optimizer} | {lrs.get(r.optimizer, '')} | {r.time_to_target.text()} | "
                     f"{_versus(fams, TIME, r.optimizer, 'baseline')} | {_versus(fams, TIME, r.optimizer, 'best')} | "
                     f"{r.loss_equal_time.text()} | {_versus(fams, LOSS, r.optimizer, 'baseline')} | "
                     f"{_versus(fams, LOSS, r.optimizer, 'best')} | {payload:,.0f} | {r.steps.text(digits=3)} | "
                     f"{r.reached or '-'} | {_goodput(s)} |")
    for figure, label in ((TIME, "time to target"), (LOSS, "val loss at equal time")):
        fc = fams.get(figure)
        if fc is None:
            lines.append(f"by {label}: no comparison (the baseline has no per-seed figure)")
            continue
        if fc.pairs.descriptive:
            lines.append(f"by {label}: best by mean {fc.best}; post-hoc target: descriptive, no claim")
            lines += [f"  left out of {label}: {n} ({why})" for n, why in fc.left_out.items()]
            continue
        same = fc.indistinguishable_from_best()
        claim = fc.best_claim
        lines.append(f"by {label}: best by mean {fc.best}; "
                     + (f"{claim} is lower than every other method" if claim else "no method is lower than every other")
                     + f" (all pairs, Holm over {len(fc.pairs.comparisons)}); may be the best: {', '.join(same)}")
        lines += [f"  left out of {label}: {n} ({why})" for n, why in fc.left_out.items()]
    return "\n".join(lines)


def keep(run_dir: Path, dest: Path) -> None:
    """The run's per-seed results (summary.json's per_seed), scenario and environment, for the repo."""
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    for name in ("summary.json", "scenario.yaml", "environment.json"):
        if (run_dir / name).exists():
            shutil.copy2(run_dir / name, dest / name)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scenario", default="scenarios/methods-home-dsl.yaml")
    p.add_argument("--lrs", default="1e-3,3e-3,1e-2")
    p.add_argument("--sweep-budget", default=None,
                   help="each rate's budget in the sweeps (default: --budget, the reported runs' own: issue 49)")
    p.add_argument("--budget", default="25s")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--first-seed", type=int, default=1, help="the shoot-out's seeds: FIRST..FIRST+SEEDS-1")
    p.add_argument("--tune-seed", type=int, default=10,
                   help="the seed the sweeps tune on (not one of the shoot-out's; the scenario's checks.tuning_seeds)")
    p.add_argument("--widen", type=int, default=0, help="extend a sweep beyond its grid's edge at most this often "
                   "(default 0: every method gets the same number of rates, issue 49)")
    p.add_argument("--backend", default="netns")
    p.add_argument("--out", type=Path, default=Path("results/shootout"))
    p.add_argument("--keep", type=Path, default=None, help="copy the run's summary, scenario and environment here")
    p.add_argument("--skip-sweep", action="store_true")
    p.add_argument("--tune-only", action="store_true", help="write the tuned scenario and stop (tune in parts)")
    p.add_argument("--only", default=None, help="NAME[,NAME...]: tune only these optimizers; the others keep their lr")
    p.add_argument("--run", type=Path, default=None, help="print the table of this finished run and exit")
    args = p.parse_args(argv)
    args.sweep_budget = args.sweep_budget or args.budget
    if args.run:
        print(table(args.run))
        return 0
    if args.tune_only and args.skip_sweep:
        raise InputError("--tune-only with --skip-sweep does nothing; give one of them")
    if args.seeds < 3:
        raise InputError(f"--seeds: {args.seeds}; a shoot-out needs 3 or more (5 or more to separate 14 methods)")
    if args.first_seed <= args.tune_seed < args.first_seed + args.seeds:
        raise InputError(f"--tune-seed: {args.tune_seed} is one of the shoot-out's seeds "
                         f"{args.first_seed}..{args.first_seed + args.seeds - 1}; tune on a fresh seed")
    args.out.mkdir(parents=True, exist_ok=True)
    doc = yaml.safe_load(Path(args.scenario).read_text())
    print(f"load average {os.getloadavg()}", flush=True)
    names = only_names(doc, args.only)
    if not args.skip_sweep:
        print(f"tuning {', '.join(names)}: lr in {args.lrs}, {args.sweep_budget} each, seed {args.tune_seed}", flush=True)
        for name, lr in tune(doc, args.lrs, args.sweep_budget, args.backend, args.out, names, args.tune_seed,
                             args.widen).items():
            doc["optimizers"][name]["lr"] = lr
    tuned = args.out / "methods-tuned.yaml"
    tuned.write_text(yaml.safe_dump(doc, sort_keys=False))
    if args.tune_only:
        print(f"tuned scenario: {tuned}")
        return 0
    print(f"shoot-out: {args.budget} per method, seeds {args.first_seed}..{args.first_seed + args.seeds - 1} ({tuned})",
          flush=True)
    run_dir = _cli(["run", str(tuned), "--backend", args.backend, "--time-budget", args.budget,
                    "--repeat", str(args.seeds), "--seed", str(args.first_seed), "--out", str(args.out)])
    print(f"run {run_dir}; load average {os.getloadavg()}")
    if args.keep:
        keep(run_dir, args.keep)
    print(table(run_dir))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except InputError as e:
        sys.exit(f"error: {e}")
