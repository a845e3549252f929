"""A sweep: one scenario run over a grid of settings (any scenario field by dotted path) into one folder.

`results/<scenario>-sweep-<stamp>/` holds one run folder per grid point (each written by the runner, as
`distro-bench run` writes it), `sweep.json` and `sweep.csv` (one row per point and optimizer), report.md /
report.html with the table and plots, and with `pick_best`, `best.yaml` (a scenario overlay: each method's
best setting) and `best-scenario.yaml` (the scenario with that overlay applied, ready for `distro-bench run`).

Grid points are validated as scenarios before anything runs, so a bad path or value stops the sweep with
the field named. An optimizer whose effective settings a previous point already ran (sweeping DisTrO's lr
leaves AdamW unchanged) is not trained again: its result is reused, and sweep.json says from which point.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from distro_bench.errors import CapabilityError, InputError, Interrupted
from distro_bench.report import analysis
from distro_bench.results import runfiles
from distro_bench.results.figures import FIGURES, reduction, reduction_basis
from distro_bench.results.rundir import atomic_write_json, atomic_write_text, new_run_dir, read_parquet
from distro_bench.run.lifecycle import ProgressSink
from distro_bench.run.overrides import Overrides, RunSettings
from distro_bench.run.runner import run_scenario
from distro_bench.scenario.loading import dump_scenario, load_scenario, scenario_from_dict, with_overrides
from distro_bench.scenario.model import Scenario
from distro_bench.studies.sweep_grid import (
    Axis,
    Point,
    PointResult,
    SweepResult,
    base_dict,
    point_scenario,
    validate_grid,
)
from distro_bench.studies.sweep_grid import parse_sets as parse_sets  # re-exported: the CLI imports it from here
from distro_bench.studies.sweep_report import write_sweep_report

# Figures of each optimizer's summary that a sweep records per point (absent keys stay absent: old runners).
# (results/figures.py's rows marked `point`, and the sweep's own time to the common target)
POINT_KEYS = [*(f.key for f in FIGURES if f.point), "time_to_common_target_s", "steps_to_common_target", "ci95"]
# ---- running ----------------------------------------------------------------------------------------

def _optimizer_key(doc: dict, name: str) -> str:
    """What determines one optimizer's result: everything but the other optimizers and the checks."""
    d = {k: v for k, v in doc.items() if k not in ("optimizers", "baseline", "checks", "description")}
    d["optimizer"] = doc["optimizers"][name]
    return json.dumps(d, sort_keys=True, default=str)


def _figures(summary: dict, name: str) -> dict:
    s = (summary.get("optimizers") or {}).get(name)
    return {} if s is None else {k: s[k] for k in POINT_KEYS if k in s}


def new_sweep_dir(out: Path, scenario_name: str) -> Path:
    """results/<scenario>-sweep-<YYYYmmdd-HHMMSS>, never an existing folder (as run folders are made)."""
    return new_run_dir(out, f"{scenario_name}-sweep")


RunFn = Callable[[Scenario, Path], Any]  # (scenario, out folder) -> RunResult (run_dir, state, summary)
TUNE_SEEDS = 3  # seeds per grid point when picking: one seed's luck is not a setting's merit


def fixed_settings(scenario: Scenario, axes: list[Axis], overrides: Overrides, pick_best: bool,
                   allow_few_seeds: bool = False) -> dict[str, Any]:
    """The settings every point shares, from the run options (dotted path -> value): the one budget, and the
    seeds (`repeat`; TUNE_SEEDS when picking, unless given). Picking on fewer than TUNE_SEEDS seeds is refused
    (InputError) unless `allow_few_seeds`: a pick on one seed selects that seed's luck as often as a setting."""
    budgets = overrides.budgets()
    if len(budgets) > 1:
        raise InputError(f"give one budget, not {' and '.join('--' + k.replace('_', '-') for k in budgets)}")
    fixed: dict[str, Any] = {f"train.{k}": v for k, v in budgets.items()}
    if pick_best and overrides.repeat is not None and overrides.repeat < TUNE_SEEDS and not allow_few_seeds:
        raise InputError(f"--repeat: {overrides.repeat} seed(s) per point is too few for --pick best, which needs at "
                         f"least {TUNE_SEEDS} (one seed's luck is not a setting's merit); give --repeat {TUNE_SEEDS} "
                         "or more, or --allow-few-seeds to pick on fewer anyway")
    repeat = TUNE_SEEDS if overrides.repeat is None and pick_best else overrides.repeat
    if repeat is not None:
        fixed["train.seeds"] = list(range(scenario.train.seed, scenario.train.seed + repeat))
    clash = [a.path for a in axes if a.path in fixed]
    if clash:
        raise InputError(f"--set {clash[0]}: also given by an option; sweep it or fix it, not both")
    return fixed


