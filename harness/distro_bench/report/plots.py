"""Per-run figures (PNG, Agg). Each function draws one figure from stored metrics and returns its Figure block."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from distro_bench.report import analysis
from distro_bench.report.document import Figure
from distro_bench.report.events import marks, trace_rates
from distro_bench.report.load import LoadedRun
from distro_bench.report.stats import t_critical
from distro_bench.report.style import SEGMENTS, bar_style, human_bytes, new_figure, note_on_axes, save, series_style
from distro_bench.results.summary import OptimizerSummary

LOSS_UNIT = "loss (cross-entropy, nats/token)"


def _frames(run: LoadedRun) -> dict:
    df = run.data.metrics
    return {name: df[df["optimizer"] == name] for name in run.optimizers}


def _seeds(df: pd.DataFrame) -> list:
    """The seeds of one optimizer's rows; [None] for a run folder without a `seed` column (one seed)."""
    if "seed" not in df.columns or df["seed"].isna().all():
        return [None]
    return sorted(df["seed"].dropna().unique().tolist())


def curves(df: pd.DataFrame) -> pd.DataFrame:
    """Per step of one optimizer: mean over seeds of the training and validation loss with 95% t-interval
    bounds (NaN with one seed), and the mean over seeds of the wall-clock at the step's end (each seed's
    clock starts at its own first step). Only the steps every seed ran: past them a mean and band would be
    over one or two seeds (a time budget ends each seed at its own step) and read as if over all."""
    cols = ["step", "loss", "loss_lo", "loss_hi", "val_loss", "val_lo", "val_hi", "elapsed_s", "seeds"]
    seeds = _seeds(df)
    per = [analysis.per_step(df if s is None else df[df["seed"] == s]).assign(seed=i) for i, s in enumerate(seeds)]
    per = [p for p in per if len(p)]
    if not per:
        return pd.DataFrame(columns=cols)
    g = pd.concat(per).groupby("step")
    out = pd.DataFrame({"loss": g["loss"].mean(), "val_loss": g["val_loss"].mean(), "elapsed_s": g["elapsed_s"].mean(),
                        "seeds": g["seed"].nunique()})
    out = out[out["seeds"] == len(per)]
    for col, lo, hi in (("loss", "loss_lo", "loss_hi"), ("val_loss", "val_lo", "val_hi")):
        n = g[col].count().reindex(out.index)
        half = g[col].std(ddof=1).reindex(out.index) / np.sqrt(n) * n.map(lambda k: t_critical(k - 1) if k > 1 else np.nan)
        out[lo], out[hi] = out[col] - half, out[col] + half
    return out.reset_index()[cols]


def _band(ax, x, lo, hi, color) -> bool:
    ok = ~(np.isnan(np.asarray(lo, dtype=float)) | np.isnan(np.asarray(hi, dtype=float)))
    if ok.sum() < 2:
        return False
    ax.fill_between(np.asarray(x)[ok], np.asarray(lo)[ok], np.asarray(hi)[ok], color=color, alpha=0.18, linewidth=0)
    return True


def _seed_words(frames: dict) -> str:
    n = max((len(_seeds(df)) for df in frames.values() if len(df)), default=1)
    return f" Lines are means over {n} seeds; shaded bands are 95% t-intervals." if n > 1 else ""


# ---- network events (issue 18): marks on the time axes; nothing is drawn for a run without events ----

EVENT_LINE = {"linestyle": (0, (2, 2)), "linewidth": 0.9, "alpha": 0.85}


def _event_marks(ax, run: LoadedRun, order: list[str]) -> int:
    """Each optimizer's changes on `ax` (training clock): a dashed line, or a shaded span for a window with
    an end (an outage, a straggler), in the optimizer's colour; each label once per place. Returns how many."""
    ev = run.events
    if ev.empty or not ev.changes:
        return 0
    placed = marks(ev, run.data.metrics)
    xs = [m.x0 for ms in placed.values() for m in ms] + [m.x1 for ms in placed.values() for m in ms if m.x1]
    lo, hi = ax.get_xlim()
    tol = 0.01 * max(hi - lo, max(xs, default=0) - min(xs, default=0), 1e-9)
    labelled: list[tuple[str, float]] = []
    n = 0
    for name, ms in placed.items():
        color = series_style(order.index(name) if name in order else 0)["color"]
        for m in ms:
            if m.x1 is not None and m.x1 > m.x0:
                ax.axvspan(m.x0, m.x1, color=color, alpha=0.12, linewidth=0, gid="event-span")
            else:
                ax.axvline(m.x0, color=color, gid="event-line", **EVENT_LINE)
            n += 1
            if not any(lab == m.label and abs(x - m.x0) <= tol for lab, x in labelled):
                labelled.append((m.label, m.x0))
                ax.annotate(m.label, (m.x0, 0.98), xycoords=("data", "axes fraction"), rotation=90, ha="right",
                            va="top", fontsize=7, color="#333333", xytext=(-1, 0), textcoords="offset points",
                            gid="event-label", zorder=6,  # above a legend that happens to cover it
                            bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none",
                                  "alpha": 0.7})
    return n


