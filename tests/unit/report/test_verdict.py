"""The verdict block and sentence from synthetic summaries: with and without intervals, not reached, old folders."""

from __future__ import annotations

import copy

import pytest

from distro_bench.report.verdict import sentence, verdict_lines, verdicts
from distro_bench.report.verdict_words import figure_lines


def _opt(step, ttt, eq_time, eq_steps, wire, *, seeds=3, half=None):
    s = {"steps": 100, "step_time_s_mean": step, "time_to_target_s": ttt, "val_loss_at_equal_time": eq_time,
         "val_loss_at_equal_steps": eq_steps, "wire_tx_bytes_per_step": wire, "wire_rx_bytes_per_step": wire,
         "payload_tx_bytes_per_step": wire, "payload_rx_bytes_per_step": wire, "seeds": seeds}
    if half is not None:
        s["ci95"] = {k: [v - h, v + h] for k, v, h in (("step_time_s_mean", step, half[0]), ("time_to_target_s", ttt, half[1]),
                                                        ("val_loss_at_equal_time", eq_time, half[2]),
                                                        ("val_loss_at_equal_steps", eq_steps, half[3])) if v is not None}
    else:
        s["ci95"] = None
    return s


def summary(with_ci=True, distro_ttt=19.0, adamw_ttt=49.4):
    return {
        "schema_version": 1, "run": {"scenario": "home-dsl", "budget": {"kind": "time", "value": 300}},
        "baseline": "adamw", "target": {"val_loss": 2.75, "how": "worst optimizer's best val loss"},
        "optimizers": {
            "adamw": _opt(3.02, adamw_ttt, 3.02, 2.41, 113_000_000, half=(0.1, 4.0, 0.03, 0.02) if with_ci else None),
            "distro": _opt(0.377, distro_ttt, 2.61, 3.00, 200_000, half=(0.01, 2.0, 0.04, 0.03) if with_ci else None),
        },
    }


def test_sentence_with_intervals_matches_the_issue_example():
    (v,) = verdicts(summary())
    text = sentence(v, "home-dsl")
    assert text.startswith("On home-dsl, distro reached val loss 2.75 in 19 ± 2 s, 2.6x sooner than adamw, "
                           "with 565x fewer bytes; at equal time its loss was 0.41 ± 0.05 lower"), text
    assert "at equal steps 0.59 ± 0.04 higher" in text


def test_single_seed_has_no_plus_minus():
    s = summary(with_ci=False)
    for o in s["optimizers"].values():
        o["seeds"] = 1
    lines = verdict_lines(s)
    assert lines and not any("±" in line for line in lines)
    assert any("2.6x sooner than adamw" in line for line in lines)
    assert lines[0] == "distro vs adamw: no verdict (1 seed, no interval); 565x fewer bytes"
    # issue 52: the block under a "no verdict" says what it is
    assert " ".join(x.strip() for x in lines[1:3]) == ("distro vs adamw (1 seed; budget 300 s of training each): no verdict (1 seed, "
                                    "no interval); figures measured, not a verdict")


def test_not_reached_either_side():
    (v,) = verdicts(summary(distro_ttt=None))
    assert "did not reach val loss 2.75 (which adamw reached in 49 ± 4 s)" in sentence(v)
    (v,) = verdicts(summary(adamw_ttt=None))
    assert "reached val loss 2.75 in 19 ± 2 s, which adamw did not reach" in sentence(v)
    (v,) = verdicts(summary(distro_ttt=None, adamw_ttt=None))
    assert "did not reach val loss 2.75, nor did adamw" in sentence(v)
    assert any("neither reached it" in line for line in verdict_lines(summary(distro_ttt=None, adamw_ttt=None)))


def test_interval_spanning_zero_is_called_noise():
    s = summary()
    s["optimizers"]["distro"]["val_loss_at_equal_time"] = 3.01
    s["optimizers"]["distro"]["ci95"]["val_loss_at_equal_time"] = [2.97, 3.05]
    (v,) = verdicts(s)
    assert "0.01 ± 0.05 lower (within noise)" in sentence(v)


