"""NoLoCo's pairs through the real worker and runner (local backend, 4 workers, gloo point-to-point): every
rank picks its peer from the shared seed (a disagreement would hang the exchange), bytes counted at every step
equal `predict_step` (one model's fp32 bytes to one peer and back every H steps, nothing else), the final
average's equal `predict_finish`, and the run ends with one model."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from distro_bench.run.runner import RunOptions, run_scenario
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.train.model import ModelConfig, parameter_shapes
from distro_bench.train.optim.base import payload_of
from distro_bench.train.optim.noloco import NoLoCo
from tests.helpers import tiny_scenario_dict

pytestmark = pytest.mark.slow  # the slow tier: two optimizers trained on 4 workers

STEPS, H = 5, 2  # gossip after steps 1 and 3; step 4's local step is averaged by finish()


@pytest.fixture(scope="module")
def noloco_run(tmp_path_factory):
    s = scenario_from_dict(tiny_scenario_dict(workers=[{"count": 4, "hardware": "host"}],
                                              train={"steps": STEPS, "eval_every": 5, "seed": 0},
                                              optimizers={"adamw": {"lr": 3e-3}, "noloco": {"lr": 3e-3, "inner_steps": H}}))
    return s, run_scenario(s, RunOptions(backend="local", out=tmp_path_factory.mktemp("runs"), write_report=False))


def test_pairs_exchange_what_was_predicted_and_end_as_one_model(noloco_run):
    s, result = noloco_run
    assert result.state == "complete"
    cfg = s.optimizers["noloco"]
    shapes = parameter_shapes(ModelConfig(**s.resolved_model()))
    params = sum(math.prod(v) for v in shapes.values())
    df = pd.read_parquet(result.run_dir / "metrics.parquet")
    rows = df[(df["optimizer"] == "noloco") & (df["step"] >= 0)]  # not the evaluation at t = 0 (step -1)
    assert len(rows) == 4 * STEPS
    for step in range(STEPS):
        colls = NoLoCo.predict_step(cfg, shapes, 4, step, STEPS)
        tx, rx = payload_of(colls, 4)
        assert (tx, rx) == ((4 * params, 4 * params) if (step + 1) % H == 0 else (0, 0))
        at = rows[rows["step"] == step]
        assert (at["payload_tx_bytes"] == tx).all() and (at["payload_rx_bytes"] == rx).all(), step
        assert (at["collectives"] == len(colls)).all(), step
    records = [json.loads(line) for p in sorted((result.run_dir / "workers" / "noloco").glob("rank*.jsonl"))
               for line in p.read_text().splitlines()]
    assert not any(r["synced"] for r in records if r["type"] == "step")  # pairs only: never one model between
    assert {r["inner_steps"] for r in records if r["type"] == "step" and "inner_steps" in r} == {H}
    ends = [r for r in records if r["type"] == "end"]
    tx, rx = payload_of(NoLoCo.predict_finish(cfg, shapes, 4, STEPS), 4)
    assert [(e["final_sync_tx_bytes"], e["final_sync_rx_bytes"]) for e in ends] == [(4 * params, 4 * params)] * 4
    assert (tx, rx) == (4 * params, 4 * params)
    assert len({e["param_checksum"] for e in ends}) == 1
    summary = json.loads((result.run_dir / "summary.json").read_text())["optimizers"]["noloco"]
    assert summary["replicas_identical"] is True