def _trace_line(ax, run: LoadedRun, order: list[str]) -> bool:
    """The rate a trace-driven link followed, on a secondary axis (a trace changes every ~100 ms: a line,
    not marks); the first optimizer with trace rows, on its clock."""
    ev = run.events
    if ev.empty or not len(ev.trace):
        return False
    for name in order:
        rates = trace_rates(ev, run.data.metrics, name)
        if rates:
            break
    else:
        return False
    twin = ax.twinx()
    twin.grid(False)
    top = 0.0
    for j, (link, f) in enumerate(list(rates.items())[:4]):
        twin.step(f["x"], f["rate"] / 1e6, where="post", color="#7f7f7f", linewidth=0.8, alpha=0.7,
                  linestyle=["-", "--", ":", "-."][j], label=f"{link} rate (trace)", gid="event-trace")
        top = max(top, float(f["rate"].max()) / 1e6)
    # The rate keeps to the lower third, behind the curves, which stay readable above it.
    twin.set_ylim(0, 3 * top or 1.0)
    twin.set_ylabel("trace rate (Mbit/s)")
    ax.set_zorder(twin.get_zorder() + 1)
    ax.patch.set_visible(False)
    twin.legend(loc="center right", fontsize=7)
    return True


def _events_words(run: LoadedRun, n_marks: int, traced: bool) -> str:
    words = []
    if n_marks:
        words.append(" Dashed lines and shaded spans (in each optimizer's colour) mark network events (a shaded "
                     "span is a window with an end: an outage or a straggler); see Network events. They sit on "
                     "this plot's clock, which leaves evaluations out, so a little before the table's t.")
    if traced:
        words.append(" The grey line (right axis) is the rate a trace-driven link followed.")
    return "".join(words)


