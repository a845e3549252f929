"""Per-run figures (PNG, Agg). Each function draws one figure from stored metrics and returns its Figure block."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.report import analysis
from harness.report.document import Figure
from harness.report.load import LoadedRun
from harness.report.style import (SEGMENTS, bar_style, human_bytes, new_figure, note_on_axes, save,
                                  series_style)

LOSS_UNIT = "loss (cross-entropy, nats/token)"


def _frames(run: LoadedRun) -> dict:
    df = run.data.metrics
    return {name: df[df["optimizer"] == name] for name in run.optimizers}


def loss_vs_step(run: LoadedRun, out: Path) -> Figure:
    fig, axes = new_figure(ncols=2, sharey=True)
    train_ax, val_ax = axes[0]
    for i, (name, df) in enumerate(_frames(run).items()):
        s = analysis.per_step(df)
        st = series_style(i)
        train_ax.plot(s["step"], s["loss"], label=name, linewidth=1.3, markevery=max(1, len(s) // 10),
                      markersize=4, **st)
        v = s.dropna(subset=["val_loss"])
        val_ax.plot(v["step"], v["val_loss"], label=name, linewidth=1.3, markersize=5, **st)
    train_ax.set(title="Training loss (mean over workers)", xlabel="step", ylabel=LOSS_UNIT)
    val_ax.set(title="Validation loss (held-out data)", xlabel="step")
    if not any(len(line.get_xdata()) for line in val_ax.get_lines()):
        note_on_axes(val_ax, "no validation loss recorded")
    for ax in (train_ax, val_ax):
        if ax.get_lines():
            ax.legend(title="optimizer")
    path = out / "loss_vs_step.png"
    save(fig, path)
    return Figure(path, "Training and validation loss against step for each optimizer",
                  "Loss against step. Left: training loss averaged over workers; right: held-out validation loss.")


def loss_vs_time(run: LoadedRun, out: Path) -> Figure:
    fig, axes = new_figure()
    ax = axes[0][0]
    for i, (name, df) in enumerate(_frames(run).items()):
        s = analysis.per_step(df)
        st = series_style(i)
        ax.plot(s["elapsed_s"], s["loss"], label=f"{name} (training)", linewidth=1.2,
                markevery=max(1, len(s) // 10), markersize=4, **st)
        v = s.dropna(subset=["val_loss"])
        if len(v):
            ax.plot(v["elapsed_s"], v["val_loss"], linestyle="none", marker=st["marker"], markersize=7,
                    markerfacecolor="white", markeredgecolor=st["color"], label=f"{name} (validation)")
    ax.set(title="Loss against wall-clock time (what a user waits for)", xlabel="wall-clock time since the optimizer's first step (s)",
           ylabel=LOSS_UNIT)
    if ax.get_lines():
        ax.legend()
    path = out / "loss_vs_time.png"
    save(fig, path)
    return Figure(path, "Loss against wall-clock seconds for each optimizer",
                  "Loss against wall-clock time: lines are training loss, open markers validation loss.")


def bytes_per_step(run: LoadedRun, out: Path) -> Figure:
    summaries = run.data.summary.get("optimizers", {})
    names = [n for n in run.optimizers if n in summaries]
    fig, axes = new_figure(width=max(6.0, 3.0 + 1.6 * len(names)))
    ax = axes[0][0]
    x = np.arange(len(names))
    width = 0.38
    values_all = []
    wire_missing = 0
    some_wire = any(analysis.total_bytes(summaries[n], "wire") for n in names)
    for j, (kind, label) in enumerate((("payload", "payload (handed to collectives)"),
                                       ("wire", "wire (counted on the interface)"))):
        style = {"color": ["#808080", "#ffffff"][j], "hatch": ["//", ".."][j], "edgecolor": "black"}
        shown = []
        # Side by side when wire bytes exist; a lone centred payload bar otherwise.
        for p, n in zip(x + ((j - 0.5) * width if some_wire else 0.0), names):
            v = analysis.total_bytes(summaries[n], kind)
            if v:
                shown.append((p, v))
            elif kind == "wire":
                wire_missing += 1
                if some_wire:
                    ax.text(p, 0.03, "wire not measured", transform=ax.get_xaxis_transform(), ha="center",
                            va="bottom", fontsize=7, rotation=90)
        if shown:
            ax.bar([p for p, _ in shown], [v for _, v in shown], width if some_wire else 0.5, label=label, **style)
            for p, v in shown:
                ax.annotate(human_bytes(v), (p, v), ha="center", va="bottom", fontsize=8,
                            xytext=(0, 2), textcoords="offset points")
            values_all += [v for _, v in shown]
    ax.set_yscale("log")
    labels = []
    for n in names:
        red = summaries[n].get("reduction_vs_baseline")
        labels.append(n + (" (baseline)" if n == run.baseline else
                           f"\n{red:,.0f}x fewer bytes" if red and red >= 10 else
                           f"\n{red:.2f}x reduction" if red else ""))
    ax.set_xticks(x, labels)
    ax.set_xlim(-0.7, len(names) - 0.3)
    ax.set(title="Bytes per worker per step (tx + rx, log scale)", ylabel="bytes per worker per step (log scale)")
    if not values_all:
        note_on_axes(ax, "no bytes recorded")
    else:
        ax.set_ylim(min(values_all) / 4, max(values_all) * 12)
        ax.legend(loc="upper right")
    if names and wire_missing == len(names):
        backend = run.data.environment.get("backend") or run.data.summary.get("run", {}).get("backend") or "this"
        ax.set_xlabel(f"wire bytes were not measured by the {backend} backend: payload only")
    path = out / "bytes_per_step.png"
    save(fig, path)
    return Figure(path, "Bytes per worker per step for each optimizer, payload and wire, log scale",
                  "Bytes per worker per step (sent + received), log scale. Payload is what the optimizer hands "
                  "to collectives; wire is what the node's interface counted.")


def _stacked(ax, positions, stacks: dict[str, list[float]], width: float) -> None:
    bottom = np.zeros(len(positions))
    for seg, values in stacks.items():
        color, hatch = SEGMENTS[seg]
        ax.bar(positions, values, width, bottom=bottom, label=seg, color=color, hatch=hatch, edgecolor="black",
               linewidth=0.6)
        bottom += np.asarray(values)


def step_time(run: LoadedRun, out: Path) -> Figure:
    fig, axes = new_figure()
    ax = axes[0][0]
    frames = {n: df for n, df in _frames(run).items() if len(df)}
    parts = {n: analysis.breakdown(df) for n, df in frames.items()}
    names = list(parts)
    stacks = {seg: [parts[n][seg] for n in names] for seg in analysis.BREAKDOWN}
    _stacked(ax, np.arange(len(names)), stacks, 0.55)
    for i, n in enumerate(names):
        total = sum(parts[n].values())
        ax.annotate(f"{total:.3g} s", (i, total), ha="center", va="bottom", xytext=(0, 2), textcoords="offset points",
                    fontsize=8)
    ax.set_xticks(np.arange(len(names)), names)
    ax.set(title="Where a step's time goes (mean over workers and steps, step 0 excluded)",
           ylabel="seconds per step")
    if names:
        ax.set_ylim(0, 1.12 * max(sum(p.values()) for p in parts.values()) or 1.0)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="phase")
    else:
        note_on_axes(ax, "no steps recorded")
    path = out / "step_time_breakdown.png"
    save(fig, path)
    return Figure(path, "Stacked bars of seconds per step in compute, compress, communicate, apply and waiting",
                  "Step-time breakdown: compute (forward, backward and data), compress, communicate (excluding "
                  "waiting), apply, and waiting for the slowest worker to reach the collective.")


def per_rank(run: LoadedRun, out: Path) -> Figure:
    frames = {n: df for n, df in _frames(run).items() if len(df)}
    fig, axes = new_figure(width=max(7.5, 2.2 + 2.4 * len(frames)), ncols=max(1, len(frames)), sharey=True)
    names_by_rank = {n.get("rank"): n.get("name") for n in run.data.environment.get("network", {}).get("nodes", [])
                     if isinstance(n, dict)}
    for ax, (name, df) in zip(axes[0], frames.items()):
        t = analysis.rank_breakdown(df)
        segs = [c for c in t.columns if c != "rank"]
        _stacked(ax, np.arange(len(t)), {s: list(t[s]) for s in segs}, 0.6)
        ax.set_xticks(np.arange(len(t)), [f"{r}\n{names_by_rank.get(r, '')}".strip() for r in t["rank"]])
        ax.set(title=name, xlabel="rank")
        if len(t) > 1:
            # The straggler computes longest and waits least; everyone else waits for it.
            slow = int(t["compute"].idxmax())
            rest = t["compute"].drop(index=slow).median()
            if rest > 0 and t["compute"][slow] > 1.2 * rest:
                top = t[segs].sum(axis=1)[slow]
                ax.annotate("slowest", (slow, top), ha="center", va="bottom", xytext=(0, 2),
                            textcoords="offset points", fontsize=8, fontweight="bold")
    axes[0][0].set_ylabel("seconds per step (mean)")
    tops = [analysis.rank_breakdown(df).drop(columns="rank").sum(axis=1).max() for df in frames.values()]
    if tops and max(tops) > 0:
        axes[0][0].set_ylim(0, 1.12 * max(tops))
    if frames:
        axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="phase")
    else:
        note_on_axes(axes[0][0], "no steps recorded")
    fig.suptitle("Per-worker breakdown: a straggler computes longest while the others wait for it", fontsize=10)
    path = out / "per_rank.png"
    save(fig, path)
    return Figure(path, "Stacked bars per worker of compute, optimizer work, communication and waiting",
                  "Per-worker step time: a slow worker shows as the tallest compute bar with little waiting, "
                  "while every other worker shows a large waiting segment.")


def time_to_target(run: LoadedRun, out: Path) -> Figure | None:
    result = analysis.time_to_target({n: analysis.per_step(df) for n, df in _frames(run).items()})
    if result is None:
        return None
    fig, axes = new_figure(height=max(2.4, 1.2 + 0.6 * len(result.reached)))
    ax = axes[0][0]
    names = list(result.reached)
    for i, n in enumerate(names):
        hit = result.reached[n]
        if hit is None:
            ax.text(0, i, "  not reached", va="center", fontsize=8)
            continue
        ax.barh(i, hit[0], 0.55, **bar_style(i))
        ax.annotate(f"{hit[0]:.3g} s (step {hit[1]})", (hit[0], i), va="center", xytext=(3, 0),
                    textcoords="offset points", fontsize=8)
    ax.set_yticks(np.arange(len(names)), names)
    ax.invert_yaxis()
    ax.margins(x=0.3)
    ax.set(title=f"Time to reach the target loss\n({result.explanation})", xlabel="wall-clock seconds until the target is reached")
    path = out / "time_to_target.png"
    save(fig, path)
    return Figure(path, "Wall-clock seconds each optimizer needed to reach the target loss",
                  f"Time to reach the target loss; {result.explanation} (a loss every optimizer reaches).")


PLOTS = [loss_vs_step, loss_vs_time, bytes_per_step, step_time, per_rank, time_to_target]


def run_plots(run: LoadedRun, out: Path) -> list[Figure]:
    """All per-run figures into `out`; none when no step was recorded (the report says so instead)."""
    if not len(run.data.metrics):
        return []
    out.mkdir(parents=True, exist_ok=True)
    return [f for plot in PLOTS if (f := plot(run, out)) is not None]