def sweep(scenario: Scenario, axes: list[Axis], overrides: Overrides | None = None,
          settings: RunSettings | None = None, *, pick_best: bool = False, allow_few_seeds: bool = False,
          reuse: bool = True, on_point: Callable[[Point, int, str], None] | None = None,
          point_progress: Callable[[], AbstractContextManager[ProgressSink | None]] | None = None) -> SweepResult:
    """`run_sweep` with the runner: the overrides' budget and repeat set at every point (`fixed`), their
    optimizers subset and seed applied to the scenario; each point runs as `settings` say (backend, link
    emulation, limits), into a sweep folder under `settings.out`. `point_progress` makes each point's progress
    sink."""
    overrides, settings = overrides or Overrides(), settings or RunSettings()
    scenario = replace(overrides, steps=None, time_budget=None, tokens=None, repeat=None).apply(scenario)
    fixed = fixed_settings(scenario, axes, overrides, pick_best, allow_few_seeds)
    make_progress = point_progress or (lambda: nullcontext(None))

    def run_point(scen: Scenario, folder: Path) -> Any:  # its scenario already has the budget and seeds
        with make_progress() as progress:
            return run_scenario(scen, replace(settings, out=folder), progress)

    # looked up at call time: tests replace run_sweep
    return run_sweep(scenario, axes, out=settings.out, run=run_point, pick_best=pick_best, reuse=reuse,
                     on_point=on_point, fixed=fixed)



def run_sweep(scenario: Scenario, axes: list[Axis], *, out: Path = Path("results"), run: RunFn,
              pick_best: bool = False, reuse: bool = True, fixed: dict[str, Any] | None = None,
              on_point: Callable[[Point, int, str], None] | None = None) -> SweepResult:
    """Run every grid point through `run` (the runner: distro_bench.run.runner.run_scenario with the caller's options).

    `fixed`: dotted path -> value set at every point (the budget, the seeds), not an axis.
    Ctrl-C (Interrupted / KeyboardInterrupt) stops the sweep but keeps and summarises the finished points,
    then re-raises Interrupted. A point whose run fails is recorded as failed and the sweep goes on.
    """
    # The trials of a pick also evaluate the held-out tuning split, and the pick reads it (`_score`): the
    # validation split stays the report's, never selected on. The sweep's own scenario (best-scenario.yaml's
    # base) does not get it: the final run reports val_loss only.
    trial_fixed = dict(fixed or {})
    if pick_best and not scenario.data.tune_batches:
        trial_fixed["data.tune_batches"] = scenario.data.val_batches
    points = validate_grid(scenario, axes, trial_fixed)
    if fixed:  # the sweep's own scenario carries them too, so best-scenario.yaml runs at the same budget
        scenario = point_scenario(scenario, Point(-1, {}, {}), fixed)
    sweep_dir = new_sweep_dir(out, scenario.name)
    results: list[PointResult] = []
    seen: dict[str, tuple[int, dict]] = {}  # optimizer key -> (point index, figures)
    state = "complete"
    interrupted = None
    meta: dict[str, Any] = {"scenario": scenario.name, "started": datetime.now(UTC).isoformat(timespec="seconds"),
                         "axes": [{"path": a.path, "values": list(a.values), "texts": list(a.texts)} for a in axes]}
    atomic_write_text(sweep_dir / "scenario.yaml", yaml.safe_dump(base_dict(scenario), sort_keys=False))
    try:
        for point, scen in points:
            doc = base_dict(scen)
            keys = {name: _optimizer_key(doc, name) for name in scen.optimizers}
            todo = [n for n in scen.optimizers if not (reuse and keys[n] in seen)]
            pr = PointResult(point, "complete", None)
            for n in scen.optimizers:
                if n not in todo:
                    src, figs = seen[keys[n]]
                    pr.optimizers[n] = {**figs, "reused_from": src}
            if on_point:
                on_point(point, len(points), "running " + ", ".join(todo) if todo else "all reused")
            if todo:
                try:
                    result = run(with_overrides(scen, optimizers=todo) if todo != list(scen.optimizers) else scen,
                                 sweep_dir)
                except (Interrupted, KeyboardInterrupt) as e:
                    pr.state, pr.reason = "incomplete", "interrupted"
                    pr.run_dir = _newest_run(sweep_dir, scenario.name)
                    results.append(pr)
                    interrupted = e
                    state = "incomplete"
                    break
                except (InputError, CapabilityError):  # the same at every point: stop, do not fail them one by one
                    raise
                except Exception as e:  # a failed point is a result; the sweep goes on
                    pr.state, pr.reason = "failed", f"{type(e).__name__}: {e}"
                    pr.run_dir = _newest_run(sweep_dir, scenario.name)
                else:
                    pr.state = result.state
                    pr.run_dir = result.run_dir
                    for n in todo:
                        figs = _figures(result.summary, n)
                        pr.optimizers[n] = figs
                        if result.state == "complete" and figs:
                            seen[keys[n]] = (point.index, figs)
                    if scen.baseline not in todo:  # the run had no baseline: reduction against the reused one
                        _reductions(pr.optimizers, scen.baseline)
                if pr.run_dir is not None and pr.run_dir.parent == sweep_dir:
                    target = runfiles.safe_join(sweep_dir, point.folder_name, what="sweep point")
                    pr.run_dir.rename(target)
                    pr.run_dir = target
            results.append(pr)
            _write_index(sweep_dir, meta, results, "running")
    finally:
        if interrupted is None and len(results) < len(points) and state == "complete":
            state = "failed"
        meta["common_target"] = common_target(results)
        res = SweepResult(sweep_dir, scenario.name, axes, results, state, target=meta["common_target"])
        if pick_best:
            res.best = pick(res)
            if res.best and res.best["overlay"]:
                write_best(res, scenario)
        _write_index(sweep_dir, meta, results, state, res.best)
        try:
            res.files, res.crossing = write_sweep_report(res, scenario)
        except Exception as e:  # the points' data is kept even if a plot fails
            (sweep_dir / "report-error.txt").write_text(f"{type(e).__name__}: {e}\n")
    if interrupted is not None:
        raise Interrupted(f"interrupted; {sum(p.state == 'complete' for p in results)} finished point(s) kept in "
                          f"{sweep_dir}") from None
    return res