def test_old_summary_without_the_new_keys():
    old = copy.deepcopy(summary(with_ci=False))
    old.pop("target")
    for o in old["optimizers"].values():
        for k in ("time_to_target_s", "val_loss_at_equal_time", "val_loss_at_equal_steps", "seeds", "ci95"):
            o.pop(k)
    old["optimizers"]["distro"]["reduction_vs_baseline"] = 565.0
    lines = verdict_lines(old)
    text = "\n".join(lines)
    assert "not recorded" in text and "±" not in text
    assert "distro ran steps 8.0x faster than adamw with 565x fewer bytes." in text


def test_no_baseline_or_only_baseline_gives_no_block():
    s = summary()
    assert verdict_lines({**s, "baseline": "sgd"}) == []
    s["optimizers"].pop("distro")
    assert verdict_lines(s) == []


def test_reached_by_some_seeds_only_says_so():
    s = summary(distro_ttt=None)
    s["optimizers"]["distro"]["target_reached"] = 2
    (v,) = verdicts(s)
    assert "did not reach val loss 2.75 in every seed (only 2 of 3 did)" in sentence(v)
    assert any("not reached (by 2 of 3 seeds)" in line for line in verdict_lines(s))


def test_equal_times_read_as_about_the_same():
    (v,) = verdicts(summary(distro_ttt=49.0, adamw_ttt=49.4))
    assert "reached val loss 2.75 in 49 ± 2 s, about as soon as adamw (1.0x)" in sentence(v)


def _ranked_opt(ttt, reached, loss, tx, seeds=3):
    return {"time_to_target_s": ttt, "target_reached": reached, "seeds": seeds, "val_loss_at_equal_time": loss,
            "payload_tx_bytes_per_step": tx, "payload_rx_bytes_per_step": tx, "steps": 40,
            "ci95": {"time_to_target_s": [ttt - 1, ttt + 1] if ttt is not None else None}}


def test_ranking_orders_by_time_to_target_then_loss_and_puts_misses_last():
    from distro_bench.report.verdict import ranking, ranking_lines

    summary = {"baseline": "adamw", "optimizers": {
        "adamw": _ranked_opt(20.0, 3, 3.1, 4e6),
        "missed": _ranked_opt(None, 2, 2.0, 1e3),      # best loss, but one seed never reached the target
        "distro": _ranked_opt(11.0, 3, 3.0, 4e3),
        "sparse": _ranked_opt(5.0, 3, 2.6, 7e3),
        "tied-worse": _ranked_opt(11.0, 3, 3.2, 4e3),
    }}
    ranked = ranking(summary)
    assert [r.optimizer for r in ranked] == ["sparse", "distro", "tied-worse", "adamw", "missed"]
    assert [r.rank for r in ranked] == [1, 2, 3, 4, 5]
    assert ranked[-1].reached == "2/3" and ranked[0].bytes_basis == "payload" and ranked[0].bytes_per_step == 14e3
    lines = ranking_lines(summary)
    assert lines[2].split()[:2] == ["1", "sparse"] and "5.0 ± 1.0 s" in lines[2]
    assert all(len(line) <= 80 for line in lines)


def test_no_ranking_for_two_optimizers():
    from distro_bench.report.verdict import ranking, ranking_lines

    summary = {"baseline": "adamw", "optimizers": {"adamw": _ranked_opt(20.0, 3, 3.1, 4e6), "distro": _ranked_opt(11.0, 3, 3.0, 4e3)}}
    assert ranking(summary) == [] and ranking_lines(summary) == []


# ---- paired over seeds (issue 27) ----------------------------------------------------------------------

def _paired_summary(base_eq, cand_eq, base_ttt, cand_ttt, base_step=(3.0, 3.1, 2.9), cand_step=(0.38, 0.39, 0.37),
                    budget=60.0):
    """A summary as metrics.summarize writes it: per-seed figures, their means and unpaired t intervals."""
    from distro_bench.results.stats import t_interval

    def opt(eq, ttt, step, wire):
        per = {str(k): {"val_loss_at_equal_time": e, "time_to_target_s": t, "step_time_s_mean": st,
                        "train_time_s": budget, "val_loss_at_equal_steps": None}
               for k, (e, t, st) in enumerate(zip(eq, ttt, step))}
        s = {"seeds": len(eq), "wire_tx_bytes_per_step": wire, "wire_rx_bytes_per_step": wire,
             "target_reached": sum(t is not None for t in ttt), "per_seed": per, "ci95": {}}
        for key, vals in (("val_loss_at_equal_time", eq), ("time_to_target_s", ttt), ("step_time_s_mean", step)):
            iv = t_interval(vals) if None not in vals else None
            s[key] = iv.mean if iv else None
            s["ci95"][key] = [iv.lo, iv.hi] if iv else None
        return s

    return {"run": {"scenario": "home-dsl", "budget": {"kind": "time", "value": budget}}, "baseline": "adamw",
            "target": {"val_loss": 3.0, "how": "checks.target_val_loss in the scenario"},
            "optimizers": {"adamw": opt(base_eq, base_ttt, base_step, 1e8), "distro": opt(cand_eq, cand_ttt, cand_step, 2e5)}}


