"""Pure numbers behind the plots and tables, computed from the stored per-step metrics."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

BREAKDOWN = ["compute", "compress", "communicate", "apply", "wait for slowest", "other"]


def steady(df: pd.DataFrame) -> pd.DataFrame:
    """Step 0 (warm-up, connection set-up) is left out, as in the summary."""
    return df[df["step"] > 0] if df["step"].nunique() > 1 else df


def per_step(df: pd.DataFrame) -> pd.DataFrame:
    """One row per step of one optimizer: mean loss over ranks, validation loss, the step's end in seconds
    since the optimizer's first step began (wall clock: what a user waits for), and the slowest rank's time."""
    if not len(df):
        return pd.DataFrame(columns=["step", "loss", "val_loss", "elapsed_s", "step_time_s"])
    g = df.assign(end=df["t_start"] + df["step_time_s"]).groupby("step")
    out = pd.DataFrame({
        "loss": g["loss"].mean(),
        "val_loss": g["val_loss"].mean(),  # NaN except at evaluation steps
        "elapsed_s": g["end"].max() - df["t_start"].min(),
        "step_time_s": g["step_time_s"].max(),
    }).reset_index()
    return out


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
    reached: dict[str, tuple[float, int] | None]  # optimizer -> (seconds, step) or None


def time_to_target(steps_by_opt: dict[str, pd.DataFrame]) -> TargetResult | None:
    """Wall-clock seconds until each optimizer first reaches the loss the worst optimizer ends at.

    The worst final loss is the one target every optimizer reaches, so each bar is a real time, never a
    guess. Validation loss where recorded for all; otherwise a 5-step running mean of training loss.
    """
    frames = {k: v for k, v in steps_by_opt.items() if len(v)}
    if not frames:
        return None
    use_val = all(v["val_loss"].notna().any() for v in frames.values())
    series = {}
    for name, v in frames.items():
        if use_val:
            s = v.dropna(subset=["val_loss"])
            series[name] = (s["val_loss"].to_numpy(), s["elapsed_s"].to_numpy(), s["step"].to_numpy())
        else:
            s = v["loss"].rolling(5, min_periods=1).mean()
            series[name] = (s.to_numpy(), v["elapsed_s"].to_numpy(), v["step"].to_numpy())
    finals = {k: float(v[0][-1]) for k, v in series.items()}
    worst = max(finals, key=finals.get)
    target = finals[worst]
    reached: dict[str, tuple[float, int] | None] = {}
    for name, (loss, elapsed, step) in series.items():
        hit = [i for i, x in enumerate(loss) if not math.isnan(x) and x <= target + 1e-12]
        reached[name] = (float(elapsed[hit[0]]), int(step[hit[0]])) if hit else None
    basis = "validation loss" if use_val else "training loss (mean of the last 5 steps)"
    expl = (f"target {basis} {target:.4f}: where {worst}, the worst optimizer, ends" if len(frames) > 1 else
            f"target {basis} {target:.4f}: where {worst} ends (the only optimizer)")
    return TargetResult(target=target, basis=basis, explanation=expl, reached=reached)


def total_bytes(summary: dict, kind: str) -> float | None:
    """tx + rx bytes per worker per step of one optimizer's summary; kind: payload | wire."""
    tx, rx = summary.get(f"{kind}_tx_bytes_per_step"), summary.get(f"{kind}_rx_bytes_per_step")
    if tx is None or rx is None:
        return None
    return float(tx) + float(rx)
