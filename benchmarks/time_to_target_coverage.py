"""How often the verdict's time-to-target intervals cover the truth, on synthetic runs whose crossing is known.

    python benchmarks/time_to_target_coverage.py [--trials 1000] [--seeds 3] [--seed 0]

Issue 49's audit: a fast method evaluated every 1.5 s beside a baseline evaluated every 11.3 s (the 2026-12-04
shoot-out's spacings). Each seed's validation loss is a smooth decreasing curve L(t) = L_inf + (L0 - L_inf)
exp(-t / tau) whose crossing of the target is drawn per seed (log-normal around 2.8 s and 17 s: a true
geometric speed-up of 17 / 2.8 = 6.07x), read only at each method's own evaluation times (the first one at a
random phase), with Gaussian noise on every evaluation. The run goes through the project's own pipeline:
results/fair.fairness (crossings on each method's own evaluations) -> report/verdict.verdicts -> headline.

It prints, over `--trials` shoot-outs of `--seeds` seeds:
- the share whose candidate time-to-target interval holds the true mean time, and whose speed-up interval
  holds the true geometric speed-up;
- with the baseline's crossing beyond the 60 s budget on every seed (right-censored): the share whose headline
  is a bound ("at least Nx sooner"), and whose bound is at or under the true speed-up.
tests/unit/report/test_time_to_target_coverage.py asserts the same on a smaller fixed set of trials.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from distro_bench.report.verdict import headline, verdicts
from distro_bench.results import fair

BUDGET_S = 60.0
TARGET, L0, L_INF = 3.0, 6.0, 2.5
SPREAD = 0.2  # log-normal sd of a seed's crossing time around the method's median
NOISE = 0.02  # sd of an evaluation's validation loss (nats)


@dataclass(frozen=True)
class Method:
    name: str
    median_s: float  # median true crossing time over seeds
    spacing_s: float  # training seconds between evaluations


FAST = Method("fast", 2.8, 1.5)
SLOW = Method("adamw", 17.0, 11.3)
SLOW_CENSORED = Method("adamw", 90.0, 11.3)  # crosses beyond the 60 s budget on (nearly) every seed


def true_mean_s(m: Method) -> float:
    """E[T] for T = median * exp(N(0, SPREAD))."""
    return m.median_s * math.exp(SPREAD ** 2 / 2)


def _curve(rng: np.random.Generator, m: Method, cross_s: float) -> pd.DataFrame:
    """A method's evaluations on one seed: its own cadence from a random phase, up to the budget."""
    tau = cross_s / math.log((L0 - L_INF) / (TARGET - L_INF))
    t = np.arange(rng.uniform(0.3, 1.0) * m.spacing_s, BUDGET_S + 1e-9, m.spacing_s)
    val = L_INF + (L0 - L_INF) * np.exp(-t / tau) + rng.normal(0.0, NOISE, len(t))
    steps = np.arange(1, len(t) + 1, dtype=float)
    return pd.DataFrame({"step": steps - 1, "steps": steps, "elapsed_s": t, "tokens": steps * 1000.0,
                         "loss": val, "val_loss": val})


def shootout(rng: np.random.Generator, cand: Method, base: Method, seeds: int) -> tuple[dict, dict]:
    """One synthetic run's summary (as results/metrics.summarize writes its keys) and each method's true
    crossing times per seed."""
    truth: dict[str, list[float]] = {cand.name: [], base.name: []}
    curves: dict[str, dict[int | None, pd.DataFrame]] = {cand.name: {}, base.name: {}}
    for seed in range(seeds):
        shared = rng.normal()  # a seed that is hard for one method is somewhat hard for the other
        for m in (cand, base):
            cross = m.median_s * math.exp(SPREAD * (0.5 * shared + math.sqrt(0.75) * rng.normal()))
            truth[m.name].append(cross)
            curves[m.name][seed] = _curve(rng, m, cross)
    figures = fair.fairness(curves, TARGET)
    optimizers = {}
    for name, per in figures.items():
        per_seed = {str(k): {**v, "train_time_s": BUDGET_S} for k, v in per.items()}
        times = [v["time_to_target_s"] for v in per_seed.values()]
        reached = sum(t is not None for t in times)
        optimizers[name] = {"seeds": seeds, "target_reached": reached, "per_seed": per_seed,
                            "time_to_target_s": float(np.mean(times)) if reached == seeds else None}
    summary = {"run": {"budget": {"kind": "time", "value": BUDGET_S}, "backend": "netns"}, "baseline": base.name,
               "target": {"val_loss": TARGET, "how": "checks.target_val_loss in the scenario", "post_hoc": False},
               "optimizers": {base.name: optimizers[base.name], cand.name: optimizers[cand.name]}}
    return summary, truth


