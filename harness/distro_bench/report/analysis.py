"""Pure numbers behind the plots and tables, computed from the stored per-step metrics."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from distro_bench.results import fair
from distro_bench.results.figures import total_bytes as total_bytes  # one sum of bytes (issue 50); re-exported

BREAKDOWN = ["compute", "compress", "communicate", "apply", "wait for slowest", "other"]


def steady(df: pd.DataFrame) -> pd.DataFrame:
    """Step 0 (warm-up, connection set-up) is left out, as in the summary."""
    return df[df["step"] > 0] if df["step"].nunique() > 1 else df


def per_step(df: pd.DataFrame) -> pd.DataFrame:
    """One row per step of one optimizer: mean loss over ranks, validation loss, the step's end in training
    seconds since the optimizer's first step (harness/distro_bench/results/fair.py's clock: evaluations left out where recorded),
    and the slowest rank's time. Over repeats, each column is the mean over the seeds that ran the step."""
    cols = ["step", "loss", "val_loss", "elapsed_s", "step_time_s"]
    if not len(df):
        return pd.DataFrame(columns=cols)
    frames = []
    for _seed, rows in fair.split_seeds(df):
        c = fair.curve(rows).set_index("step")
        c["step_time_s"] = rows.groupby("step")["step_time_s"].max()
        frames.append(c.reset_index()[cols])
    if len(frames) == 1:
        return frames[0]
    return pd.concat(frames).groupby("step", as_index=False)[cols[1:]].mean()[cols]


def breakdown(df: pd.DataFrame) -> dict[str, float]:
    """Mean seconds per step and rank in each phase; the phases add up to the mean step time.

    Communication includes the time a rank sat in a collective waiting for the slowest rank (wait_s),
    so that part is shown on its own and `communicate` is the rest.
    """
    s = steady(df)
    if not len(s):
        return dict.fromkeys(BREAKDOWN, 0.0)
    compute = (s["compute_s"] + s["data_s"].fillna(0.0)).mean()
    wait = s["wait_s"].fillna(0.0)
    comm = (s["comm_s"] - wait).clip(lower=0.0).mean()
    parts = {"compute": compute, "compress": s["compress_s"].mean(), "communicate": comm,
             "apply": s["apply_s"].mean(), "wait for slowest": wait.mean()}
    parts["other"] = max(0.0, s["step_time_s"].mean() - sum(parts.values()))
    return {k: float(0.0 if pd.isna(v) else v) for k, v in parts.items()}


def rank_breakdown(df: pd.DataFrame) -> pd.DataFrame:
    """Per rank: mean compute, optimizer work, communication and waiting seconds per step (straggler view)."""
    s = steady(df)
    if not len(s):
        return pd.DataFrame(columns=["rank", "compute", "optimizer (compress + apply)", "communicate", "wait for slowest"])
    wait = s["wait_s"].fillna(0.0)
    t = pd.DataFrame({
        "rank": s["rank"],
        "compute": s["compute_s"] + s["data_s"].fillna(0.0),
        "optimizer (compress + apply)": s["compress_s"] + s["apply_s"],
        "communicate": (s["comm_s"] - wait).clip(lower=0.0),
        "wait for slowest": wait,
    })
    return t.groupby("rank").mean().reset_index()


@dataclass
class TargetResult:
    target: float
    basis: str  # "validation loss" | "training loss (mean of the last 5 steps)"
    explanation: str
    reached: dict[str, tuple[float, int] | None]  # optimizer -> (seconds, the step during which it is reached) or None


def time_to_target(steps_by_opt: dict[str, pd.DataFrame], target: float | None = None) -> TargetResult | None:
    """Wall-clock seconds until each optimizer first reaches `target`, interpolated linearly between the
    evaluations around it (harness/distro_bench/results/fair.py); by default the worst optimizer's best validation loss, which
    every optimizer reaches. Without validation losses for all, a 5-step running mean of training loss.
    Per-step frames (`per_step`) in; over repeats they are the seeds' mean curves, while summary.json's
    `time_to_target_s` is the mean of each seed's own crossing."""
    frames = {k: v for k, v in steps_by_opt.items() if len(v)}
    if not frames:
        return None
    use_val = all(v["val_loss"].notna().any() for v in frames.values())
    curves = {}
    for name, v in frames.items():
        c = pd.DataFrame({"step": v["step"], "steps": v["step"] + 1, "elapsed_s": v["elapsed_s"],
                          "tokens": v["step"] + 1, "loss": v["loss"],
                          "val_loss": v["val_loss"] if use_val else v["loss"].rolling(5, min_periods=1).mean()})
        curves[name] = c
    chosen = target if target is not None else fair.default_target({n: {None: c} for n, c in curves.items()})
    if chosen is None:
        return None
    worst = max(curves, key=lambda n: float(fair.evaluations(curves[n])["val_loss"].min()))
    reached: dict[str, tuple[float, int] | None] = {}
    for name, c in curves.items():
        hit = fair.crossing(c, chosen)
        reached[name] = (hit.time_s, math.ceil(hit.steps - 1e-9) - 1) if hit else None
    basis = "validation loss" if use_val else "training loss (mean of the last 5 steps)"
    if target is not None:
        expl = f"target {basis} {chosen:.4f} (set for this run)"
    elif len(frames) > 1:
        expl = f"target {basis} {chosen:.4f}: the best {worst}, the worst optimizer, reached (interpolated between evaluations)"
    else:
        expl = f"target {basis} {chosen:.4f}: the best {worst} reached (the only optimizer)"
    return TargetResult(target=chosen, basis=basis, explanation=expl, reached=reached)
