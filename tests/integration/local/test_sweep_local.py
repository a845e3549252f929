"""A tiny 2x1 sweep end to end on the local backend: real training through the runner, one folder."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.helpers import tiny_scenario_dict

pytestmark = pytest.mark.slow  # the slow tier: a sweep of two trainings and the pick (~40 s)


def test_tiny_sweep_end_to_end(cli, write_scenario, tmp_path):
    scen = write_scenario(tiny_scenario_dict(
        name="tiny-sweep", train={"steps": 4, "eval_every": 2, "seed": 0},
        optimizers={"adamw": {"lr": 3e-3}, "distro": {"lr": 3e-3, "topk": 4, "values": "1bit", "bucket": True}}))
    # One seed a point: the mechanics, not a tuning claim (a pick from fewer than 3 seeds must be asked for).
    r = cli("sweep", scen, "--set", "optimizers.distro.lr=1e-3,1e-2", "--backend", "local", "--pick", "best",
            "--allow-few-seeds", "--out", tmp_path / "out")
    assert r.exit_code == 0, r.output
    d = tmp_path / "out" / r.output.strip().splitlines()[-1].split("/")[-1]
    assert d.is_dir() and d.name.startswith("tiny-sweep-sweep-")
    sweep = json.loads((d / "sweep.json").read_text())
    assert sweep["state"] == "complete" and [p["state"] for p in sweep["points"]] == ["complete", "complete"]
    first, second = sweep["points"]
    assert set(first["optimizers"]) == {"adamw", "distro"}
    assert second["optimizers"]["adamw"]["reused_from"] == 0  # adamw unchanged: not trained twice
    for p in sweep["points"]:
        run = d / p["run_dir"]
        assert (run / "summary.json").is_file() and (run / "report.md").is_file()
        assert yaml.safe_load((run / "scenario.yaml").read_text())["optimizers"]["distro"]["lr"] == p["values"][
            "optimizers.distro.lr"]
    assert (d / "sweep.csv").is_file() and (d / "report.md").is_file() and (d / "report.html").is_file()
    best = yaml.safe_load((d / "best.yaml").read_text())
    assert best["optimizers"]["distro"]["lr"] in (1e-3, 1e-2)
    # the follow-up scenario is valid and carries the pick
    v = cli("validate", d / "best-scenario.yaml")
    assert v.exit_code == 0, v.output
    assert "[1/2]" in r.output and "[2/2]" in r.output
    # issue 27: the trials evaluated the held-out tuning split beside validation and the pick read it
    assert sweep["best"]["by"]["distro"]["metric"] == "final_tune_loss"
    import pandas as pd

    m = pd.read_parquet(d / first["run_dir"] / "metrics.parquet")
    evaluated = m.dropna(subset=["val_loss"])
    assert len(evaluated) and evaluated["tune_loss"].notna().all() and m["tune_loss"].notna().sum() == len(evaluated)
    figs = first["optimizers"]["distro"]
    assert figs["final_tune_loss"] > 0 and figs["final_tune_loss"] != figs["final_val_loss"]
