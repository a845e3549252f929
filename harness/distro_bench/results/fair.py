"""The comparison's figures from stored per-step metrics: time/tokens/steps to a target loss (interpolated
between evaluations), validation loss at equal wall-clock and at equal steps, and 95% intervals over seeds.

Every function here is pure (frames in, numbers out), so a test can redo each figure by hand from
metrics.parquet. docs/fair-comparison.md explains the choices.

Clock: `elapsed_s` is training seconds from the optimizer's first step (the `train_time_s` column: the
budget's clock, which leaves evaluations and stop decisions out); for run folders written before it
existed, the end of the step since the first step began (evaluations included).
Tokens: all ranks' tokens up to and including the step. Steps: steps done (step index + 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd


def split_seeds(df: pd.DataFrame) -> list[tuple[int | None, pd.DataFrame]]:
    """(seed, rows) per seed; a frame without seeds (a run folder before repeats) is one group, seed None."""
    if "seed" not in df.columns or df["seed"].isna().all():
        return [(None, df)]
    return [(int(s), rows) for s, rows in df.groupby("seed", sort=True)]


def curve(df: pd.DataFrame) -> pd.DataFrame:
    """Per step of one optimizer and seed: elapsed_s, tokens, steps done, mean training loss and mean
    validation loss over ranks (NaN where not evaluated)."""
    cols = ["step", "steps", "elapsed_s", "tokens", "loss", "val_loss"]
    if not len(df):
        return pd.DataFrame(columns=cols)
    g = df.groupby("step")
    if "train_time_s" in df.columns and df["train_time_s"].notna().all():
        elapsed = g["train_time_s"].max()
    else:
        elapsed = (df["t_start"] + df["step_time_s"]).groupby(df["step"]).max() - df["t_start"].min()
    out = pd.DataFrame({
        "elapsed_s": elapsed,
        "tokens": g["tokens"].sum().cumsum(),
        "loss": g["loss"].mean(),
        "val_loss": g["val_loss"].mean(),
    }).reset_index()
    out["steps"] = out["step"] + 1
    return out[cols]


def evaluations(c: pd.DataFrame) -> pd.DataFrame:
    return c.dropna(subset=["val_loss"]).reset_index(drop=True)


@dataclass(frozen=True)
class Crossing:
    """Where a validation-loss curve first reaches the target, by linear interpolation between the last
    evaluation above it and the first at or below it. `exact` is False when the first evaluation is already
    at or below (nothing earlier to interpolate from): the target was then reached somewhere in
    (`lo_s`, `time_s`], an interval-censored time whose figures are that evaluation's (upper bounds)."""

    time_s: float
    tokens: float
    steps: float
    exact: bool
    lo_s: float = 0.0  # the earliest the crossing can have been: time_s when exact, else 0 (nothing known before)

    def __post_init__(self) -> None:
        if self.exact:
            object.__setattr__(self, "lo_s", self.time_s)


def crossing(c: pd.DataFrame, target: float) -> Crossing | None:
    ev = evaluations(c)
    below = np.flatnonzero(ev["val_loss"].to_numpy() <= target + 1e-12)
    if not len(below):
        return None
    i = int(below[0])
    if i == 0:
        r = ev.iloc[0]
        return Crossing(float(r["elapsed_s"]), float(r["tokens"]), float(r["steps"]), exact=False, lo_s=0.0)
    a, b = ev.iloc[i - 1], ev.iloc[i]
    f = (a["val_loss"] - target) / (a["val_loss"] - b["val_loss"])  # a > target >= b, so 0 < f <= 1
    time_s, tokens, steps = (float(a[k] + f * (b[k] - a[k])) for k in ("elapsed_s", "tokens", "steps"))
    return Crossing(time_s, tokens, steps, exact=True)


def value_at(c: pd.DataFrame, x: str, at: float) -> float | None:
    """Validation loss interpolated linearly at `at` on axis `x` (elapsed_s | tokens | steps); None outside
    the evaluated range (never extrapolated)."""
    ev = evaluations(c)
    if not len(ev):
        return None
    xs, ys = ev[x].to_numpy(dtype=float), ev["val_loss"].to_numpy(dtype=float)
    tol = 1e-9 * max(1.0, abs(at))
    if at < xs[0] - tol or at > xs[-1] + tol:
        return None
    return float(np.interp(min(max(at, xs[0]), xs[-1]), xs, ys))


def end_of(c: pd.DataFrame, x: str) -> float | None:
    return float(c[x].iloc[-1]) if len(c) else None