def test_a_consistent_gain_is_not_noise_when_paired():
    # Seeds share init and data, so they move both optimizers: a 0.05 gain on every seed under a 0.5 spread.
    base = [3.0, 2.5, 3.5]
    cand = [b - d for b, d in zip(base, (0.05, 0.045, 0.055))]
    s = _paired_summary(base, cand, [40.0, 30.0, 50.0], [20.0, 15.0, 26.0])
    (v,) = verdicts(s)
    # the old rule: each side's own half-width added in quadrature, about ±1.8: "within noise"
    from distro_bench.report.verdict import Estimate, _diff, _lower_higher

    def unpaired(o):
        lo, hi = s["optimizers"][o]["ci95"]["val_loss_at_equal_time"]
        return Estimate(s["optimizers"][o]["val_loss_at_equal_time"], (hi - lo) / 2)

    old = _lower_higher(_diff(unpaired("distro"), unpaired("adamw")))
    assert "within noise" in old
    # paired: differences -0.05, -0.045, -0.055, half-width 4.303 * 0.005 / sqrt(3) = 0.0124
    d = v.loss_diff_equal_time
    assert d.mean == pytest.approx(-0.05) and d.half == pytest.approx(4.303 * 0.005 / 3 ** 0.5, rel=1e-3)
    text = _lower_higher(d)
    assert "within noise" not in text and text.startswith("0.050 ± 0.012 lower")


def test_speed_up_has_a_paired_log_scale_interval_and_a_noise_qualifier():
    s = _paired_summary([3.0, 2.5, 3.5], [2.9, 2.4, 3.4], [40.0, 30.0, 50.0], [20.0, 15.0, 25.0])
    (v,) = verdicts(s)
    iv = v.paired_target_speedup
    assert iv.mean == pytest.approx(2.0) and iv.lo == pytest.approx(2.0) and iv.hi == pytest.approx(2.0)
    s = _paired_summary([3.0, 2.5, 3.5], [2.9, 2.4, 3.4], [40.0, 30.0, 50.0], [20.0, 40.0, 40.0])
    (v,) = verdicts(s)
    import math

    logs = [math.log(40 / 20), math.log(30 / 40), math.log(50 / 40)]
    m = sum(logs) / 3
    sd = (sum((x - m) ** 2 for x in logs) / 2) ** 0.5
    assert v.paired_target_speedup.mean == pytest.approx(math.exp(m))
    assert v.paired_target_speedup.hi == pytest.approx(math.exp(m + 4.3026527 * sd / 3 ** 0.5))  # t(0.975, 2), exact
    assert "within noise" in sentence(v)


def test_a_missed_seed_counts_at_the_budget_as_a_restricted_mean_and_says_so():
    # issue 35: adamw missed on seed 1 of a 60 s budget. min(T, 60) is then exactly 60 (T is beyond the budget):
    # the restricted mean to 60 s, with an interval within [0, 60]. Issue 49: as a speed-up it is a bound (adamw's
    # true time is later), so it reads "at least" / "not shown sooner" with the lower end, never "Nx [lo, hi]"
    s = _paired_summary([3.0, 2.5, 3.5], [2.9, 2.4, 3.4], [40.0, None, 50.0], [20.0, 15.0, 25.0])
    (v,) = verdicts(s)
    assert v.tau == 60.0 and v.capped == "base" and v.base.restricted.missed == 1
    assert v.base.restricted.interval.mean == pytest.approx(50.0)
    assert v.base.restricted.interval.hi == 60.0  # the unclipped t interval reaches 74.8 s
    assert v.paired_target_speedup.mean == pytest.approx((2.0 * 4.0 * 2.0) ** (1 / 3))
    text = "\n".join(verdict_lines(s))
    lo = v.paired_target_speedup.lo
    assert f"not shown sooner (at least {lo:.1f}x" in text and "2.5x sooner" not in text
    assert "adamw not reached in 60 s on 1 of 3 seeds" in text and "restricted means to 60 s" in text
    assert "(2/3 hit)" in text and "adamw 2/3" in text


