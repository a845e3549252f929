"""A real local run with a time budget and two seeds: every optimizer trains at least the budget's
seconds, all ranks stop at the step rank 0 chose, and the summary carries seeds and intervals.

No timing assertion beyond ">= the budget" (true by construction of the stop rule on any machine)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from distro_bench.results.rundir import load_run
from distro_bench.run.runner import RunOptions, run_scenario
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import tiny_scenario_dict

pytestmark = pytest.mark.slow  # the slow tier: two optimizers x two seeds trained to a time budget (~25 s)

BUDGET_S = 2.0


@pytest.fixture(scope="module")
def budget_run(tmp_path_factory):
    s = scenario_from_dict(tiny_scenario_dict(
        train={"time_budget": f"{BUDGET_S:g}s", "eval_every": 4, "seeds": [0, 1]},
        optimizers={"adamw": {"lr": 3e-3, "schedule": "cosine", "warmup_steps": 2},
                    "distro": {"lr": 3e-3, "topk": 4, "values": "1bit", "schedule": "cosine", "warmup_steps": 2,
                               "max_grad_norm": 1.0}}))
    return s, run_scenario(s, RunOptions(backend="local", out=tmp_path_factory.mktemp("runs"), write_report=False))


def test_every_optimizer_and_seed_trains_at_least_the_budget(budget_run):
    _, result = budget_run
    df = load_run(result.run_dir).metrics
    assert sorted(df["seed"].unique().tolist()) == [0, 1]
    for (opt, seed), rows in df.groupby(["optimizer", "seed"]):
        last = rows[rows["step"] == rows["step"].max()]
        # rank 0's clock is the budget's (each rank times itself; the others differ by scheduling noise)
        assert (last.loc[last["rank"] == 0, "train_time_s"] >= BUDGET_S).all(), (opt, seed)
        # Rank 0 stopped at its first decision past the budget. Decisions are spaced (every half of the steps
        # estimated to remain, scenario/budget.py StopPolicy), so a host that slows down between two of them
        # may train a step or more past the budget before the next one (a CI run with a CPU hog on both cores:
        # the step before the last ended at 2.09 s of 2.0): the promise is the decisions', not one step's.
        folder = result.run_dir / "workers" / opt / f"seed{seed}"
        decisions = [json.loads(line) for line in (folder / "rank0.jsonl").read_text().splitlines()
                     if '"decision"' in line]
        assert decisions and decisions[-1]["stop"] and decisions[-1]["train_time_s"] >= BUDGET_S, (opt, seed)
        for before in decisions[:-1]:
            assert not before["stop"] and before["train_time_s"] < BUDGET_S, (opt, seed, before)
        if len(decisions) > 1:  # the stop came where the decision before it said to look next
            assert decisions[-2]["next_check"] == decisions[-1]["step"], (opt, seed, decisions[-2:])
        assert last["val_loss"].notna().all()  # the final step is evaluated


def test_all_ranks_stop_at_the_step_rank_0_decided(budget_run):
    _, result = budget_run
    df = load_run(result.run_dir).metrics
    for (opt, seed), rows in df.groupby(["optimizer", "seed"]):
        last_by_rank = rows.groupby("rank")["step"].max()
        assert last_by_rank.nunique() == 1, (opt, seed, last_by_rank.to_dict())
        folder = result.run_dir / "workers" / opt / f"seed{seed}"
        decisions = [json.loads(line) for line in (folder / "rank0.jsonl").read_text().splitlines()
                     if '"decision"' in line]
        assert decisions[-1]["stop"] and decisions[-1]["step"] == last_by_rank.iloc[0]
        assert len(decisions) < last_by_rank.iloc[0]  # not one per step
        # the lr schedule follows the estimate: the last step's lr has decayed towards 10% of the peak
        lr = rows[rows["rank"] == 0].set_index("step")["lr"]
        assert lr.iloc[-1] < lr.max()


def test_summary_has_budget_target_seeds_and_intervals(budget_run):
    _, result = budget_run
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["run"]["budget"] == {"kind": "time", "value": BUDGET_S, "tokens_per_step": 2 * 4 * 32}
    assert summary["run"]["seeds"] == [0, 1] and summary["target"]["val_loss"] is not None
    for s in summary["optimizers"].values():
        assert s["seeds"] == 2 and s["train_time_s"] >= BUDGET_S
        lo, hi = s["ci95"]["final_val_loss"]
        assert lo <= s["final_val_loss"] <= hi
        assert s["time_to_target_s"] is not None and s["target_reached"] == 2  # the default target is reached by all
        assert s["val_loss_at_equal_time"] is not None and s["val_loss_at_equal_steps"] is not None
        assert s["replicas_identical"] is True
    csv = pd.read_csv(result.run_dir / "summary.csv")
    assert {"time_to_target_s_ci95_lo", "time_to_target_s_ci95_hi"} <= set(csv.columns)