@dataclass(frozen=True)
class Coverage:
    trials: int
    time_covered: int  # the candidate's time-to-target interval holds its true mean
    speedup_covered: int  # the speed-up interval holds the true geometric speed-up
    bound_headlines: int  # censored baseline: the headline is a bound ("at least ...")
    bound_holds: int  # censored baseline: the bound is at or under the true speed-up
    two_sided_headlines: int  # censored baseline: a headline "Nx sooner [lo, hi]" (must be 0)
    median_speedup: tuple[float, float, float]  # median over trials of the speed-up's (lo, mean, hi)
    median_time: tuple[float, float, float]  # median of the candidate's time interval (lo, mean, hi)


def measure(trials: int, seeds: int = 3, seed: int = 0) -> Coverage:
    rng = np.random.default_rng(seed)
    true_ratio = SLOW.median_s / FAST.median_s
    time_cov = sp_cov = bound = holds = two_sided = 0
    sps, tts = [], []
    for _ in range(trials):
        summary, _ = shootout(rng, FAST, SLOW, seeds)
        (v,) = verdicts(summary)
        iv = v.mine.restricted.interval if v.mine.restricted else None
        time_cov += bool(iv is not None and iv.lo <= true_mean_s(FAST) <= iv.hi)
        sp = v.paired_target_speedup
        sp_cov += bool(sp is not None and sp.lo <= true_ratio <= sp.hi)
        if sp is not None and iv is not None:
            sps.append((sp.lo, sp.mean, sp.hi))
            tts.append((iv.lo, iv.mean, iv.hi))
    censored_ratio = SLOW_CENSORED.median_s / FAST.median_s
    for _ in range(trials):
        summary, _ = shootout(rng, FAST, SLOW_CENSORED, seeds)
        (v,) = verdicts(summary)
        line = headline(v, summary)
        bound += "at least" in line
        two_sided += "x sooner [" in line
        sp = v.paired_target_speedup
        holds += bool(sp is not None and v.capped == "base" and sp.lo <= censored_ratio)
    def med(xs: list) -> tuple[float, float, float]:
        a = np.median(np.asarray(xs, dtype=float), axis=0) if xs else [math.nan] * 3
        return float(a[0]), float(a[1]), float(a[2])

    return Coverage(trials, time_cov, sp_cov, bound, holds, two_sided, med(sps), med(tts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0, help="the RNG seed (the figures are deterministic)")
    a = ap.parse_args()
    c = measure(a.trials, a.seeds, a.seed)
    n = c.trials
    print(f"{n} synthetic shoot-outs, {a.seeds} seeds, fast method every {FAST.spacing_s} s beside a baseline every "
          f"{SLOW.spacing_s} s; eval noise {NOISE} nats, budget {BUDGET_S:g} s")
    print(f"  candidate time-to-target interval covers the true mean ({true_mean_s(FAST):.2f} s): "
          f"{c.time_covered / n:.1%}")
    print(f"    (median interval {c.median_time[1]:.2f} s [{c.median_time[0]:.2f}, {c.median_time[2]:.2f}])")
    print(f"  speed-up interval covers the true {SLOW.median_s / FAST.median_s:.2f}x: {c.speedup_covered / n:.1%}")
    print(f"    (median interval {c.median_speedup[1]:.2f}x [{c.median_speedup[0]:.2f}, {c.median_speedup[2]:.2f}])")
    print(f"  baseline censored at {BUDGET_S:g} s (true {SLOW_CENSORED.median_s / FAST.median_s:.1f}x): headline a "
          f"bound in {c.bound_headlines / n:.1%}, the bound at or under the truth in {c.bound_holds / n:.1%}, "
          f"a two-sided 'Nx sooner [lo, hi]' in {c.two_sided_headlines / n:.1%}")


if __name__ == "__main__":
    main()