def test_time_to_target_interval_never_runs_past_the_budget_or_below_zero():
    s = _paired_summary([3.0, 2.5, 3.5], [2.9, 2.4, 3.4], [58.0, 30.0, 59.9], [1.0, 2.0, 30.0])
    (v,) = verdicts(s)
    lo, hi = v.base.time_to_target.bounds
    assert hi == 60.0 and lo > 0
    assert v.mine.time_to_target.bounds[0] == 0.0
    assert "[" in v.base.time_to_target.text(" s") and "±" not in v.base.time_to_target.text(" s")


def test_the_block_fits_80_columns():
    s = _paired_summary([3.0, 2.5, 3.5], [2.9, 2.4, 3.4], [40.0, None, 50.0], [20.0, 15.0, 25.0])
    lines = verdict_lines(s)
    assert lines and max(len(line) for line in lines) <= 80, "\n".join(lines)


def test_later_names_the_inverse_ratio_and_its_interval():
    # distro needs twice adamw's time on every seed: "2.0x later [2.0, 2.0]", never "0.5x later"
    s = _paired_summary([3.0, 2.5, 3.5], [2.9, 2.4, 3.4], [10.0, 12.0, 14.0], [20.0, 24.0, 28.0])
    (v,) = verdicts(s)
    text = sentence(v)
    assert "2.0x later than adamw ([2.0, 2.0])" in text and "0.5x" not in text


def test_the_runs_last_line_uses_the_verdicts_figure():

    base = [3.0, 2.5, 3.5]
    s = _paired_summary(base, [b - d for b, d in zip(base, (0.05, 0.045, 0.055))], [40.0, 30.0, 50.0], [20.0, 15.0, 26.0])
    for o in s["optimizers"].values():
        o["final_val_loss"] = 9.0  # a different figure: the last line must not use it
    (v,) = verdicts(s)
    (line,) = figure_lines(s)
    d = v.loss_diff_equal_time
    assert f"val loss at equal time {d.mean:+.2f} ± {d.half:.2f}" in line


def test_bytes_over_the_whole_run_beside_bytes_per_step():
    # at equal time distro ran 8x the steps: 500x fewer bytes per step is 62.5x fewer over the run
    s = _paired_summary([3.0, 2.5, 3.5], [2.9, 2.4, 3.4], [40.0, 30.0, 50.0], [20.0, 15.0, 25.0])
    s["optimizers"]["adamw"]["steps"], s["optimizers"]["distro"]["steps"] = 20, 160
    rows = {r[0]: r for r in __import__("distro_bench.report.verdict", fromlist=["rows"]).rows(verdicts(s)[0])}
    assert rows["wire bytes/step (tx+rx)"][3] == "500x fewer bytes"
    whole = rows["wire bytes, whole run"]
    assert whole[3] == "62x fewer bytes" or whole[3] == "63x fewer bytes"
    assert whole[1] == "64 MB" and whole[2] == "4 GB"


def test_some_seeds_reached_is_not_called_neither():
    # distro reached the target on 2 of 3 seeds, adamw on none: not "neither reached it"
    s = _paired_summary([3.0, 2.5, 3.5], [2.9, 2.4, 3.4], [None, None, None], [20.0, None, 25.0])
    (v,) = verdicts(s)
    cmp = next(r[3] for r in __import__("distro_bench.report.verdict", fromlist=["rows"]).rows(v) if r[0].startswith("time to"))
    # restricted to the 60 s budget (misses count 60 s) the two still compare, as restricted means named so
    assert cmp.startswith("restricted means: 1.9x sooner") and cmp.endswith("within noise") and "neither" not in cmp


