"""Churn through the real worker and runner (local backend, 4 workers, gloo): one worker away for a while
and one gone for good. While away a worker writes no step and sends nothing of the optimizer's; the others'
collectives run over the three present (a ring over 3, counted as such); the one that comes back takes over
the shared state in one message of the predicted size; a periodic method's leaver loses exactly its local
steps since the last round; the run still ends with one model among the workers present."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from distro_bench.run.runner import RunOptions, run_scenario
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.train.model import ModelConfig, parameter_shapes
from tests.helpers import tiny_scenario_dict

pytestmark = pytest.mark.slow  # three optimizers trained on 4 workers for 4 s each

H = 4
CHURN = {"events": [{"worker": 2, "leave": "1s", "back": "2.5s"}, {"worker": 3, "leave": "2s"}]}


@pytest.fixture(scope="module")
def churn_run(tmp_path_factory):
    s = scenario_from_dict(tiny_scenario_dict(
        workers=[{"count": 4, "hardware": "host"}], train={"time_budget": "4s", "eval_every": 5, "seed": 0},
        churn=CHURN, optimizers={"adamw": {"lr": 3e-3}, "diloco": {"lr": 3e-3, "inner_steps": H},
                                 "distro": {"lr": 3e-3, "topk": 4, "values": "1bit"}}))
    result = run_scenario(s, RunOptions(backend="local", out=tmp_path_factory.mktemp("runs"), write_report=False))
    records = {name: [json.loads(line) for p in sorted((result.run_dir / "workers" / name).glob("rank*.jsonl"))
                      for line in p.read_text().splitlines()] for name in s.optimizers}
    return s, result, pd.read_parquet(result.run_dir / "metrics.parquet"), records


def _churn(records: list[dict], event: str, rank: int) -> dict:
    (r,) = [r for r in records if r["type"] == "churn" and r["event"] == event and r["rank"] == rank]
    return r


@pytest.mark.parametrize("name", ["adamw", "diloco", "distro"])
def test_away_workers_train_and_send_nothing_and_the_rest_end_as_one_model(churn_run, name):
    _, result, df, records = churn_run
    assert result.state == "complete"
    rows = df[(df["optimizer"] == name) & (df["step"] >= 0)]  # the steps trained (not the evaluation at t = 0)
    recs = records[name]
    leave2, join2, leave3 = _churn(recs, "leave", 2), _churn(recs, "join", 2), _churn(recs, "leave", 3)
    assert leave2["why"] == leave3["why"] == "scheduled"
    assert leave2["step"] < join2["step"]
    steps_of = {r: set(rows[rows["rank"] == r]["step"]) for r in range(4)}
    last = max(steps_of[0])
    assert steps_of[1] == steps_of[0] == set(range(last + 1))  # rank 0 and 1 never leave
    assert steps_of[2] == set(range(leave2["step"])) | set(range(join2["step"], last + 1))
    assert steps_of[3] == set(range(leave3["step"]))
    assert not any(r["type"] == "churn" and r["event"] == "join" and r["rank"] == 3 for r in recs)
    # Each step's rows: as many as the workers present, each saying so.
    per_step = rows.groupby("step")["rank"].count()
    members = {r["step"]: r["members"] for r in recs if r["type"] == "step"}
    assert all(per_step[st] == members[st] for st in per_step.index)
    assert set(per_step) >= {4, 3}
    ends = {r["rank"]: r for r in recs if r["type"] == "end"}
    assert [ends[r]["present"] for r in range(4)] == [True, True, True, False]
    assert len({ends[r]["param_checksum"] for r in range(3)}) == 1
    summary = json.loads((result.run_dir / "summary.json").read_text())["optimizers"][name]
    assert summary["replicas_identical"] is True and summary["churn_leaves"] == 2
    assert 0.5 < summary["worker_availability"] < 1.0


def test_collectives_run_over_the_workers_present(churn_run):
    _, _, df, records = churn_run
    rows = df[(df["optimizer"] == "adamw") & (df["step"] > 0)]
    members = {(r["rank"], r["step"]): r["members"] for r in records["adamw"] if r["type"] == "step"}
    for _, row in rows.iterrows():
        n, b = members[(row["rank"], row["step"])], row["payload_tx_bytes"]
        assert math.isclose(row["ring_bytes"], 2 * (n - 1) / n * b), (row["step"], n)  # a ring over n, not 4


def test_a_worker_that_comes_back_takes_over_the_shared_state(churn_run):
    s, _, _, records = churn_run
    shapes = parameter_shapes(ModelConfig(**s.resolved_model()))
    params, tensors = sum(math.prod(v) for v in shapes.values()), len(shapes)
    expected = {"adamw": 4 * (3 * params + tensors),  # parameters, both moments, a step count per tensor
                "diloco": 4 * 2 * params,  # the shared parameters and the outer momentum
                "distro": 4 * params}  # parameters only: DeMo's momentum stays local
    for name, nbytes in expected.items():
        join, handover = _churn(records[name], "join", 2), _churn(records[name], "handover", 0)
        assert join["state_bytes"] == handover["state_bytes"] == nbytes, name
        assert join["step"] == handover["step"]


def test_a_periodic_method_loses_its_local_steps_since_the_last_round(churn_run):
    _, _, _, records = churn_run
    for rank in (2, 3):
        leave = _churn(records["diloco"], "leave", rank)
        assert leave["lost_steps"] == leave["step"] % H  # rounds end after steps H-1, 2H-1, ...
        assert leave["lost_tokens"] == leave["lost_steps"] * 4 * 32
        assert _churn(records["adamw"], "leave", rank)["lost_steps"] == 0
