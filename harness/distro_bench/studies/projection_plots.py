"""Projection plots: step time against worker count and against link bandwidth, per optimizer."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from distro_bench.report.style import new_figure, save, series_style
from distro_bench.train.projection import nodes_like, nodes_with_rate, project

if TYPE_CHECKING:
    from distro_bench.scenario.model import Scenario


def _time(p) -> float:
    return p.step_s if p.step_s is not None else p.comm_s


def step_time_vs_workers(scenario: Scenario, model: dict, counts: list[int], out: Path, mfu: float) -> Path:
    # The projection model builds the model's parameter shapes (torch): imported only when a plot is made,
    # so report/ stays importable without torch.
    fig, axes = new_figure()
    ax = axes[0][0]
    series: dict[str, list[float]] = {}
    for n in counts:
        for p in project(scenario, nodes=nodes_like(scenario, n), model=model, mfu=mfu):
            series.setdefault(p.optimizer, []).append(_time(p))
    for i, (name, ys) in enumerate(series.items()):
        ax.plot(counts, ys, label=name, **series_style(i))
    ax.set(xscale="log", yscale="log", xlabel="workers", ylabel="projected step time (s)",
           title=f"{scenario.name}: step time vs worker count")
    ax.set_xticks(counts, [str(c) for c in counts])
    ax.legend()
    path = out / "projection_workers.png"
    save(fig, path)
    return path


def step_time_vs_bandwidth(scenario: Scenario, model: dict, workers: int, out: Path, mfu: float) -> tuple[Path, dict]:
    """Also returns, per pair of optimizers, the symmetric rate (bit/s) where their step times cross."""
    rates = np.logspace(6, 10.5, 40)
    base = nodes_like(scenario, workers)
    series: dict[str, list[float]] = {}
    for r in rates:
        for p in project(scenario, nodes=nodes_with_rate(base, r, r), model=model, mfu=mfu):
            series.setdefault(p.optimizer, []).append(_time(p))
    fig, axes = new_figure()
    ax = axes[0][0]
    names = list(series)
    for i, name in enumerate(names):
        ax.plot(rates / 1e6, series[name], label=name, **series_style(i))
    crossings = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            diff = np.sign(np.array(series[a]) - np.array(series[b]))
            idx = np.nonzero(np.diff(diff))[0]
            if len(idx):
                rate = float(rates[idx[0] + 1])
                crossings[f"{a} vs {b}"] = rate
                ax.axvline(rate / 1e6, color="black", linewidth=0.8, linestyle=":")
                ax.annotate(f"{a} = {b}\n≈{rate / 1e6:.3g} Mbit/s", (rate / 1e6, ax.get_ylim()[1]),
                            xytext=(3, -24), textcoords="offset points", fontsize=8)
    ax.set(xscale="log", yscale="log", xlabel="link rate, up = down (Mbit/s)", ylabel="projected step time (s)",
           title=f"{scenario.name}: step time vs bandwidth, {workers} workers")
    ax.legend()
    path = out / "projection_bandwidth.png"
    save(fig, path)
    return path, crossings