def default_target(curves: dict[str, dict[int | None, pd.DataFrame]]) -> float | None:
    """The worst best, read as time to target reads the curves (on each seed's shared grid, `on_grid`): the
    highest of every curve's lowest gridded validation loss, so every optimizer and seed reaches it there and the
    slowest to do so ends right there. (A best between two grid points is not on the grid: the raw best would
    be a target its own curve never crosses.)"""
    bests = []
    for seed in {s for per in curves.values() for s in per}:
        mine = [per[seed] for per in curves.values() if seed in per and len(per[seed])]
        grid = seed_grid(mine)
        for c in mine:
            ev = evaluations(on_grid(c, grid))
            if len(ev):
                bests.append(float(ev["val_loss"].min()))
    return max(bests) if bests else None


def eval_spacing(c: pd.DataFrame) -> float | None:
    """Median training seconds between one curve's evaluations (None with fewer than two)."""
    t = evaluations(c)["elapsed_s"].to_numpy(dtype=float)
    return float(np.median(np.diff(t))) if len(t) > 1 else None


def seed_grid(curves: list[pd.DataFrame]) -> float | None:
    """One seed's shared time grid: the coarsest evaluation spacing of its curves (None for a lone curve)."""
    spacings = [g for g in (eval_spacing(c) for c in curves) if g]
    return max(spacings) if len(curves) > 1 and spacings else None


def on_grid(c: pd.DataFrame, grid_s: float | None) -> pd.DataFrame:
    """The curve read on a shared time grid from t = 0 (every `grid_s` training seconds): its validation loss
    interpolated linearly at each grid point inside its evaluated range, plus its first and last evaluations
    (where its known curve starts and ends: every method has both). Evaluations are scheduled by steps, so a
    method that steps 8x faster would otherwise get 8x more chances to cross a target and a finer chord to
    interpolate on; on the grid every method has the same resolution. Grid values are interpolated, never the
    nearest evaluation: an evaluation up to half a grid step away would move the crossing by as much and
    could invert two methods' order (tests/unit/test_fair.py). Returns evaluation rows only (elapsed_s,
    tokens, steps interpolated alike); an evaluation at t = 0, where a run records one, is the grid's first."""
    ev = evaluations(c)
    if not grid_s or len(ev) < 2:
        return c
    t = ev["elapsed_s"].to_numpy(dtype=float)
    k0, k1 = math.ceil(t[0] / grid_s - 1e-9), math.floor(t[-1] / grid_s + 1e-9)
    times = sorted({float(t[0]), float(t[-1]), *(k * grid_s for k in range(max(k0, 0), k1 + 1))})
    times = [x for x in times if t[0] - 1e-9 <= x <= t[-1] + 1e-9]
    out = {"elapsed_s": times}
    for col in ("tokens", "steps", "val_loss"):
        out[col] = np.interp(times, t, ev[col].to_numpy(dtype=float)).tolist()
    grid = pd.DataFrame(out)
    grid["step"] = np.interp(times, t, ev["step"].to_numpy(dtype=float))
    grid["loss"] = np.nan
    return grid[["step", "steps", "elapsed_s", "tokens", "loss", "val_loss"]]


def fairness(curves: dict[str, dict[int | None, pd.DataFrame]], target: float | None) -> dict[str, dict[int | None, dict]]:
    """Per optimizer and seed: time/tokens/steps to `target` (None = not reached) and validation loss at
    equal time / equal steps. Equal points are taken within a seed: the shortest optimizer's training
    seconds and the fewest steps any optimizer of that seed ran. Time to target is read on a shared time
    grid from t = 0 (`on_grid`: the coarsest optimizer's evaluation spacing in that seed), so every method has
    the same chances to cross it; a crossing at the first point is interval-censored (`time_to_target_exact`
    false, `time_to_target_lo_s` its lower bound). The equal-time and equal-steps losses use every evaluation."""
    seeds = sorted({s for per in curves.values() for s in per}, key=lambda s: -1 if s is None else s)
    out: dict[str, dict[int | None, dict]] = {name: {} for name in curves}
    for seed in seeds:
        mine = {n: per[seed] for n, per in curves.items() if seed in per and len(per[seed])}
        if not mine:
            continue
        # every curve here has rows (`mine`), so each has an end
        equal_time = min(float(c["elapsed_s"].iloc[-1]) for c in mine.values())
        equal_steps = min(float(c["steps"].iloc[-1]) for c in mine.values())
        grid = seed_grid(list(mine.values()))
        for name, c in mine.items():
            hit = crossing(on_grid(c, grid), target) if target is not None else None
            out[name][seed] = {
                "time_to_target_s": hit.time_s if hit else None,
                "tokens_to_target": hit.tokens if hit else None,
                "steps_to_target": hit.steps if hit else None,
                "target_reached": None if target is None else hit is not None,
                "time_to_target_exact": hit.exact if hit else None,
                "time_to_target_lo_s": hit.lo_s if hit else None,
                "val_loss_at_equal_time": value_at(c, "elapsed_s", equal_time),
                "val_loss_at_equal_steps": value_at(c, "steps", equal_steps),
                "equal_time_s": equal_time,
                "equal_steps": equal_steps,
            }
    return out
