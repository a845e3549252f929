"""End to end on the local backend: a real multi-process run writes the full run folder."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import yaml

from distro_bench.results.metrics import METRIC_COLUMNS, SUMMARY_KEYS
from distro_bench.results.rundir import load_run
from distro_bench.run.runner import RunOptions, run_scenario
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.train.model import ModelConfig, parameter_shapes
from distro_bench.train.optim import STRATEGIES
from tests.helpers import REPO, tiny_scenario_dict


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    s = scenario_from_dict(tiny_scenario_dict(workers=[{"count": 3, "hardware": "host", "link": "dsl"}]))
    return s, run_scenario(s, RunOptions(backend="local", out=tmp_path_factory.mktemp("runs"), write_report=False))


def test_run_folder_has_every_file_and_the_schema(tiny_run):
    s, result = tiny_run
    d = result.run_dir
    assert result.state == "complete"
    for name in ("scenario.yaml", "environment.json", "metrics.parquet", "summary.json", "summary.csv", "status.json"):
        assert (d / name).is_file(), name
    df = pd.read_parquet(d / "metrics.parquet")
    assert list(df.columns) == list(METRIC_COLUMNS)
    # one row per (optimizer, rank, step), and per (optimizer, rank) the evaluation at t = 0 (step -1)
    assert len(df) == 3 * (s.train.steps + 1) and (df.loc[df["step"] == -1, "train_time_s"] == 0).all()
    summary = json.loads((d / "summary.json").read_text())
    # the summary keys, then each figure's 95% interval over seeds and the seeds' own figures (issue 16)
    assert list(summary["optimizers"]["adamw"]) == [*SUMMARY_KEYS, "ci95", "per_seed"]
    csv = pd.read_csv(d / "summary.csv")
    n = len(SUMMARY_KEYS) + 3
    assert list(csv.columns[:n]) == ["optimizer", "run_id", "git_commit", *SUMMARY_KEYS]  # issue 52: run and commit
    assert set(csv["run_id"]) == {d.name}
    assert csv.columns[n:].str.fullmatch(r".+_ci95_(lo|hi)").all()
    env = json.loads((d / "environment.json").read_text())
    assert env["backend"] == "local" and env["torch"] and env["kernel"]
    assert env["network"]["network_emulated"] is False
    assert any("not emulated" in x for x in env["network"]["not_emulated"])  # the dsl link was asked for
    assert yaml.safe_load((d / "scenario.yaml").read_text())["links"]["dsl"]["up"] == "10Mbit"


def test_replicas_identical_and_payload_counted_exactly(tiny_run):
    s, result = tiny_run
    a = result.summary["optimizers"]["adamw"]
    assert a["replicas_identical"] is True and a["param_checksum"]
    shapes = parameter_shapes(ModelConfig(**s.resolved_model()))
    tx, rx = STRATEGIES["adamw"].predict_payload_bytes(s.optimizer_configs()["adamw"], shapes, 3)
    assert a["payload_tx_bytes_per_step"] == tx == 4 * sum(math.prod(v) for v in shapes.values())
    assert a["payload_rx_bytes_per_step"] == rx
    assert a["wire_tx_bytes_per_step"] is None  # loopback: not measurable per node, never estimated
    assert a["framing_ratio"] is None and a["floor_ratio"] == 1.0  # issue 37: no wire; dense fp32 is its own floor
    assert a["reduction_vs_baseline"] == 1.0 and a["reduction_basis"] == "payload"


def test_loaded_run_matches(tiny_run):
    _, result = tiny_run
    run = load_run(result.run_dir)
    assert run.complete and set(run.metrics["rank"]) == {0, 1, 2}
    assert run.metrics["val_loss"].notna().sum() == 3 * 3  # eval at t = 0 and after steps 3 and 6 on every rank


@pytest.mark.slow
def test_ci_smoke_cli_end_to_end(cli, tmp_path):
    """The issue's acceptance: ci-smoke on the local backend, validation loss clearly falls."""
    # one seed (ci-smoke has three, for the gate in .ci/run): a third of the time
    result = cli("run", REPO / "scenarios" / "ci-smoke.yaml", "--backend", "local", "--repeat", "1", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    run_dir = result.output.strip().splitlines()[-1]
    run = load_run(run_dir)
    for name, s in run.summary["optimizers"].items():
        assert s["final_val_loss"] < s["first_val_loss"] - 0.2, (name, s)
        assert s["replicas_identical"], name
