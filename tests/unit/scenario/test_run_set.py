"""Issue 52: `run --set PATH=VALUE` (scenario/assign.py, the parsing `sweep --set` shares): values read as YAML
scalars, validated like the file with every problem at once (exit 2, each naming its path), and recorded in the
run folder's resolved scenario and its environment.json."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from distro_bench.cli import app
from distro_bench.errors import InputError, ScenarioError, WorkerFailed
from distro_bench.run import runner
from distro_bench.run.overrides import Overrides, set_pairs
from distro_bench.scenario.assign import apply_assignments, parse_assignments
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.studies.sweep_grid import parse_set
from tests.helpers import tiny_scenario_dict


def _scenario():
    return scenario_from_dict(tiny_scenario_dict(
        links={"dsl": {"up": "10Mbit", "down": "50Mbit"}},
        workers=[{"count": 2, "hardware": "host", "link": "dsl"}],
        optimizers={"adamw": {"lr": 3e-3}, "distro": {"lr": 5e-3}}))


def test_values_are_yaml_scalars_parsed_as_sweep_parses_them():
    got = parse_assignments(["optimizers.distro.lr=1e-3", "train.time_budget=30s", "train.eval_every=2",
                             "network.measure_links=false", "links.dsl.up=10Mbit"])
    assert got == {"optimizers.distro.lr": 1e-3, "train.time_budget": "30s", "train.eval_every": 2,
                   "network.measure_links": False, "links.dsl.up": "10Mbit"}
    assert parse_set("optimizers.distro.lr=1e-3,2e-3").values == (1e-3, 2e-3)  # the same value parser


def test_every_malformed_flag_in_one_error():
    with pytest.raises(InputError) as e:
        parse_assignments(["novalue", "a..b=1", "train.steps=", "links.dsl.up=1Mbit,2Mbit", "train.steps=3",
                           "train.steps=4"])
    msg = str(e.value)
    for bit in ("'novalue'", "'a..b'", "train.steps: no value", "one value per path for run", "more than once"):
        assert bit in msg, msg


def test_applied_and_validated_like_the_file_every_problem_naming_its_path():
    s = apply_assignments(_scenario(), {"optimizers.distro.lr": 1e-3, "train.time_budget": "30s",
                                        "links.dsl.delay": "20ms"})
    assert s.optimizers["distro"].lr == 1e-3 and s.links["dsl"].delay == pytest.approx(0.02)
    assert s.train.time_budget is not None and s.train.steps is None  # a budget replaces the others
    with pytest.raises(ScenarioError) as e:
        apply_assignments(_scenario(), {"optimizers.distro.lr": "abc", "train.time_budget": "zz",
                                        "optimizers.nope.lr": 1, "links.dsl.delay": "5parsec"})
    problems = e.value.problems
    assert len(problems) == 4, problems
    for path in ("optimizers.distro.lr", "train.time_budget", "optimizers.nope.lr", "links.dsl.delay"):
        assert sum(path in p for p in problems) == 1, (path, problems)


def test_overrides_apply_sets_then_flags_and_record_both():
    o = Overrides(sets=set_pairs(["optimizers.distro.lr=1e-3"]), steps=4)
    s = o.apply(_scenario())
    assert s.optimizers["distro"].lr == 1e-3 and s.train.steps == 4
    assert o.record() == {"steps": 4, "set": {"optimizers.distro.lr": 1e-3}}
    assert set_pairs({"a.b": 1}) == (("a.b", 1),) and set_pairs(None) is None


def test_cli_refuses_bad_sets_with_exit_2_naming_each_path(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(tiny_scenario_dict()))
    r = CliRunner().invoke(app, ["run", str(scenario), "--backend", "local", "--out", str(tmp_path / "out"),
                                 "--set", "optimizers.adamw.lr=abc", "--set", "train.time_budget=zz"])
    assert r.exit_code == 2, r.output
    assert "optimizers.adamw.lr" in r.output and "train.time_budget" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "out").exists()  # refused before any run folder


def test_the_run_folder_records_the_sets(tmp_path, monkeypatch):
    def no_training(*a, **k):  # the recording is the point: stop at the first worker
        raise WorkerFailed("stopped by the test", rank=0)

    monkeypatch.setattr(runner, "_train_one", no_training)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(tiny_scenario_dict()))
    CliRunner().invoke(app, ["run", str(scenario), "--backend", "local", "--out", str(tmp_path / "out"),
                             "--no-measure-links", "--set", "optimizers.adamw.lr=1e-3", "--set", "train.steps=4"])
    (d,) = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]  # beside it: index.parquet
    resolved = yaml.safe_load((d / "scenario.yaml").read_text())
    assert resolved["optimizers"]["adamw"]["lr"] == 1e-3 and resolved["train"]["steps"] == 4
    env = json.loads((d / "environment.json").read_text())
    assert env["overrides"] == {"set": {"optimizers.adamw.lr": 1e-3, "train.steps": 4}}
