"""`distro-bench history --plot`: a figure of a scenario over its runs (results/history.py), one line per
optimizer with its 95% intervals as error bars, each run's commit under its point, changes marked."""

from __future__ import annotations

from pathlib import Path

from distro_bench.report.style import new_figure, save, series_style
from distro_bench.results.history import Point


def plot_history(points: list[Point], figure: str, path: Path) -> Path:
    """The points as a PNG at `path` (x: the runs in time order, labelled by commit; a CHANGED point circled)."""
    fig, axes = new_figure(width=max(6.0, 0.9 * len({p.run_id for p in points}) + 3), height=4.0)
    ax = axes[0][0]
    runs = list(dict.fromkeys(p.run_id for p in points))  # time order, as `series` gives them
    labels = {p.run_id: (p.git_commit or "?")[:8] for p in points}
    for i, opt in enumerate(dict.fromkeys(p.optimizer for p in points)):
        mine = [p for p in points if p.optimizer == opt]
        xs = [runs.index(p.run_id) for p in mine]
        ys = [p.value for p in mine]
        err = [[p.value - p.lo if p.lo is not None else 0.0 for p in mine],
               [p.hi - p.value if p.hi is not None else 0.0 for p in mine]]
        ax.errorbar(xs, ys, yerr=err, capsize=3, label=opt, **series_style(i))
        changed = [(x, y) for x, y, p in zip(xs, ys, mine) if p.changed]
        if changed:
            ax.scatter(*zip(*changed), s=160, facecolors="none", edgecolors="red", linewidths=1.5, zorder=5)
    ax.set_xticks(range(len(runs)), [labels[r] for r in runs], rotation=30, ha="right")
    ax.set(title=f"{figure} over {len(runs)} runs (95% intervals; circled: a change beyond the noise)",
           xlabel="runs in time order, by git commit", ylabel=figure)
    ax.legend()
    fig.tight_layout()
    save(fig, path)
    return path