# ---- one target for the whole sweep ------------------------------------------------------------------

def _seed_curves(run_dir: Path, name: str) -> list:
    """Per seed of one optimizer in a run folder: its per-step frame (step, val_loss, elapsed_s)."""

    try:  # read as run folders are (results/runfiles.py): capped, no link, its size checked before decoding
        df = read_parquet(run_dir, "metrics.parquet")
    except (OSError, InputError):  # a point that failed before writing metrics
        return []
    if df is None or "optimizer" not in df.columns:
        return []
    df = df[df["optimizer"] == name]
    if not len(df):
        return []
    groups = [g for _, g in df.groupby("seed")] if "seed" in df.columns and df["seed"].notna().any() else [df]
    return [c.dropna(subset=["val_loss"]) for c in (analysis.per_step(g) for g in groups)]


def _cross(curve, target: float) -> tuple[float, float] | None:
    """(seconds, steps) when the validation loss first reaches `target`, linear between evaluations."""
    val, t, steps = curve["val_loss"].to_numpy(), curve["elapsed_s"].to_numpy(), curve["step"].to_numpy() + 1
    for i, v in enumerate(val):
        if v <= target:
            if i == 0:
                return float(t[0]), float(steps[0])
            f = (val[i - 1] - target) / (val[i - 1] - v)
            return float(t[i - 1] + f * (t[i] - t[i - 1])), float(steps[i - 1] + f * (steps[i] - steps[i - 1]))
    return None


def common_target(results: list[PointResult]) -> dict | None:
    """Each run folder chooses its own target (its worst optimizer's best loss), so times to target from
    different points measure different things. The sweep sets one target for all: the highest best
    validation loss of any finished (point, optimizer, seed), which every one of them reaches. It adds
    `time_to_common_target_s` and `steps_to_common_target` (means over seeds; None unless every seed
    reached it) to each optimizer's figures."""
    curves = {}
    for r in results:
        if r.state != "complete" or r.run_dir is None:
            continue
        for name, figs in r.optimizers.items():
            if "reused_from" not in figs:
                curves[(r.point.index, name)] = [c for c in _seed_curves(r.run_dir, name) if len(c)]
    bests = [float(c["val_loss"].min()) for cs in curves.values() for c in cs]
    if not bests:
        return None
    target = max(bests)
    for r in results:
        for name, figs in r.optimizers.items():
            src = (figs.get("reused_from", r.point.index), name)
            if src not in curves:
                continue
            hits = [h for c in curves[src] if (h := _cross(c, target)) is not None]
            ok = hits and len(hits) == len(curves[src])  # every seed crossed it
            figs["time_to_common_target_s"] = sum(h[0] for h in hits) / len(hits) if ok else None
            figs["steps_to_common_target"] = sum(h[1] for h in hits) / len(hits) if ok else None
    return {"val_loss": target, "how": "the highest best validation loss of any point, optimizer and seed of the "
                                      "sweep (every one reaches it), interpolated between evaluations"}


