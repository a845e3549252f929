"""The public Python API end to end on the local backend: run -> typed summary -> load_run -> check ->
report/compare -> project, and `distro_bench.api.run` reachable without importing torch up front."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import distro_bench
from distro_bench import api
from distro_bench.results.summary import OptimizerSummary, Summary

REPO = Path(__file__).resolve().parents[3]

TINY = {
    "name": "api-test",
    "workers": [{"count": 2, "hardware": "host", "link": "dsl"}],
    "model": {"preset": "tiny"},
    "data": {"corpus": "builtin:pydoc", "seq_len": 32, "batch_size": 4, "val_batches": 2},
    "train": {"steps": 6, "eval_every": 3, "seed": 0},
    "optimizers": {"adamw": {"lr": 3e-3}, "distro": {"lr": 3e-3, "topk": 4, "values": "1bit"}},
    "baseline": "adamw",
    "checks": {"min_reduction": 10},
}


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("scenario") / "api-test.yaml"
    p.write_text(yaml.safe_dump(TINY))
    return p


@pytest.fixture(scope="module")
def result(scenario_file, tmp_path_factory):
    return api.run(scenario_file, backend="local", out=tmp_path_factory.mktemp("runs"), steps=5)


@pytest.mark.slow
def test_run_returns_a_typed_summary_equal_to_summary_json(result):
    assert result.state == "complete"
    s = result.summary
    assert isinstance(s, Summary) and isinstance(s.optimizers["distro"], OptimizerSummary)
    assert s.optimizers["distro"].reduction_vs_baseline > 10
    assert s.optimizers["adamw"].steps == 5  # the steps override reached the workers
    assert s.to_dict() == json.loads((result.run_dir / "summary.json").read_text())
    # code written against the plain dict still works
    assert s["optimizers"]["adamw"]["step_time_s_mean"] == s.optimizers["adamw"].step_time_s_mean


@pytest.mark.slow
def test_load_run_check_and_report(result, tmp_path):
    run = api.load_run(result.run_dir)
    assert run.state == "complete" and run.optimizers == ["adamw", "distro"]
    assert run.summary == result.summary
    # optimizers x ranks x (steps + the evaluation at t = 0, recorded as step -1)
    assert len(run.metrics) == 2 * 2 * (5 + 1) and (run.metrics.loc[run.metrics["step"] == -1, "train_time_s"] == 0).all()
    report = api.check(run)
    assert report.passed and report.thresholds["min_reduction"] == 10
    assert not api.check(run, min_reduction=1e9).passed
    files = api.report(result.run_dir, tmp_path / "r")
    assert files.markdown.is_file() and files.html.is_file()
    cmp = api.compare([result.run_dir, result.run_dir], tmp_path / "c")
    assert cmp.markdown.is_file()


def test_project(scenario_file, tmp_path):
    st = api.project(scenario_file, workers=[2, 8], out=tmp_path / "p", plots=False)
    assert set(st.projections) == {2, 8}
    by = {p.optimizer: p for p in st.projections[8]}
    assert by["adamw"].payload_tx_bytes > 10 * by["distro"].payload_tx_bytes
    assert json.loads((tmp_path / "p" / "projection.json").read_text())["ratios"] == st.ratios


def test_bad_input_raises_our_errors(tmp_path):
    from distro_bench.errors import InputError, ScenarioError

    with pytest.raises(ScenarioError):
        api.validate(tmp_path / "missing.yaml")
    with pytest.raises(InputError):
        api.load_run(tmp_path)


def test_harness_exports_the_api_lazily():
    assert distro_bench.api.run is api.run and distro_bench.api.load_run is api.load_run
    code = "import sys, distro_bench.api; distro_bench.api.load_run; distro_bench.api.Summary; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={"PYTHONPATH": str(REPO / "harness"), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.stdout.strip() == "False", out.stderr