def test_no_time_interval_in_any_report_lies_outside_zero_and_the_budget(tmp_path):
    # issue 35: before, a budget-capped mean got an unclipped t interval (">=16 ± 11 s" on a 20 s budget) and
    # the ranking showed "[-2.7, 23.6]" on a 25 s budget. Spread-out seeds, misses and a crossing at the first
    # evaluation, over three optimizers, through the verdict block, the ranking and the written report.
    import json
    import re

    from distro_bench import api
    from distro_bench.report.verdict import ranking_lines
    from tests.unit.runfolders import make_run

    budget = 20.0
    times = {"adamw": [2.0, 19.5, None], "distro": [0.5, 1.0, 15.0], "diloco": [None, 3.0, 19.9]}
    run = make_run(tmp_path, optimizers={"adamw": (2_000_000, 2_000_000, 2.40, 0.30),
                                         "distro": (2_000, 5_000, 2.55, 0.05), "diloco": (20_000, 20_000, 2.5, 0.2)})
    summary = json.loads((run / "summary.json").read_text())
    summary["run"]["budget"] = {"kind": "time", "value": budget}
    summary["target"] = {"val_loss": 2.8, "how": "checks.target_val_loss in the scenario", "post_hoc": False}
    from distro_bench.results.stats import t_interval

    for name, ts in times.items():
        o = summary["optimizers"][name]
        for k, t in zip(sorted(o["per_seed"]), ts):
            o["per_seed"][k].update({"time_to_target_s": t, "train_time_s": budget + 0.4,
                                     "time_to_target_exact": None if t is None else t != 0.5,
                                     "time_to_target_lo_s": None if t is None else (0.0 if t == 0.5 else t)})
        iv = t_interval([t for t in ts if t is not None])  # the unclipped interval an old summary carried
        o["time_to_target_s"] = iv.mean if None not in ts else None
        o["ci95"]["time_to_target_s"] = [iv.lo, iv.hi]
        o["target_reached"] = sum(t is not None for t in ts)
        assert iv.lo < 0 or iv.hi > budget or None in ts
    (run / "summary.json").write_text(json.dumps(summary))

    def spans(text):
        """Every interval in `text`: '[a, b]', and 'm ± h' as [m - h, m + h]."""
        num = r"(-?[\d.,]+)"
        out = [(float(a.replace(",", "")), float(b.replace(",", ""))) for a, b in re.findall(rf"\[{num}, {num}\]", text)]
        out += [(float(m) - float(h), float(m) + float(h)) for m, h in re.findall(r"(-?[\d.]+) ± ([\d.]+)", text)]
        return out

    lines = verdict_lines(summary)
    time_rows = [line for line in lines if line.lstrip().startswith("time to")]
    assert len(time_rows) == 2
    for line in time_rows:
        mine, theirs = line.split("  vs ")
        found = spans(mine) + spans(theirs.split("  ")[0])
        assert len(found) == 2 and all(0.0 <= lo <= hi <= budget for lo, hi in found), line
    assert ranking_lines(summary)
    files = api.report(run)
    md = files.markdown.read_text()
    rows = [r for r in md.splitlines() if r.startswith("| time to") or re.match(r"\| \d+ \| (adamw|distro|diloco) \|", r)]
    assert len(rows) == 5  # two verdict rows, three ranking rows
    for r in rows:
        cells = r.split("|")
        time_cells = cells[2:4] if r.startswith("| time to") else cells[3:4]
        for lo, hi in spans(" ".join(time_cells)):
            assert 0.0 <= lo <= hi <= budget, r