def loss_vs_step(run: LoadedRun, out: Path) -> Figure:
    fig, axes = new_figure(ncols=2, sharey=True)
    train_ax, val_ax = axes[0]
    frames = _frames(run)
    for i, (name, df) in enumerate(frames.items()):
        s = curves(df)
        st = series_style(i)
        train_ax.plot(s["step"], s["loss"], label=name, linewidth=1.3, markevery=max(1, len(s) // 10),
                      markersize=4, **st)
        _band(train_ax, s["step"], s["loss_lo"], s["loss_hi"], st["color"])
        v = s.dropna(subset=["val_loss"])
        val_ax.plot(v["step"], v["val_loss"], label=name, linewidth=1.3, markersize=5, **st)
        if _band(val_ax, v["step"], v["val_lo"], v["val_hi"], st["color"]) is False and v["val_lo"].notna().any():
            val_ax.errorbar(v["step"], v["val_loss"], yerr=[v["val_loss"] - v["val_lo"], v["val_hi"] - v["val_loss"]],
                            linestyle="none", ecolor=st["color"], elinewidth=0.8, capsize=3)
    train_ax.set(title="Training loss (mean over workers)", xlabel="step", ylabel=LOSS_UNIT)
    val_ax.set(title="Validation loss (held-out data)", xlabel="step")
    if not any(len(line.get_xdata()) for line in val_ax.get_lines()):
        note_on_axes(val_ax, "no validation loss recorded")
    for ax in (train_ax, val_ax):
        if ax.get_lines():
            ax.legend(title="optimizer")
    path = out / "loss_vs_step.png"
    save(fig, path, root=out.parent)  # nothing below the report's folder followed (plots/ included)
    return Figure(path, "Training and validation loss against step for each optimizer",
                  "Loss against step. Left: training loss averaged over workers; right: held-out validation loss."
                  + _seed_words(frames))


def loss_vs_time(run: LoadedRun, out: Path) -> Figure:
    fig, axes = new_figure()
    ax = axes[0][0]
    frames = _frames(run)
    for i, (name, df) in enumerate(frames.items()):
        s = curves(df)
        st = series_style(i)
        ax.plot(s["elapsed_s"], s["loss"], label=f"{name} (training)", linewidth=1.2,
                markevery=max(1, len(s) // 10), markersize=4, **st)
        _band(ax, s["elapsed_s"], s["loss_lo"], s["loss_hi"], st["color"])
        v = s.dropna(subset=["val_loss"])
        if len(v):
            ax.plot(v["elapsed_s"], v["val_loss"], linestyle="none", marker=st["marker"], markersize=7,
                    markerfacecolor="white", markeredgecolor=st["color"], label=f"{name} (validation)")
            if v["val_lo"].notna().any():
                ax.errorbar(v["elapsed_s"], v["val_loss"], yerr=[v["val_loss"] - v["val_lo"], v["val_hi"] - v["val_loss"]],
                            linestyle="none", ecolor=st["color"], elinewidth=0.8, capsize=2)
    ax.set(title="Loss against wall-clock time (what a user waits for)", xlabel="wall-clock time since the optimizer's first step (s)",
           ylabel=LOSS_UNIT)
    target, budget = _target_value(run), _time_budget(run)
    if target is not None:
        ax.axhline(target, color="0.35", linestyle=(0, (4, 2)), linewidth=0.9, label=f"target val loss {target:.3g}")
    if budget is not None:
        ax.axvline(budget, color="0.35", linestyle=(0, (1, 2)), linewidth=0.9, label=f"time budget {budget:g} s")
    if ax.get_lines():
        ax.legend()
    n_marks = _event_marks(ax, run, list(frames))
    traced = _trace_line(ax, run, list(frames))
    path = out / "loss_vs_time.png"
    save(fig, path, root=out.parent)  # nothing below the report's folder followed (plots/ included)
    return Figure(path, "Loss against wall-clock seconds for each optimizer",
                  "Loss against wall-clock time: lines are training loss, open markers validation loss."
                  + _seed_words(frames) + (" A step's time is the mean over seeds of when it ended." if
                                           _seed_words(frames) else "") + _events_words(run, n_marks, traced))


def bytes_per_step(run: LoadedRun, out: Path) -> Figure:
    """Horizontal bars on a linear axis from zero, each annotated with its bytes and its share of the
    baseline's, so a 565x reduction looks like one (a log axis from an arbitrary floor made it look 3x)."""
    summaries = run.summary.optimizers
    names = [n for n in run.optimizers if n in summaries]
    some_wire = any(analysis.total_bytes(summaries[n], "wire") for n in names)
    kinds = [("payload", "payload (handed to collectives)")] + ([("wire", "wire (counted on the interface)")]
                                                                 if some_wire else [])
    fig, axes = new_figure(height=max(2.6, 1.4 + 0.55 * len(names) * len(kinds)))
    ax = axes[0][0]
    height = 0.8 / len(kinds)
    base = summaries.get(run.baseline) if run.baseline in names else None
    top = max((analysis.total_bytes(summaries[n], k) or 0.0 for n in names for k, _ in kinds), default=0.0)
    for j, (kind, label) in enumerate(kinds):
        style = {"color": ["#808080", "#ffffff"][j], "hatch": ["//", ".."][j], "edgecolor": "black"}
        ref = analysis.total_bytes(base, kind) if base else None
        shown = []
        for i, n in enumerate(names):
            y = i + (j - (len(kinds) - 1) / 2) * height
            v = analysis.total_bytes(summaries[n], kind)
            if not v:
                ax.annotate(f"{kind} not measured", (0, y), va="center", xytext=(3, 0), textcoords="offset points",
                            fontsize=7)
                continue
            shown.append((y, v))
            share = ("" if n == run.baseline or not ref else
                     f", 1/{ref / v:,.0f} of {run.baseline}" if ref / v >= 10 else f", {v / ref:.2g}x {run.baseline}")
            ax.annotate(human_bytes(v) + share, (v, y), va="center", xytext=(3, 0), textcoords="offset points",
                        fontsize=8)
        if shown:
            ax.barh([y for y, _ in shown], [v for _, v in shown], height, label=label, **style)
    labels = []
    for n in names:
        red = summaries[n].reduction_vs_baseline
        labels.append(n + ("\n(baseline)" if n == run.baseline else
                           f"\n{red:,.0f}x fewer bytes" if red and red >= 10 else
                           f"\n{red:.2f}x reduction" if red else ""))
    ax.set_yticks(np.arange(len(names)), labels)
    ax.invert_yaxis()
    ax.set(title="Bytes per worker per step (tx + rx, linear scale from zero)", xlabel="bytes per worker per step")
    ax.xaxis.set_major_formatter(lambda x, _pos: human_bytes(x) if x else "0")
    if not top:
        note_on_axes(ax, "no bytes recorded")
    else:
        ax.set_xlim(0, top * 1.45)  # room for the annotations right of the longest bar
        ax.legend(loc="lower right")
    if names and not some_wire:
        backend = run.data.environment.get("backend") or run.summary.run.backend or "this"
        ax.set_xlabel(f"bytes per worker per step (wire bytes were not measured by the {backend} backend: payload only)")
    path = out / "bytes_per_step.png"
    save(fig, path, root=out.parent)  # nothing below the report's folder followed (plots/ included)
    return Figure(path, "Bytes per worker per step for each optimizer, payload and wire, linear scale",
                  "Bytes per worker per step (sent + received) on a linear axis from zero: bar lengths are in "
                  "proportion, and each bar is labelled with its share of the baseline's. Payload is what the "
                  "optimizer hands to collectives; wire is what the node's interface counted.")


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
    save(fig, path, root=out.parent)  # nothing below the report's folder followed (plots/ included)
    return Figure(path, "Stacked bars of seconds per step in compute, compress, communicate, apply and waiting",
                  "Step-time breakdown: compute (forward, backward and data), compress, communicate (excluding "
                  "waiting), apply, and waiting for the slowest worker to reach the collective.")


def per_rank(run: LoadedRun, out: Path) -> Figure:
    frames = {n: df for n, df in _frames(run).items() if len(df)}
    fig, axes = new_figure(width=max(7.5, 2.2 + 2.4 * len(frames)), ncols=max(1, len(frames)), sharey=True)
    names_by_rank = {n["rank"]: n.get("name") for n in run.network_nodes if isinstance(n.get("rank"), int)}
    for ax, (name, df) in zip(axes[0], frames.items()):
        t = analysis.rank_breakdown(df)
        segs = [c for c in t.columns if c != "rank"]
        _stacked(ax, np.arange(len(t)), {s: list(t[s]) for s in segs}, 0.6)
        ax.set_xticks(np.arange(len(t)), [f"{r}\n{names_by_rank.get(r, '')}".strip() for r in t["rank"]])
        ax.set(title=name, xlabel="rank")
        if len(t) > 1 and t["compute"].notna().any():  # a folder without compute_s has no straggler to mark
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
    save(fig, path, root=out.parent)  # nothing below the report's folder followed (plots/ included)
    return Figure(path, "Stacked bars per worker of compute, optimizer work, communication and waiting",
                  "Per-worker step time: a slow worker shows as the tallest compute bar with little waiting, "
                  "while every other worker shows a large waiting segment.")


def _target_value(run: LoadedRun) -> float | None:
    v = (run.summary.target or {}).get("val_loss")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _time_budget(run: LoadedRun) -> float | None:
    b = run.summary.run.budget or {}
    v = b.get("value") if isinstance(b, dict) and b.get("kind") == "time" else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _summary_targets(run: LoadedRun) -> tuple[dict, str] | None:
    """optimizer -> (seconds, half-width or None, steps) or None when not reached, from summary.json
    (issue 16's keys: interpolated, mean over seeds); None for a run folder without them."""
    opts = run.summary.optimizers
    # the key written, even as null (not reached): a folder from before issue 16 lacks it
    if not opts or not all("time_to_target_s" in s.model_fields_set for s in opts.values()):
        return None
    out = {}
    for n, s in opts.items():
        t = s.time_to_target_s
        ci = (s.ci95 or {}).get("time_to_target_s")
        out[n] = None if t is None else (float(t), (ci[1] - ci[0]) / 2 if ci else None, s.steps_to_target)
    target = run.summary.target or {}
    given = target.get("how")
    how: str = given if isinstance(given, str) and given else "the run's target"
    val = target.get("val_loss")
    expl = (f"target val loss {val:.4f}: {how}" if isinstance(val, (int, float)) else how)
    return out, expl + "; interpolated between evaluations"


def time_to_target(run: LoadedRun, out: Path) -> Figure | None:
    stored = _summary_targets(run)
    if stored is not None:
        reached, explanation = stored
    else:
        result = analysis.time_to_target({n: analysis.per_step(df) for n, df in _frames(run).items()})
        if result is None:
            return None
        reached = {n: None if h is None else (h[0], None, h[1]) for n, h in result.reached.items()}
        explanation = result.explanation
    title = ["Time to reach the target loss", *textwrap.wrap(f"({explanation})", 90)]  # one long line was cut off
    fig, axes = new_figure(height=max(2.4, 1.2 + 0.6 * len(reached)) + 0.2 * len(title))
    ax = axes[0][0]
    names = list(reached)
    budget = _time_budget(run)
    for i, n in enumerate(names):
        hit = reached[n]
        if hit is None:
            o = run.summary.optimizers.get(n) or OptimizerSummary()
            k, seeds = o.target_reached, o.seeds
            ax.text(0, i, "  not reached" + (f" by every seed ({k}/{seeds} did)" if seeds and seeds > 1 and k is not None
                                             else ""), va="center", fontsize=8)
            continue
        seconds, half, step = hit
        # the whisker cut to what is possible: no time below 0 s or past the budget
        err = None if not half else [[min(half, seconds)], [min(half, (budget - seconds) if budget else half)]]
        ax.barh(i, seconds, 0.55, xerr=err, capsize=3 if half else 0, **bar_style(i))
        label = f"{seconds:.3g} s" + (f" ± {half:.2g}" if half else "")
        if step is not None:
            label += f" (step {step:.0f})" if float(step).is_integer() else f" (step {step:.1f})"
        ax.annotate(label, (seconds + (half or 0), i), va="center", xytext=(3, 0), textcoords="offset points",
                    fontsize=8)
    ax.set_yticks(np.arange(len(names)), names)
    ax.set_ylim(len(names) - 0.5, -0.5)  # a row per optimizer, first on top, even with no bar drawn
    ax.margins(x=0.3)
    budget = _time_budget(run)
    if budget is not None:
        ax.axvline(budget, color="0.35", linestyle=(0, (1, 2)), linewidth=0.9)
        ax.annotate(f"budget {budget:g} s", (budget, 1.0), xycoords=("data", "axes fraction"), fontsize=7,
                    ha="right", va="bottom", xytext=(-2, 1), textcoords="offset points")
    ax.set_title("\n".join(title), fontsize=9)
    ax.set_xlim(left=0)  # "not reached" is written at 0 s
    ax.set(xlabel="wall-clock seconds until the target is reached")
    path = out / "time_to_target.png"
    save(fig, path, root=out.parent)  # nothing below the report's folder followed (plots/ included)
    return Figure(path, "Wall-clock seconds each optimizer needed to reach the target loss",
                  f"Time to reach the target loss; {explanation}. Whiskers, where shown, are 95% intervals over seeds.")


def step_time_vs_time(run: LoadedRun, out: Path) -> Figure | None:
    """Each step's time (slowest worker) against the training clock, with the network events marked; only
    for a run with events (a steady run's step time is the breakdown plot's)."""
    if run.events.empty:
        return None
    fig, axes = new_figure()
    ax = axes[0][0]
    frames = {n: df for n, df in _frames(run).items() if len(df)}
    tops, bottoms = [], []
    for i, (name, df) in enumerate(frames.items()):
        s = analysis.per_step(analysis.steady(df))
        st = series_style(i)
        ax.plot(s["elapsed_s"], s["step_time_s"], drawstyle="steps-pre", label=name, linewidth=1.1,
                color=st["color"], linestyle=st["linestyle"])
        if len(s):
            tops.append(float(s["step_time_s"].max()))
            bottoms.append(float(s["step_time_s"].min()))
    if bottoms and min(bottoms) > 0 and max(tops) / min(bottoms) > 20:
        ax.set_yscale("log")  # AdamW's seconds and DisTrO's milliseconds on one axis
    ax.set(title="Step time against wall-clock time, network events marked",
           xlabel="wall-clock time since the optimizer's first step (s)", ylabel="seconds per step (slowest worker)")
    if ax.get_lines():  # outside the axes: the events' labels run along the top inside
        ax.legend(title="optimizer", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    n_marks = _event_marks(ax, run, list(frames))
    traced = _trace_line(ax, run, list(frames))
    path = out / "step_time_vs_time.png"
    save(fig, path, root=out.parent)  # nothing below the report's folder followed (plots/ included)
    return Figure(path, "Step time against wall-clock seconds for each optimizer, with network events marked",
                  "Step time (slowest worker; step 0 left out) against wall-clock time."
                  + _seed_words(frames) + _events_words(run, n_marks, traced))


PLOTS = [loss_vs_step, loss_vs_time, bytes_per_step, step_time, step_time_vs_time, per_rank, time_to_target]


def run_plots(run: LoadedRun, out: Path) -> list[Figure]:
    """All per-run figures into `out`; none when no step was recorded (the report says so instead)."""
    if not len(run.data.metrics):
        return []
    return [f for plot in PLOTS if (f := plot(run, out)) is not None]
