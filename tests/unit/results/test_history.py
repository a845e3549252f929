"""Issue 52: history across commits. Every run appends its figures to <out>/index.parquet (results/history.py);
`history` reads a figure back in time order and flags a change beyond the noise; metrics.parquet and summary.csv
carry the run id and commit."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from distro_bench import api
from distro_bench.errors import InputError
from distro_bench.results.history import INDEX, append_to_index, read_index, scenario_hash, series
from distro_bench.results.rundir import write_status
from distro_bench.run.lifecycle import finalize
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import tiny_scenario_dict
from tests.unit.runfolders import make_run


def _append(run, commit: str, shift: float = 0.0, finished: str = "2026-12-01T00:00:00") -> None:
    summary = json.loads((run / "summary.json").read_text())
    summary["run"]["finished"] = finished
    for s in summary["optimizers"].values():  # the figure and its interval moved by `shift`
        s["final_loss"] += shift
        s.setdefault("ci95", {})["final_loss"] = [s["final_loss"] - 0.05, s["final_loss"] + 0.05]
    scenario = yaml.safe_load((run / "scenario.yaml").read_text())
    append_to_index(run, summary, scenario, {"git_commit": commit})


def test_three_commits_one_flagged_change(tmp_path):
    runs = [make_run(tmp_path, f"r{i}") for i in range(3)]
    _append(runs[0], "c1", 0.0, "2026-12-01T00:00:00")
    _append(runs[1], "c2", 0.02, "2026-12-02T00:00:00")  # intervals overlap: within noise
    _append(runs[2], "c3", 0.5, "2026-12-03T00:00:00")  # no overlap: a change beyond the noise
    points = api.history(tmp_path / INDEX, figure="final_loss", optimizer="distro")
    assert [(p.git_commit, p.run_id, p.changed) for p in points] == [("c1", "r0", None), ("c2", "r1", False),
                                                                      ("c3", "r2", True)]
    assert points[2].lo == pytest.approx(points[2].value - 0.05)
    assert len(api.history(tmp_path / INDEX, figure="final_loss")) == 6  # both optimizers


def test_the_index_replaces_a_run_summarised_again_and_keys_every_row(tmp_path):
    run = make_run(tmp_path, "r0")
    _append(run, "c1")
    _append(run, "c1", 0.1)
    df = read_index(tmp_path / INDEX)
    assert len(df) == 2 and set(df["optimizer"]) == {"adamw", "distro"}  # replaced, not appended twice
    scen = yaml.safe_load((run / "scenario.yaml").read_text())
    assert set(df["scenario_hash"]) == {scenario_hash(scen)} and set(df["run_id"]) == {"r0"}
    assert set(df["git_commit"]) == {"c1"} and "final_loss_ci95_lo" in df.columns


def test_bad_questions_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no index here"):
        api.history(tmp_path / INDEX)
    a, b = make_run(tmp_path, "a", scenario="one"), make_run(tmp_path, "b", scenario="two")
    _append(a, "c1")
    _append(b, "c1")
    with pytest.raises(InputError, match="several scenarios"):
        api.history(tmp_path / INDEX)
    with pytest.raises(InputError, match="not a summary key"):
        series(read_index(tmp_path / INDEX), "nope", scenario="one")
    assert {p.run_id for p in api.history(tmp_path / INDEX, scenario="two", figure="final_loss")} == {"b"}


def test_finalize_writes_run_id_and_commit_and_appends_the_index(tmp_path):
    d = tmp_path / "run"
    (d / "workers" / "adamw").mkdir(parents=True)
    (d / "environment.json").write_text(json.dumps({"git_commit": "f" * 40}))
    (d / "scenario.yaml").write_text(yaml.safe_dump(tiny_scenario_dict()))
    start = {"type": "start", "rank": 0, "node": "node0", "device": "cpu"}
    steps = [{"type": "step", "optimizer": "adamw", "rank": 0, "step": k, "loss": 3.0 - 0.1 * k, "val_loss": None,
              "lr": 1e-3, "step_time_s": 0.1, "data_s": 0.0, "compute_s": 0.05, "stretch_s": 0.0, "compress_s": 0.0,
              "comm_s": 0.05, "apply_s": 0.0, "t_start": 100.0 + k, "t_ready": 100.05 + k, "payload_tx_bytes": 10,
              "payload_rx_bytes": 10, "collectives": 1, "wire_tx_bytes": None, "wire_rx_bytes": None, "tokens": 64,
              "param_checksum": None, "seed": 0} for k in range(4)]
    (d / "workers" / "adamw" / "rank0.jsonl").write_text("\n".join(json.dumps(r) for r in [start, *steps]) + "\n")
    write_status(d, "running", None)
    finalize(d, scenario_from_dict(tiny_scenario_dict()), "local", "complete", None, "t0")
    df = pd.read_parquet(d / "metrics.parquet")
    assert len(df) == 4 and set(df["run_id"]) == {"run"} and set(df["git_commit"]) == {"f" * 40}
    csv = pd.read_csv(d / "summary.csv")
    assert list(csv.columns[:3]) == ["optimizer", "run_id", "git_commit"] and csv["git_commit"][0] == "f" * 40
    index = read_index(tmp_path / INDEX)
    assert list(index["run_id"]) == ["run"] and index["final_loss"][0] == pytest.approx(
        json.loads((d / "summary.json").read_text())["optimizers"]["adamw"]["final_loss"])


def test_history_cli_prints_flags_and_plots(tmp_path, cli):
    runs = [make_run(tmp_path, f"r{i}") for i in range(3)]
    for i, (run, shift) in enumerate(zip(runs, (0.0, 0.02, 0.5))):
        _append(run, f"c{i + 1}", shift, f"2026-12-0{i + 1}T00:00:00")
    png = tmp_path / "h.png"
    r = cli("history", "--index", tmp_path / INDEX, "--figure", "final_loss", "--optimizer", "distro",
            "--plot", png)
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "CHANGED" in out and "within noise" in out and "1 change(s) beyond the noise: distro at c3 (r2)" in out
    assert png.read_bytes().startswith(b"\x89PNG")
    r = cli("history", "--index", tmp_path / INDEX, "--figure", "nope")
    assert r.exit_code == 2 and "not a summary key" in r.output