def test_a_headline_opens_the_verdict_wins_ties_or_loses():
    from distro_bench.report.verdict import headline

    # time to a target set in advance, paired: 2x sooner on every seed -> wins
    s = _paired_summary([3.0, 2.5, 3.5], [2.9, 2.4, 3.4], [40.0, 30.0, 50.0], [20.0, 15.0, 25.0])
    lines = verdict_lines(s)
    assert lines[0] == "distro wins vs adamw: to val loss 3 2.0x sooner [2.00, 2.00]; 500x fewer bytes"
    # an interval that holds 1 -> ties
    s = _paired_summary([3.0, 2.5, 3.5], [2.9, 2.4, 3.4], [40.0, 30.0, 50.0], [20.0, 40.0, 40.0])
    assert verdict_lines(s)[0].startswith("distro ties vs adamw: to val loss 3 1.")
    # twice as long on every seed -> loses, the ratio named the right way round
    s = _paired_summary([3.0, 2.5, 3.5], [2.9, 2.4, 3.4], [10.0, 12.0, 14.0], [20.0, 24.0, 28.0])
    assert verdict_lines(s)[0].startswith("distro loses vs adamw: to val loss 3 2.0x later [2.00, 2.00]")
    # a post-hoc target: decided on the loss at equal time instead (0.05 lower on every seed -> wins)
    base = [3.0, 2.5, 3.5]
    s = _paired_summary(base, [b - d for b, d in zip(base, (0.05, 0.045, 0.055))], [40.0, 30.0, 50.0], [20.0, 15.0, 26.0])
    s["target"] = {"val_loss": 3.0, "how": "the worst optimizer's best validation loss", "post_hoc": True}
    (v,) = verdicts(s)
    assert headline(v, s).startswith("distro wins vs adamw: loss at equal time 0.05 lower [-0.062, -0.038]")
    # ... but not over loopback, where equal time compares this host
    s["run"]["backend"] = "local"
    assert headline(v, s) == "distro vs adamw: no verdict (local backend: no network emulated); 500x fewer bytes"


def test_goodput_in_model_flops_is_a_row_of_every_verdict_with_its_paired_ratio():
    """Issue 37: one goodput for every method (useful model FLOP/s); distro's is 3x adamw's on every seed."""
    from distro_bench.report.verdict import rows

    s = _paired_summary([3.0, 2.5, 3.5], [2.9, 2.4, 3.4], [40.0, 30.0, 50.0], [20.0, 15.0, 25.0])
    for name, per in (("adamw", (1e9, 2e9, 1.5e9)), ("distro", (3e9, 6e9, 4.5e9))):
        o = s["optimizers"][name]
        o["goodput_model_flops_per_s"] = sum(per) / 3
        for seed, g in enumerate(per):
            o["per_seed"][str(seed)]["goodput_model_flops_per_s"] = g
    s["optimizers"]["distro"]["goodput_of_peak"] = 0.25
    table = {r[0]: r for r in rows(verdicts(s)[0])}
    row = table["goodput, model FLOP/s"]
    assert row[1] == "4.5 GFLOP/s (25.0% of peak)" and row[2] == "1.5 GFLOP/s"
    assert row[3] == "3.0x more [3.0, 3.0]"
    assert max(len(line) for line in verdict_lines(s)) <= 80
    del s["optimizers"]["adamw"]["goodput_model_flops_per_s"]  # a folder from before: no row, nothing made up
    assert "goodput, model FLOP/s" not in {r[0] for r in rows(verdicts(s)[0])}


def test_the_verdicts_figures_as_numbers_each_side_read_alike():
    # issue 50: the figures themselves, read off the Verdict (the wording is checked where it is the point)
    base_eq, cand_eq = [3.0, 2.5, 3.5], [2.9, 2.45, 3.3]
    s = _paired_summary(base_eq, cand_eq, [40.0, 30.0, 50.0], [20.0, 15.0, 25.0])
    (v,) = verdicts(s)
    assert v.bytes_basis == "wire" and v.bytes_ratio == pytest.approx(1e8 / 2e5)
    assert v.mine.bytes_per_step == pytest.approx(4e5) and v.base.bytes_per_step == pytest.approx(2e8)
    gaps = [c - b for b, c in zip(base_eq, cand_eq)]
    assert v.paired_equal_time.mean == pytest.approx(sum(gaps) / 3) and v.paired_equal_time.n == 3
    assert v.loss_diff_equal_time.mean == pytest.approx(sum(gaps) / 3)
    assert v.mine.loss_equal_time.mean == pytest.approx(sum(cand_eq) / 3)
    assert v.base.loss_equal_time.mean == pytest.approx(sum(base_eq) / 3)
    assert v.paired_step_speedup.mean == pytest.approx(3.0 / 0.38, rel=0.02)  # geometric mean of the seed ratios
    assert v.mine.reached and v.base.reached and v.mine.reached_seeds == 3 == v.base.reached_seeds
    assert v.paired_target_speedup.mean == pytest.approx(2.0, rel=0.01)  # each seed's baseline time is twice its own
