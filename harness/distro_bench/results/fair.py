"""The comparison's figures from stored per-step metrics: time/tokens/steps to a target loss (read on each
method's own evaluations, interval-censored between the two that bracket the crossing), validation loss at
equal wall-clock and at equal steps, and 95% intervals over seeds.

Every function here is pure (frames in, numbers out), so a test can redo each figure by hand from
metrics.parquet. docs/fair-comparison.md explains the choices.

Clock: `elapsed_s` is training seconds from the optimizer's first step (the `train_time_s` column: the
budget's clock, which leaves evaluations and stop decisions out); for run folders written before it
existed, the end of the step since the first step began (evaluations included).
Tokens: all ranks' tokens up to and including the step. Steps: steps done (step index + 1).
"""

from __future__ import annotations

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
    """Where a validation-loss curve first reaches the target, read on that curve's own evaluations.

    The crossing lies between the last evaluation above the target and the first at or below it: it is
    interval-censored in (`lo_s`, `hi_s`]. The estimate (`time_s`, `tokens`, `steps`) interpolates linearly
    between those two evaluations; when the first evaluation is already at or below the target (nothing
    earlier to interpolate from), it is the midpoint of (0, first evaluation]. `exact` is True only when the
    interval has no width (an evaluation exactly at t = 0, or a folder from before the bounds were recorded)."""

    time_s: float
    tokens: float
    steps: float
    exact: bool
    lo_s: float = 0.0  # the last evaluation above the target (0 when the first evaluation is already at or below)
    hi_s: float | None = None  # the first evaluation at or below the target (time_s when not given)

    def __post_init__(self) -> None:
        if self.hi_s is None:
            object.__setattr__(self, "hi_s", self.time_s)
        if self.exact:
            object.__setattr__(self, "lo_s", self.time_s)
            object.__setattr__(self, "hi_s", self.time_s)


def crossing(c: pd.DataFrame, target: float) -> Crossing | None:
    """The curve's first crossing of `target` on its own evaluations (Crossing), None when it never reaches it.
    No chord is drawn from t = 0 or across another method's grid: issue 49 found such chords reporting a
    2.8 s crossing as 7.0 s."""
    ev = evaluations(c)
    below = np.flatnonzero(ev["val_loss"].to_numpy() <= target + 1e-12)
    if not len(below):
        return None
    i = int(below[0])
    if i == 0:
        r = ev.iloc[0]
        hi = float(r["elapsed_s"])
        return Crossing(hi / 2, float(r["tokens"]) / 2, float(r["steps"]) / 2, exact=hi <= 0, lo_s=0.0, hi_s=hi)
    a, b = ev.iloc[i - 1], ev.iloc[i]
    f = (a["val_loss"] - target) / (a["val_loss"] - b["val_loss"])  # a > target >= b, so 0 < f <= 1
    time_s, tokens, steps = (float(a[k] + f * (b[k] - a[k])) for k in ("elapsed_s", "tokens", "steps"))
    lo, hi = float(a["elapsed_s"]), float(b["elapsed_s"])
    return Crossing(time_s, tokens, steps, exact=hi - lo <= 0, lo_s=lo, hi_s=hi)


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
    """The worst best: the highest of every curve's lowest evaluated validation loss, so every optimizer and
    seed reaches it on its own evaluations and the slowest to do so ends right there."""
    bests = [float(ev["val_loss"].min()) for per in curves.values() for c in per.values()
             if len(ev := evaluations(c))]
    return max(bests) if bests else None


def eval_spacing(c: pd.DataFrame) -> float | None:
    """Median training seconds between one curve's evaluations (None with fewer than two)."""
    t = evaluations(c)["elapsed_s"].to_numpy(dtype=float)
    return float(np.median(np.diff(t))) if len(t) > 1 else None


def fairness(curves: dict[str, dict[int | None, pd.DataFrame]], target: float | None) -> dict[str, dict[int | None, dict]]:
    """Per optimizer and seed: time/tokens/steps to `target` (None = not reached) and validation loss at
    equal time / equal steps. Equal points are taken within a seed: the shortest optimizer's training
    seconds and the fewest steps any optimizer of that seed ran. Time to target is read on each method's own
    evaluations (`crossing`): an interval-censored time in (`time_to_target_lo_s`, `time_to_target_hi_s`],
    estimated by linear interpolation between the two evaluations that bracket it; `time_to_target_exact` is
    true only for an interval without width. The equal-time and equal-steps losses use every evaluation."""
    seeds = sorted({s for per in curves.values() for s in per}, key=lambda s: -1 if s is None else s)
    out: dict[str, dict[int | None, dict]] = {name: {} for name in curves}
    for seed in seeds:
        mine = {n: per[seed] for n, per in curves.items() if seed in per and len(per[seed])}
        if not mine:
            continue
        # every curve here has rows (`mine`), so each has an end
        equal_time = min(float(c["elapsed_s"].iloc[-1]) for c in mine.values())
        equal_steps = min(float(c["steps"].iloc[-1]) for c in mine.values())
        for name, c in mine.items():
            hit = crossing(c, target) if target is not None else None
            out[name][seed] = {
                "time_to_target_s": hit.time_s if hit else None,
                "tokens_to_target": hit.tokens if hit else None,
                "steps_to_target": hit.steps if hit else None,
                "target_reached": None if target is None else hit is not None,
                "time_to_target_exact": hit.exact if hit else None,
                "time_to_target_lo_s": hit.lo_s if hit else None,
                "time_to_target_hi_s": hit.hi_s if hit else None,
                "val_loss_at_equal_time": value_at(c, "elapsed_s", equal_time),
                "val_loss_at_equal_steps": value_at(c, "steps", equal_steps),
                "equal_time_s": equal_time,
                "equal_steps": equal_steps,
            }
    return out
