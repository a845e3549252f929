"""A sweep folder's report: the table of points x optimizers, each method's best setting, a plot of the
validation loss against each swept value, and for a sweep over link rates, time to target (or step time)
against rate with the measured crossing beside the projection model's."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from distro_bench.errors import InputError
from distro_bench.report import html as html_render
from distro_bench.report import markdown
from distro_bench.report.describe import fmt, fmt_reduction
from distro_bench.report.document import Banner, Bullets, Document, Figure, Para, Section, Table
from distro_bench.report.style import new_figure, note_on_axes, save, series_style
from distro_bench.results.rundir import atomic_write_json, atomic_write_text
from distro_bench.results.runfiles import read_json, safe_join
from distro_bench.scenario.units import parse_rate
from distro_bench.studies.sweep_grid import Point, SweepResult, point_scenario
from distro_bench.train.projection import project

if TYPE_CHECKING:
    from distro_bench.scenario.model import Scenario
    from distro_bench.studies.sweep_grid import Axis


def _pm(figs: dict, key: str, spec: str = ".4g") -> str:
    v = figs.get(key)
    if key in figs and v is None:
        return "not reached" if key == "time_to_target_s" else "n/a"
    if v is None:
        return "n/a"
    ci = (figs.get("ci95") or {}).get(key)
    return fmt(v, spec) + (f" ± {fmt((ci[1] - ci[0]) / 2, '.2g')}" if ci else "")


def table(res: SweepResult) -> Table:
    paths = [a.path for a in res.axes]
    # A pick's trials also hold the tuning split's loss, the figure the pick selected on (docs/sweeps.md).
    tuned = any(figs.get("final_tune_loss") is not None for r in res.points for figs in r.optimizers.values())
    headers = ["point", *paths, "optimizer", "seeds", "steps", "step time s", *(["final tune loss"] if tuned else []),
               "final val loss", "time to common target s", "reduction", "state", "run folder"]
    rows = []
    for r in res.points:
        for name, figs in (r.optimizers or {"-": {}}).items():
            reused = figs.get("reused_from")
            rows.append([str(r.point.index), *[r.point.texts[p] for p in paths], name, fmt(figs.get("seeds"), "d"),
                         # steps: a mean over seeds, fractional when their time budgets ended at different steps
                         fmt(figs.get("steps"), "d" if isinstance(figs.get("steps"), int) else ".1f"), _pm(figs, "step_time_s_mean", ".3g"),
                         *([_pm(figs, "final_tune_loss")] if tuned else []), _pm(figs, "final_val_loss"),
                         "not reached" if "time_to_common_target_s" in figs and figs["time_to_common_target_s"] is None
                         else fmt(figs.get("time_to_common_target_s"), ".3g"),
                         fmt_reduction(figs.get("reduction_vs_baseline")),
                         r.state + (f" ({r.reason})" if r.reason else ""),
                         f"same as point {reused}" if reused is not None else (r.run_dir.name if r.run_dir else "-")])
    # (no loss at equal time: a point that reused the baseline ran alone, so its "equal time" is its own)
    return Table(headers, rows, numeric=[True] + [False] * len(paths) + [False, True, True, True]
                 + [True] * tuned + [True, True, True, False, False])


def _numeric(axis: Axis) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in axis.values)


def _rate_bps(text: str) -> float | None:
    try:
        return float(parse_rate(text))
    except Exception:
        return None


def _series(res: SweepResult, axis: Axis, name: str, key: str) -> tuple[list, list]:
    """(x positions, mean of `key` over the other axes' values) for one optimizer; x follows the axis order."""
    xs, ys = [], []
    for i, text in enumerate(axis.texts):
        vals = [r.optimizers[name][key] for r in res.points
                if r.state == "complete" and r.point.texts.get(axis.path) == text and name in r.optimizers
                and isinstance(r.optimizers[name].get(key), (int, float))]
        if vals:
            xs.append(i)
            ys.append(sum(vals) / len(vals))
    return xs, ys


def axis_plot(res: SweepResult, axis: Axis, out: Path, index: int) -> Figure:
    fig, axes = new_figure()
    ax = axes[0][0]
    names = [axis.optimizer] if axis.optimizer else sorted({n for r in res.points for n in r.optimizers})
    x_of = {i: (axis.values[i] if _numeric(axis) else i) for i in range(len(axis.texts))}
    for j, name in enumerate(names):
        xs, ys = _series(res, axis, name, "final_val_loss")
        if not xs:
            xs, ys = _series(res, axis, name, "final_loss")
        if xs:
            ax.plot([x_of[i] for i in xs], ys, label=name, **series_style(j))
    if _numeric(axis) and all(v > 0 for v in axis.values) and max(axis.values) / min(axis.values) >= 10:
        ax.set_xscale("log")
    if _numeric(axis):
        ax.set_xticks(list(axis.values), list(axis.texts))
        ax.minorticks_off()
    else:
        ax.set_xticks(range(len(axis.texts)), list(axis.texts))
    others = len(res.axes) > 1
    ax.set(title=f"Validation loss at the end of the budget against {axis.path}", xlabel=axis.path,
           ylabel="final val loss" + (" (mean over the other axes)" if others else ""))
    if ax.get_lines():
        ax.legend(title="optimizer")
    else:
        note_on_axes(ax, "no finished point")
    path = safe_join(out, f"sweep_{index}_{axis.path.replace('.', '_')}.png", what="swept setting")
    save(fig, path)
    return Figure(path, f"Final validation loss against {axis.path}",
                  f"Validation loss at the end of the budget for each value of {axis.path}"
                  + (", averaged over the other swept settings." if others else "."))


def _crossings(rates: np.ndarray, a: list[float], b: list[float]) -> list[float]:
    """Rates where a - b changes sign, interpolated on log(rate) and log(time)."""
    out = []
    d = np.log(np.asarray(a)) - np.log(np.asarray(b))
    lr = np.log(rates)
    for i in range(len(d) - 1):
        if d[i] == 0:
            out.append(float(rates[i]))
        elif d[i] * d[i + 1] < 0:
            t = d[i] / (d[i] - d[i + 1])
            out.append(float(math.exp(lr[i] + t * (lr[i + 1] - lr[i]))))
    return out


def _measured_by_rate(res: SweepResult, axis: Axis, key: str) -> dict[str, dict[float, float]]:
    """optimizer -> rate -> `key`; with other axes swept, each method at its best (lowest) value for that rate."""
    out: dict[str, dict[float, float]] = {}
    for r in res.points:
        if r.state != "complete":
            continue
        rate = _rate_bps(r.point.texts[axis.path])
        for name, figs in r.optimizers.items():
            v = figs.get(key)
            if rate is None or not isinstance(v, (int, float)):
                continue
            cur = out.setdefault(name, {}).get(rate)
            out[name][rate] = v if cur is None else min(cur, v)
    return out


def _predicted(res: SweepResult, axis: Axis, scenario: Scenario, rates: np.ndarray, key: str) -> dict[str, list[float]]:
    """The projection's communication time at each rate, plus each optimizer's measured non-communication
    time (this host's compute); times mean steps to target when the metric is time to target."""
    rest: dict[str, list[float]] = {}
    steps: dict[str, list[float]] = {}
    for r in res.points:
        for name, f in r.optimizers.items():
            if r.state == "complete" and f.get("step_time_s_mean") is not None and f.get("comm_s_mean") is not None:
                rest.setdefault(name, []).append(f["step_time_s_mean"] - f["comm_s_mean"])
            if f.get("steps_to_common_target") is not None:
                steps.setdefault(name, []).append(f["steps_to_common_target"])
    base = {p: v for p, v in next(r.point for r in res.points).values.items() if p != axis.path}
    out: dict[str, list[float]] = {}
    for rate in rates:
        point = Point(-1, {**base, axis.path: f"{int(rate)}bit"}, {axis.path: f"{int(rate)}bit"})
        for p in project(point_scenario(scenario, point)):
            if p.optimizer not in rest:
                continue
            step = float(np.mean(rest[p.optimizer])) + p.comm_s
            if key == "time_to_common_target_s":
                if p.optimizer not in steps:
                    continue
                step *= float(np.mean(steps[p.optimizer]))
            out.setdefault(p.optimizer, []).append(step)
    return {k: v for k, v in out.items() if len(v) == len(rates)}


def _emulated(res: SweepResult) -> bool | None:
    for r in res.points:
        if r.run_dir and (r.run_dir / "environment.json").is_file():
            try:  # read as every run-folder file is (results/runfiles.py)
                env = read_json(r.run_dir, "environment.json")
                net = (env.get("network") if isinstance(env, dict) else None) or {}
                return net.get("network_emulated") if isinstance(net, dict) else None
            except (OSError, InputError):
                continue
    return None


def crossing_plot(res: SweepResult, axis: Axis, scenario: Scenario, out: Path) -> tuple[Figure, dict]:
    has_target = any(f.get("time_to_common_target_s") is not None for r in res.points for f in r.optimizers.values())
    key = "time_to_common_target_s" if has_target else "step_time_s_mean"
    ylabel = "time to target (s)" if has_target else "step time (s)"
    measured = _measured_by_rate(res, axis, key)
    fig, axes = new_figure()
    ax = axes[0][0]
    names = list(measured)
    for j, name in enumerate(names):
        pts = sorted(measured[name].items())
        ax.plot([p[0] / 1e6 for p in pts], [p[1] for p in pts], label=f"{name} (measured)", **series_style(j))
    info: dict = {"metric": key, "measured": {}, "predicted": {}}
    baseline = next((n for n in names if n == scenario.baseline), names[0] if names else "")  # "": no curves
    rates_all = sorted({r for m in measured.values() for r in m})
    for name in names:
        if name == baseline:
            continue
        common = [r for r in rates_all if r in measured[name] and r in measured.get(baseline, {})]
        for c in _crossings(np.array(common), [measured[name][r] for r in common],
                            [measured[baseline][r] for r in common]) if len(common) > 1 else []:
            info["measured"].setdefault(f"{name} vs {baseline}", []).append(c)
            ax.axvline(c / 1e6, color="black", linewidth=1.0)
            ax.annotate(f"measured: {name} = {baseline}\n≈{c / 1e6:.3g} Mbit/s", (c / 1e6, 0.97),
                        xycoords=("data", "axes fraction"), xytext=(3, -4), textcoords="offset points", va="top",
                        fontsize=8)
    if rates_all:
        lo, hi = min(rates_all), max(rates_all)
        dense = np.logspace(math.log10(max(lo / 4, 8e3)), math.log10(hi * 4), 40)
        try:
            pred = _predicted(res, axis, scenario, dense, key)
        except Exception as e:  # the projection is a companion; the measurement stands without it
            pred = {}
            info["predicted_error"] = f"{type(e).__name__}: {e}"
        for j, name in enumerate(names):
            if name in pred:
                ax.plot(dense / 1e6, pred[name], color=series_style(j)["color"], linestyle=":", linewidth=1.0,
                        label=f"{name} (projection)")
        if baseline in pred:
            for name in pred:
                if name == baseline:
                    continue
                for c in _crossings(dense, pred[name], pred[baseline]):
                    info["predicted"].setdefault(f"{name} vs {baseline}", []).append(c)
                    ax.axvline(c / 1e6, color="black", linewidth=0.8, linestyle=":")
                    ax.annotate(f"projected: ≈{c / 1e6:.3g} Mbit/s", (c / 1e6, 0.03), xycoords=("data", "axes fraction"),
                                xytext=(3, 4), textcoords="offset points", fontsize=8)
    ax.set(xscale="log", yscale="log", xlabel=f"{axis.path} (Mbit/s)", ylabel=ylabel,
           title=f"{scenario.name}: {ylabel} against link rate")
    if _emulated(res) is False:
        ax.text(0.5, 0.5, "links NOT emulated (local backend):\nmeasured times do not depend on the rate",
                transform=ax.transAxes, ha="center", va="center", fontsize=9,
                bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "black"})
    if ax.get_lines():
        ax.legend(fontsize=8)
    else:
        note_on_axes(ax, "no finished point")
    path = out / "sweep_crossing.png"
    save(fig, path)
    return Figure(path, f"{ylabel} against link rate per optimizer, measured and projected",
                  f"{ylabel.capitalize()} against {axis.path} per optimizer: solid lines measured (each method at "
                  "its best setting for each rate where other settings were swept too), dotted the projection "
                  "model's (its communication time over the links plus this host's measured compute). Solid "
                  "vertical lines mark where the measured curves cross, dotted where the projected ones do."), info