def _reductions(figs: dict[str, dict], baseline: str) -> None:
    base = figs.get(baseline)
    if not base:
        return
    for name, f in figs.items():
        if name == baseline or "reused_from" in f:
            continue
        basis = reduction_basis([base], [f])  # results/figures.py: the one basis rule and reduction
        f["reduction_vs_baseline"] = reduction(base, f, basis)
        f["reduction_basis"] = basis


def load_sweep(path: Path | str) -> tuple[SweepResult, Scenario]:
    """A sweep folder as run_sweep left it (InputError when it is not one)."""
    path = Path(path)
    try:  # a folder anyone may have written: read as run folders are (results/runfiles.py)
        data = runfiles.read_json(path, "sweep.json")
    except (OSError, runfiles.RunFileError) as e:
        raise InputError(f"{path}: not a sweep folder ({e})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path / 'sweep.json'}: not a sweep distro-bench wrote (not a mapping)")
    try:
        axes = [Axis(a["path"], tuple(a["texts"]), tuple(a["values"])) for a in data["axes"]]
        # each point's run folder is one folder of the sweep's (safe_join): a forged `../..` or `/etc` is refused
        points = [PointResult(Point(p["index"], p["values"], p["texts"]), p["state"],
                              runfiles.safe_join(path, p["run_dir"], what="run_dir") if p.get("run_dir") else None,
                              p["optimizers"], p.get("reason"))
                  for p in data["points"]]
        res = SweepResult(path, data["scenario"], axes, points, data["state"], best=data.get("best"),
                          target=data.get("common_target"))
    except (KeyError, TypeError, AttributeError, IndexError) as e:
        raise InputError(f"{path / 'sweep.json'}: not a sweep distro-bench wrote ({type(e).__name__} "
                         f"{ascii(str(e))[:80]})") from None
    return res, load_scenario(path / "scenario.yaml", confine=False)  # resolved: the corpus was confined at the sweep


def rewrite(path: Path | str) -> SweepResult:
    """Recompute the common target and rewrite sweep.json/csv and the report of a sweep folder."""
    res, scenario = load_sweep(path)
    data = runfiles.read_json(res.sweep_dir, "sweep.json")
    assert isinstance(data, dict)  # load_sweep read it as one
    meta = {k: data[k] for k in ("scenario", "started", "axes") if k in data}
    meta["common_target"] = res.target = common_target(res.points)
    _write_index(res.sweep_dir, meta, res.points, res.state, res.best)
    res.files, res.crossing = write_sweep_report(res, scenario)
    return res


