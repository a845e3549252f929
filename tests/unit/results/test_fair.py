"""The comparison's figures (harness/distro_bench/results/fair.py, metrics.summarize over seeds): each one redone by hand
from a metrics frame built here."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from distro_bench.results import fair, metrics, stats


def records(opt, seed, vals, *, ranks=2, dt=0.2, tokens=100, every=5, steps=None, rank_jitter=0.0):
    """Per-step records of one optimizer and seed: step i ends at (i + 1) * dt training seconds; `vals`
    are the validation losses at steps every-1, 2*every-1, ... (the last one at the final step)."""
    steps = steps or every * len(vals)
    evals = {min(every * (k + 1), steps) - 1: v for k, v in enumerate(vals)}
    out = []
    for step in range(steps):
        for r in range(ranks):
            out.append({
                "type": "step", "optimizer": opt, "seed": seed, "rank": r, "step": step, "loss": 4.0 - 0.01 * step,
                "val_loss": evals.get(step), "lr": 1e-3, "step_time_s": dt, "data_s": 0.0, "compute_s": dt / 2,
                "stretch_s": 0.0, "compress_s": 0.0, "comm_s": dt / 2, "apply_s": 0.0,
                "t_start": 1000.0 + step * dt, "t_ready": 1000.0 + step * dt + dt / 2,
                "train_time_s": (step + 1) * dt + rank_jitter * r,
                "payload_tx_bytes": 1000 if opt == "adamw" else 10, "payload_rx_bytes": 1000 if opt == "adamw" else 10,
                "collectives": 1, "ring_bytes": 1000.0, "wire_tx_bytes": None, "wire_rx_bytes": None,
                "tokens": tokens, "param_checksum": "x" if step in evals else None,
            })
    return out


def test_crossing_equals_the_hand_computation_from_metrics():
    df = metrics.records_to_frame(records("distro", 0, [3.0, 2.0, 1.5]))
    c = fair.curve(df)
    hit = fair.crossing(c, 2.5)
    # evaluations: steps done 5 (3.0 at 1.0 s, 1000 tokens) and 10 (2.0 at 2.0 s, 2000 tokens); 2.5 is halfway
    assert hit == fair.Crossing(time_s=pytest.approx(1.5), tokens=pytest.approx(1500.0), steps=pytest.approx(7.5),
                                exact=False, lo_s=pytest.approx(1.0), hi_s=pytest.approx(2.0))
    # the same from the frame by hand, column by column
    ev = df.dropna(subset=["val_loss"]).groupby("step").agg(v=("val_loss", "mean"), t=("train_time_s", "max"))
    (s0, a), (s1, b) = list(ev.iterrows())[:2]
    f = (a.v - 2.5) / (a.v - b.v)
    assert hit.time_s == pytest.approx(a.t + f * (b.t - a.t))
    assert hit.tokens == pytest.approx(df[df.step <= s0].tokens.sum() + f * df[(df.step > s0) & (df.step <= s1)].tokens.sum())


def test_crossing_uses_the_slowest_rank_and_not_reached_is_none():
    c = fair.curve(metrics.records_to_frame(records("distro", 0, [3.0, 2.0], rank_jitter=0.05)))
    assert fair.crossing(c, 2.5).time_s == pytest.approx(1.5 + 0.05)
    assert fair.crossing(c, 1.0) is None


def test_first_evaluation_already_below_is_the_midpoint_of_zero_to_it_and_not_exact():
    c = fair.curve(metrics.records_to_frame(records("distro", 0, [2.0, 1.0])))
    hit = fair.crossing(c, 2.5)
    assert (hit.time_s, hit.steps, hit.exact) == (pytest.approx(0.5), 2.5, False)
    assert (hit.lo_s, hit.hi_s) == (0.0, pytest.approx(1.0))


def test_value_at_interpolates_and_never_extrapolates():
    c = fair.curve(metrics.records_to_frame(records("distro", 0, [3.0, 2.0, 1.0])))
    assert fair.value_at(c, "elapsed_s", 1.25) == pytest.approx(2.75)
    assert fair.value_at(c, "steps", 15) == pytest.approx(1.0)
    assert fair.value_at(c, "steps", 16) is None and fair.value_at(c, "elapsed_s", 0.5) is None


def test_old_frames_without_train_time_use_the_step_ends():
    df = metrics.records_to_frame(records("distro", 0, [3.0, 2.0])).drop(columns=["train_time_s"])
    assert fair.curve(df)["elapsed_s"].iloc[-1] == pytest.approx(2.0)


def test_t_interval_by_hand():
    iv = stats.t_interval([1.0, 2.0, 3.0])
    half = 4.302653 * 1.0 / math.sqrt(3)  # t(0.975, 2 dof) * sd / sqrt(n)
    assert (iv.mean, iv.lo, iv.hi) == (2.0, pytest.approx(2.0 - half), pytest.approx(2.0 + half))
    one = stats.t_interval([5.0])
    assert (one.mean, one.lo, one.hi, one.n) == (5.0, 5.0, 5.0, 1) and stats.t_interval([]) is None
    assert stats.t_interval([2.0, 2.0, None, float("nan")]).hi == 2.0
    assert not hasattr(fair, "t_interval")  # issue 35: one t_interval, results/stats.py's


def _two_optimizers_three_seeds():
    recs = []
    # adamw: 10 steps at 0.5 s (5 s); distro: 40 steps at 0.125 s (5 s), faster to every loss
    for seed, shift in ((0, 0.0), (1, 0.1), (2, -0.1)):
        recs += records("adamw", seed, [3.0 + shift, 2.6 + shift], dt=0.5)
        recs += records("distro", seed, [3.2 + shift, 2.8 + shift, 2.4 + shift, 2.2 + shift], dt=0.125, every=10)
    return metrics.records_to_frame(recs)


def test_summary_over_seeds_has_means_intervals_and_the_comparison():
    df = _two_optimizers_three_seeds()
    target = metrics.comparison_target(df)
    assert target["val_loss"] == pytest.approx(2.7)  # the worst best: adamw seed 1
    out = metrics.summarize(df, [], "adamw", target["val_loss"])
    a, d = out["adamw"], out["distro"]
    assert a["seeds"] == d["seeds"] == 3 and d["steps"] == 40
    # On its own evaluations (every 1.25 s: 3.2, 2.8, 2.4, 2.2 + shift) distro crosses 2.7 between 2.5 s and
    # 3.75 s (seed 2: between 1.25 s and 2.5 s, where it is exactly 2.7)
    per_seed = [2.5 + (2.8 + sh - 2.7) / 0.4 * 1.25 for sh in (0.0, 0.1)] + [2.5]
    assert d["time_to_target_s"] == pytest.approx(sum(per_seed) / 3)
    # the interval carries each seed's bracket: lower bounds (2.5, 2.5, 1.25), upper bounds (3.75, 3.75, 2.5)
    lo, hi = stats.t_interval([2.5, 2.5, 1.25]).lo, stats.t_interval([3.75, 3.75, 2.5]).hi
    assert d["ci95"]["time_to_target_s"] == [pytest.approx(max(0.0, lo)), pytest.approx(min(5.0, hi))]
    assert d["per_seed"]["2"]["time_to_target_lo_s"] == pytest.approx(1.25)
    assert d["per_seed"]["2"]["time_to_target_hi_s"] == pytest.approx(2.5)
    assert d["per_seed"]["1"]["time_to_target_s"] == pytest.approx(per_seed[1])
    # adamw reaches 2.7 only in seed 1's last evaluation, seeds 0 and 2 earlier (2.6 and 2.5 at 5 s)
    assert a["target_reached"] == 3
    # equal time: both ran 5 s, so each optimizer's final val loss; equal steps: adamw's 10 steps
    assert d["val_loss_at_equal_time"] == pytest.approx(2.2)
    assert d["val_loss_at_equal_steps"] == pytest.approx(3.2)
    assert a["val_loss_at_equal_steps"] == pytest.approx(2.6)
    assert d["reduction_vs_baseline"] == pytest.approx(100.0) and d["ci95"]["reduction_vs_baseline"] == [100.0, 100.0]


def test_summary_csv_flattens_each_interval():
    df = _two_optimizers_three_seeds()
    out = metrics.summarize(df, [], "adamw")
    csv = metrics.summary_frame(out)
    row = csv.set_index("optimizer").loc["distro"]
    assert row["final_val_loss_ci95_lo"] == pytest.approx(out["distro"]["ci95"]["final_val_loss"][0])
    assert row["final_val_loss_ci95_hi"] > row["final_val_loss"] > row["final_val_loss_ci95_lo"]
    # issue 52: each row says which run and commit it came from, then the summary keys in their order
    assert list(csv.columns[: len(metrics.SUMMARY_KEYS) + 3]) == ["optimizer", "run_id", "git_commit",
                                                                  *metrics.SUMMARY_KEYS]


def test_one_seed_and_old_frames_have_null_intervals():
    df = metrics.records_to_frame(records("adamw", 0, [3.0, 2.0]) + records("distro", 0, [3.0, 2.5]))
    out = metrics.summarize(df, [], "adamw")
    assert out["distro"]["seeds"] == 1 and out["distro"]["ci95"]["final_val_loss"] is None
    old = df.drop(columns=["seed", "train_time_s"])
    old_out = metrics.summarize(old, [], "adamw")
    assert old_out["distro"]["final_val_loss"] == pytest.approx(2.5) and old_out["distro"]["seeds"] == 1


def test_a_seed_that_misses_the_target_makes_the_mean_not_reached():
    recs = records("adamw", 0, [3.0, 2.0]) + records("adamw", 1, [3.0, 2.8])
    out = metrics.summarize(metrics.records_to_frame(recs), [], "adamw", target=2.5)
    assert out["adamw"]["time_to_target_s"] is None and out["adamw"]["target_reached"] == 1
    assert out["adamw"]["per_seed"]["0"]["time_to_target_s"] == pytest.approx(1.5)


def test_per_step_averages_seeds_by_step():
    from distro_bench.report import analysis

    df = _two_optimizers_three_seeds()
    s = analysis.per_step(df[df["optimizer"] == "adamw"])
    assert len(s) == 10 and s["val_loss"].dropna().tolist() == pytest.approx([3.0, 2.6])
    assert s["elapsed_s"].iloc[-1] == pytest.approx(5.0)


def test_time_to_target_is_read_on_each_methods_own_evaluations():
    # issue 49: distro evaluates every 1.25 s; its crossing of 2.7 is read between its own 2.5 s (2.8) and
    # 3.75 s (2.4) evaluations, never on another method's coarser grid nor on a chord from t = 0
    c = fair.curve(metrics.records_to_frame(records("distro", 0, [3.2, 2.8, 2.4, 2.2], dt=0.125, every=10)))
    assert fair.eval_spacing(c) == pytest.approx(1.25)
    hit = fair.crossing(c, 2.7)
    assert hit.time_s == pytest.approx(2.5 + 0.25 * 1.25)
    assert (hit.lo_s, hit.hi_s, hit.exact) == (pytest.approx(2.5), pytest.approx(3.75), False)
    assert not hasattr(fair, "on_grid") and not hasattr(fair, "seed_grid")


def _fine_and_coarse():
    """fast: evaluated every 1.4 s, truly at 2.0 by about 3.1 s (2.3 at 1.4 s, 2.05 at 2.8 s, 1.8 at 4.2 s);
    slow: evaluated every 6.6 s, 2.01 at 6.6 s and 1.5 at 13.2 s, so it reaches 2.0 at about 6.7 s."""
    fast = [2.3, 2.05, 1.8, 1.6, 1.5, 1.4, 1.35, 1.3, 1.25]
    return metrics.records_to_frame(records("fast", 0, fast, dt=0.35, every=4)
                                    + records("slow", 0, [2.01, 1.5], dt=0.66, every=10))


def test_own_evaluations_keep_two_methods_in_their_true_order():
    # issue 35 inverted these two with a nearest-evaluation grid; issue 49 drops the grid: each method's own
    # evaluations bracket its crossing, fast's in (2.8, 4.2] s, slow's in (6.6, 13.2] s
    df = _fine_and_coarse()
    curves = {str(n): {s: fair.curve(r) for s, r in fair.split_seeds(rows)} for n, rows in df.groupby("optimizer")}
    out = fair.fairness(curves, 2.0)
    fast, slow = out["fast"][0], out["slow"][0]
    assert slow["time_to_target_s"] == pytest.approx(6.6 + 0.01 / 0.51 * 6.6)
    assert fast["time_to_target_s"] == pytest.approx(2.8 + 0.05 / 0.25 * 1.4)
    assert (fast["time_to_target_lo_s"], fast["time_to_target_hi_s"]) == (pytest.approx(2.8), pytest.approx(4.2))
    assert (slow["time_to_target_lo_s"], slow["time_to_target_hi_s"]) == (pytest.approx(6.6), pytest.approx(13.2))
    assert fast["time_to_target_exact"] is False and slow["time_to_target_exact"] is False


def test_a_first_evaluation_hit_is_interval_censored_and_carried_into_the_summary():
    recs = records("adamw", 0, [3.0, 2.6], dt=0.5) + records("distro", 0, [2.5, 2.2, 2.1, 2.0], dt=0.125, every=10)
    recs += records("adamw", 1, [3.1, 2.5], dt=0.5) + records("distro", 1, [2.4, 2.3, 2.2, 2.1], dt=0.125, every=10)
    out = metrics.summarize(metrics.records_to_frame(recs), [], "adamw", target=2.6)
    d = out["distro"]
    for seed in ("0", "1"):  # already at or below 2.6 at its first evaluation (1.25 s): somewhere in (0, 1.25]
        assert d["per_seed"][seed]["time_to_target_exact"] is False
        assert d["per_seed"][seed]["time_to_target_lo_s"] == 0.0
        assert d["per_seed"][seed]["time_to_target_hi_s"] == pytest.approx(1.25)
        assert d["per_seed"][seed]["time_to_target_s"] == pytest.approx(0.625)  # the midpoint
    assert d["time_to_target_exact"] is False and out["adamw"]["time_to_target_exact"] is False
    # no interval below 0 s, nor past the training (the plain t interval of (1.25, 1.25) is a point; adamw's is not)
    for o in out.values():
        lo, hi = o["ci95"]["time_to_target_s"]
        assert 0.0 <= lo <= hi <= max(v["train_time_s"] for v in o["per_seed"].values())
    # the verdict: against a time known only as (0, 1.25] the speed-up has no upper end, so it is a bound: adamw's
    # lower bounds (2.5 s on both seeds) over distro's upper (1.25 s) give at least 2x
    from distro_bench.report.verdict import verdict_lines, verdicts

    summary = {"run": {"budget": {"kind": "steps", "value": 40}}, "baseline": "adamw",
               "target": {"val_loss": 2.6, "how": "set in the scenario", "post_hoc": False}, "optimizers": out}
    (v,) = verdicts(summary)
    assert v.paired_target_speedup.lo == pytest.approx(2.0) and math.isinf(v.paired_target_speedup.hi)
    text = "\n".join(verdict_lines(summary))
    assert "at least 2.0x sooner" in text and "interval-censored" in text and "[0.0, 1.2]" in text


def test_the_post_hoc_target_is_one_every_curve_reaches_on_its_own_evaluations():
    """The default (post-hoc) target is the worst best: the highest of every curve's lowest evaluated loss
    (B's 3.0 at 0.5 s), which every curve then reaches on its own evaluations."""
    def curve(ts, losses):
        return pd.DataFrame({"step": range(len(ts)), "steps": [i + 1 for i in range(len(ts))], "elapsed_s": ts,
                             "tokens": [i + 1 for i in range(len(ts))], "loss": losses, "val_loss": losses})
    a = curve([0.0, 1.0, 2.0], [5.0, 2.0, 1.0])
    b = curve([0.0, 0.5, 1.0, 1.5, 2.0], [5.0, 3.0, 4.0, 4.0, 4.0])
    curves = {"a": {0: a}, "b": {0: b}}
    target = fair.default_target(curves)
    assert target == pytest.approx(3.0)
    got = fair.fairness(curves, target)
    assert got["a"][0]["target_reached"] and got["b"][0]["target_reached"], got
