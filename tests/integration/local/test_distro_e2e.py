"""DisTrO through the real worker and runner: bytes counted per step equal the prediction, replicas agree,
and the ci-smoke settings give the promised reduction."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from distro_bench.report.load import load_for_report
from distro_bench.report.prediction import prediction_rows
from distro_bench.scenario.loading import load_scenario
from distro_bench.train.distributed import PROBE_CALLS
from distro_bench.train.model import ModelConfig, parameter_shapes
from distro_bench.train.optim import get_strategy
from distro_bench.train.optim.distro import DisTrO
from tests.helpers import REPO

pytestmark = pytest.mark.slow  # the slow tier: the run of every method (conftest.py's methods_run)


def test_counted_payload_equals_predicted_every_step(methods_run):
    s, result = methods_run
    assert result.state == "complete"
    df = pd.read_parquet(result.run_dir / "metrics.parquet")
    shapes = parameter_shapes(ModelConfig(**s.resolved_model()))
    n_tensors = len(shapes)
    for name, cfg in s.optimizer_configs().items():
        if cfg.type != "distro":
            continue
        tx, rx = DisTrO.predict_payload_bytes(cfg, shapes, s.world_size)
        rows = df[(df["optimizer"] == name) & (df["step"] >= 0)]  # not the evaluation at t = 0 (step -1)
        assert len(rows) == s.world_size * s.train.steps
        assert (rows["payload_tx_bytes"] == tx).all() and (rows["payload_rx_bytes"] == rx).all(), name
        assert (rows["collectives"] == (1 if cfg.bucket else 2 * n_tensors)).all(), name


def test_replicas_identical_and_reduction(methods_run):
    _, result = methods_run
    summary = json.loads((result.run_dir / "summary.json").read_text())["optimizers"]
    for name in ("distro", "distro-nobucket"):
        assert summary[name]["replicas_identical"] is True, name
        assert summary[name]["reduction_vs_baseline"] >= 500, name
    # the same algorithm, only packed differently: the same parameters at the end
    assert summary["distro"]["param_checksum"] == summary["distro-nobucket"]["param_checksum"]


def test_ci_smoke_promises_at_least_500x():
    s = load_scenario(REPO / "scenarios" / "ci-smoke.yaml")
    cfg = s.optimizer_configs()["distro"]
    assert (cfg.topk, cfg.values, cfg.bucket) == (4, "1bit", True)
    shapes = parameter_shapes(ModelConfig(**s.resolved_model()))
    tx, rx = DisTrO.predict_payload_bytes(cfg, shapes, s.world_size)
    adamw = s.optimizer_configs()[s.baseline]
    a_tx, a_rx = get_strategy(adamw.type).predict_payload_bytes(adamw, shapes, s.world_size)
    assert (a_tx + a_rx) / (tx + rx) >= 500
    assert s.checks.min_reduction is not None and s.checks.min_reduction <= (a_tx + a_rx) / (tx + rx)


def test_every_worker_calibrates_and_the_run_keeps_the_mean(methods_run):
    s, result = methods_run
    starts = [json.loads(p.read_text().splitlines()[0]) for p in sorted((result.run_dir / "workers").glob("*/rank*.jsonl"))]
    assert len(starts) == s.world_size * len(s.optimizer_configs())
    for e in starts:
        assert e["type"] == "start" and len(e["probe_calls_s"]) == PROBE_CALLS
        assert e["probe_allgather_s"] == pytest.approx(sum(e["probe_calls_s"]) / PROBE_CALLS)
    run = json.loads((result.run_dir / "summary.json").read_text())["run"]
    assert run["probe_allgather_s"] == pytest.approx(sum(e["probe_allgather_s"] for e in starts) / len(starts))


def test_the_summary_has_the_uniform_and_the_empirical_floor(methods_run):
    # issue 37: the encoding's floor ratio (prediction.json) and the floor of what was actually sent (end records)
    s, result = methods_run
    summary = json.loads((result.run_dir / "summary.json").read_text())["optimizers"]
    shapes = parameter_shapes(ModelConfig(**s.resolved_model()))
    for name in ("distro", "distro-nobucket"):
        cfg = s.optimizer_configs()[name]
        tx, _ = DisTrO.predict_payload_bytes(cfg, shapes, s.world_size)
        uniform = DisTrO.predict_floor_tx_bits(cfg, shapes, s.world_size)
        assert summary[name]["floor_ratio"] == pytest.approx(8 * tx / uniform), name
        # positions and signs as picked: an entropy coder fitted to them needs more than 0 bits and, DCT picks
        # clustering, fewer than the uniform floor (so the ratio over it is the higher one)
        assert summary[name]["floor_ratio_empirical"] > summary[name]["floor_ratio"] > 1, (name, summary[name])
    assert summary["adamw"]["floor_ratio"] == pytest.approx(1.0) and summary["adamw"]["floor_ratio_empirical"] is None
    rows = {r["optimizer"]: r for r in prediction_rows(load_for_report(result.run_dir))}  # the report's columns
    assert rows["distro"]["floor_ratio_empirical"] == summary["distro"]["floor_ratio_empirical"]
    assert rows["distro"]["floor_ratio"] == pytest.approx(summary["distro"]["floor_ratio"])