def _newest_run(sweep_dir: Path, name: str) -> Path | None:
    runs = sorted((p for p in sweep_dir.glob(f"{name}-*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
    return runs[-1] if runs else None


def _write_index(sweep_dir: Path, meta: dict, results: list[PointResult], state: str, best: dict | None = None) -> None:
    atomic_write_json(sweep_dir / "sweep.json", {**meta, "state": state, "points": [r.as_dict() for r in results],
                                                 "best": best})
    atomic_write_text(sweep_dir / "sweep.csv", table_frame(results).to_csv(index=False))


def table_frame(results: list[PointResult]):
    """One row per point and optimizer: the swept values, then the figures (intervals as _lo/_hi columns)."""
    import pandas as pd

    rows = []
    for r in results:
        # a point without figures (failed before any) still has its row
        rows_of: list[tuple[str | None, dict]] = list(r.optimizers.items()) or [(None, {})]
        for name, figs in rows_of:
            row = {"point": r.point.index, **r.point.texts, "optimizer": name, "state": r.state,
                   "run_dir": r.run_dir.name if r.run_dir else None,
                   "reused_from": figs.get("reused_from")}
            for k in POINT_KEYS:
                if k == "ci95":
                    for ck, bounds in (figs.get("ci95") or {}).items():
                        if bounds:  # null with one seed
                            row[f"{ck}_lo"], row[f"{ck}_hi"] = bounds
                elif k in figs:
                    row[k] = figs[k]
            rows.append(row)
    return pd.DataFrame(rows)


# ---- picking each method's best ---------------------------------------------------------------------

def _score(figs: dict) -> tuple[float | None, str]:
    """The figure a pick minimises: the tuning split's final loss; for sweeps run before it existed the
    validation loss, else the training loss."""
    for key in ("final_tune_loss", "final_val_loss", "final_loss"):
        v = figs.get(key)
        if isinstance(v, (int, float)) and not math.isnan(v):
            return float(v), key
    return None, ""


def pick(res: SweepResult) -> dict | None:
    """Per optimizer with an axis of its own: the values of its axes with the lowest tuning-split loss at the end
    of the (equal) budget, averaged over the other axes' values where there are any."""
    out: dict[str, Any] = {"overlay": {}, "by": {}, "candidates": {}}
    for name in sorted({a.optimizer for a in res.axes if a.optimizer}):
        own = [a.path for a in res.axes if a.optimizer == name]
        groups: dict[tuple, list[float]] = {}
        key_used = ""
        for r in res.points:
            if r.state != "complete" or name not in r.optimizers:
                continue
            score, key_used = _score(r.optimizers[name])
            if score is None:
                continue
            groups.setdefault(tuple(r.point.texts[p] for p in own), []).append(score)
        if not groups:
            continue
        means = {k: sum(v) / len(v) for k, v in groups.items()}
        best = min(means, key=lambda k: means[k])
        axis_by_path = {a.path: a for a in res.axes}
        values = {p: axis_by_path[p].values[axis_by_path[p].texts.index(t)] for p, t in zip(own, best)}
        for p, v in values.items():
            node = out["overlay"]
            parts = p.split(".")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = v
        edges = grid_edges(res.axes, dict(zip(own, best)))
        out["by"][name] = {"metric": key_used, "value": means[best], "settings": dict(zip(own, best)),
                           "averaged_over_points": len(groups[best]), "at_edge": edges}
        out.setdefault("warnings", []).extend(
            f"{name}: {e['path']}={e['value']} is the {e['side']} value of its grid; the best may lie beyond it "
            f"(extend the grid {'down' if e['side'] == 'lowest' else 'up'})" for e in edges)
        out["candidates"][name] = [{"settings": dict(zip(own, k)), "value": v} for k, v in sorted(means.items(),
                                                                                                     key=lambda kv: kv[1])]
    return out


def grid_edges(axes: list[Axis], settings: dict[str, str]) -> list[dict]:
    """The picked settings that sit at the lowest or highest value of their axis (by value where numeric,
    else as listed): a tuned rate at its grid's edge says the grid did not bracket the optimum."""
    out = []
    for a in axes:
        if a.path not in settings or len(a.values) < 2:
            continue
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in a.values)
        order = sorted(range(len(a.values)), key=lambda i: a.values[i]) if numeric else list(range(len(a.values)))
        i = a.texts.index(settings[a.path])
        if i in (order[0], order[-1]):
            out.append({"path": a.path, "value": settings[a.path], "side": "lowest" if i == order[0] else "highest"})
    return out


def fresh_seeds(scenario: Scenario) -> list[int]:
    """As many seeds as the tuning used, none of them: the picked setting is reported on runs it was not
    selected on (selecting and reporting on the same seeds flatters the winner)."""
    used = scenario.train.seed_list()
    start = max(used) + 1
    return list(range(start, start + len(used)))


def write_best(res: SweepResult, scenario: Scenario) -> None:
    best = res.best or {}
    header = (f"# Each method's best setting from the sweep {res.sweep_dir.name} (lowest "
              + ", ".join(f"{n}: {b['metric']} {b['value']:.4f}" for n, b in best["by"].items())
              + ").\n# A scenario overlay: merge it into the scenario, or run best-scenario.yaml beside it.\n")
    atomic_write_text(res.sweep_dir / "best.yaml", header + yaml.safe_dump(best["overlay"], sort_keys=False))
    doc = base_dict(scenario)
    merge(doc, best["overlay"])
    seeds = fresh_seeds(scenario)
    doc["train"]["seeds"] = seeds
    doc["train"]["seed"] = seeds[0]
    best["final_seeds"] = seeds
    scen = scenario_from_dict(doc, source="best-scenario.yaml", base_dir=scenario._base_dir)
    atomic_write_text(res.sweep_dir / "best-scenario.yaml",
                      f"# {scenario.name} with each method at its best setting from {res.sweep_dir.name}, on seeds "
                      f"{', '.join(map(str, seeds))}: none of them was used to pick it\n" + dump_scenario(scen))


def merge(doc: dict, overlay: dict) -> dict:
    """Overlay values into a scenario document, section by section (in place; returned for chaining)."""
    for k, v in overlay.items():
        if isinstance(v, dict) and isinstance(doc.get(k), dict):
            merge(doc[k], v)
        else:
            doc[k] = v
    return doc