def write_sweep_report(res: SweepResult, scenario: Scenario) -> tuple[list[Path], dict | None]:
    plots = res.sweep_dir / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    figures = [axis_plot(res, a, plots, i) for i, a in enumerate(res.axes) if not a.is_rate]
    crossing = None
    rate_axis = next((a for a in res.axes if a.is_rate), None)
    if rate_axis is not None:
        fig, crossing = crossing_plot(res, rate_axis, scenario, plots)
        figures.append(fig)
    banners = []
    if res.state != "complete":
        banners.append(Banner("error", f"This sweep is {res.state.upper()}: "
                                       f"{sum(p.state == 'complete' for p in res.points)} point(s) finished."))
    if _emulated(res) is False:
        banners.append(Banner("warn", "The network was NOT emulated (local backend): times do not reflect the links."))
    target = (f" Time to common target: to val loss {res.target['val_loss']:.4f}, {res.target['how']}."
              if res.target and res.target.get("val_loss") is not None else "")
    sections = [Section("Grid", [
        Bullets([f"{a.path}: {', '.join(a.texts)}" for a in res.axes]),
        table(res),
        Para("One run folder per point (or 'same as point K' where an optimizer's settings did not change, so its "
             "result was reused). ± is a 95% interval over seeds where the run had several." + target),
    ])]
    if res.best and res.best.get("by"):
        items = [f"{n}: " + ", ".join(f"{p}={t}" for p, t in b["settings"].items())
                 + f" ({b['metric']} {b['value']:.4f}" + (f", mean over {b['averaged_over_points']} points" if
                                                          b["averaged_over_points"] > 1 else "") + ")"
                 for n, b in res.best["by"].items()]
        warnings = [f"Warning: {w}" for w in res.best.get("warnings", [])]
        sections.append(Section("Best setting per method", [
            Bullets(items + warnings),
            Para("best.yaml holds these as a scenario overlay; best-scenario.yaml is the scenario with them applied: "
                 f"`distro-bench run {res.sweep_dir / 'best-scenario.yaml'}` compares every method at its best."),
        ]))
    if crossing:
        words = [f"measured {k}: " + ", ".join(f"{c / 1e6:.3g} Mbit/s" for c in v) for k, v in crossing["measured"].items()]
        words += [f"projected {k}: " + ", ".join(f"{c / 1e6:.3g} Mbit/s" for c in v) for k, v in crossing["predicted"].items()]
        sections.append(Section("Crossing", [Bullets(words or ["no crossing within the swept rates"])]))
    sections.append(Section("Plots", figures))
    doc = Document(title=f"distro-bench sweep: {res.scenario}",
                   subtitle=f"{res.sweep_dir.name}; {len(res.points)} point(s); state {res.state}.",
                   banners=banners, sections=sections)
    md, html = res.sweep_dir / "report.md", res.sweep_dir / "report.html"
    atomic_write_text(md, markdown.render(doc, md))
    atomic_write_text(html, html_render.render(doc))
    if crossing:
        atomic_write_json(res.sweep_dir / "crossing.json", crossing)
    return [md, html, *[f.path for f in figures]], crossing
