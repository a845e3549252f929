"""Heterogeneous hardware: a profile k times slower stretches its compute by k, and the others wait for it.

What is checked here is the run's own accounting, which CPU contention cannot change: the stretch each
step is (1/scale - 1) times the compute measured that step, and each rank's wait is the time from its
readiness to the slowest rank's. How close the end-to-end ratio comes to k on a busy host is a figure of
benchmarks/heterogeneous_slowdown.py, not an assertion (it failed here at 4.90 vs 4.0 +- 15% under load).
"""

from __future__ import annotations

import pytest

from distro_bench.results.rundir import load_run
from distro_bench.run.runner import RunOptions, run_scenario
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import tiny_scenario_dict

pytestmark = pytest.mark.slow  # the slow tier: 16 steps with a 3x stretched rank (~10 s)


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


def test_slow_profile_stretches_its_measured_compute_by_three(straggler_run):
    df = straggler_run[straggler_run["step"] > 0]
    slow, fast = df[df["rank"] == 2], df[df["rank"] != 2]
    measured = slow["compute_s"] - slow["stretch_s"]
    ratio = slow["stretch_s"] / measured
    # 4x slower = 3x the measured compute added on top. The stretch is timed from a clock read just after
    # the compute phase's own timer stops, so it can only be a hair longer, never shorter (a preemption in
    # between makes one step's ratio larger; the median stays at 3).
    assert (ratio >= 3.0 - 1e-9).all() and ratio.median() == pytest.approx(3.0, rel=0.01), ratio.tolist()
    assert (fast["stretch_s"] == 0.0).all()


def test_fast_ranks_wait_for_the_straggler(straggler_run):
    df = straggler_run[straggler_run["step"] > 0]
    # wait_s is the time from this rank's readiness to the slowest rank's, step by step.
    slowest = df.groupby(["optimizer", "step"])["t_ready"].transform("max")
    assert (df["wait_s"] - (slowest - df["t_ready"])).abs().max() < 1e-9
    # The straggler, 3x its compute behind, is the one the others wait for.
    by_rank = df.groupby("rank")["wait_s"].median()
    assert by_rank[2] == 0.0 and (by_rank[[0, 1]] > 0).all(), by_rank.to_dict()
