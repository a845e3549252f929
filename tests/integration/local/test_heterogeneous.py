"""Heterogeneous hardware: a profile k times slower takes k times as long to compute, and the others wait."""

from __future__ import annotations

import pytest

from harness.runner import RunOptions, run_scenario
from harness.rundir import load_run
from harness.scenario import scenario_from_dict

from tests.helpers import tiny_scenario_dict


@pytest.fixture(scope="module")
def straggler_run(tmp_path_factory):
    s = scenario_from_dict(tiny_scenario_dict(
        workers=[{"count": 2, "hardware": "host"}, {"name": "slow", "hardware": "slowbox"}],
        hardware={"slowbox": {"device": "cpu", "compute_scale": 0.25}},
        train={"steps": 16, "eval_every": 8, "seed": 0},
        data={"corpus": "builtin:pydoc", "seq_len": 64, "batch_size": 8, "val_batches": 1},
    ))
    result = run_scenario(s, RunOptions(backend="local", out=tmp_path_factory.mktemp("runs"), write_report=False))
    return load_run(result.run_dir).metrics


def test_slow_profile_computes_four_times_longer(straggler_run):
    df = straggler_run[straggler_run["step"] > 0]
    # Minimum over steps: CPU contention from other processes only ever adds time, so the minimum is
    # each rank's cleanest measurement of the same work.
    compute = df.groupby("rank")["compute_s"].min()
    ratio = compute[2] / compute[[0, 1]].mean()
    assert ratio == pytest.approx(4.0, rel=0.15), compute.to_dict()
    # The stretch is what we added on top of the measured compute: 3x the measured part for 4x slower.
    stretch = df[df["rank"] == 2]
    assert (stretch["stretch_s"] / (stretch["compute_s"] - stretch["stretch_s"])).median() == pytest.approx(3.0, rel=0.01)


def test_fast_ranks_wait_for_the_straggler(straggler_run):
    df = straggler_run[straggler_run["step"] > 0]
    by_rank = df.groupby("rank")[["compute_s", "wait_s"]].median()
    assert by_rank.loc[2, "wait_s"] < 0.2 * by_rank.loc[0, "wait_s"]
    for fast in (0, 1):
        expected = by_rank.loc[2, "compute_s"] - by_rank.loc[fast, "compute_s"]
        assert by_rank.loc[fast, "wait_s"] == pytest.approx(expected, rel=0.25), by_rank
