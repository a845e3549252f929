"""Issue 52: what differs between runs to compare (report/differences.py), shared by `report A B` / `api.compare`
(refuse unlike runs unless --allow-different) and `check --against` (refuse a reference of another scenario)."""

from __future__ import annotations

import json

import pytest
import yaml

from distro_bench import api
from distro_bench.errors import InputError, ScenarioError
from distro_bench.report.check import run_checks
from distro_bench.report.differences import AGAINST_MAY_DIFFER, run_differences, scenario_differences
from distro_bench.report.load import load_for_report
from tests.unit.runfolders import make_run


def _edit_scenario(run, fn):
    scen = yaml.safe_load((run / "scenario.yaml").read_text())
    fn(scen)
    (run / "scenario.yaml").write_text(yaml.safe_dump(scen, sort_keys=False))


def test_only_the_optimizers_under_test_may_differ(tmp_path):
    a = make_run(tmp_path, "a", lr={"distro": 1e-3})
    b = make_run(tmp_path, "b", lr={"distro": 3e-3})  # the optimizer under test tuned differently: comparable
    _edit_scenario(b, lambda s: s.update(description="words differ"))
    assert run_differences([load_for_report(a), load_for_report(b)]) == []

    c = make_run(tmp_path, "c", seeds=2, ranks=4, steps=10)
    _edit_scenario(c, lambda s: s["links"]["dsl"].update(delay="50ms"))
    found = run_differences([load_for_report(a), load_for_report(c)])
    for want in ("R2 vs R1: workers[0].count: 4 vs 2", "R2 vs R1: links.dsl.delay: '50ms' vs '15ms'",
                 "R2 vs R1: train.steps: 10 vs 20"):
        assert want in found, found


def test_backend_host_and_emulation_count_as_differences(tmp_path):
    a = make_run(tmp_path, "a")
    b = make_run(tmp_path, "b", network={"backend": "netns", "network_emulated": True, "nodes": [],
                                         "not_emulated": []})
    env = json.loads((b / "environment.json").read_text())
    env["host"] = "other-host"
    (b / "environment.json").write_text(json.dumps(env))
    summary = json.loads((b / "summary.json").read_text())
    summary["run"]["backend"] = "netns"
    (b / "summary.json").write_text(json.dumps(summary))
    found = run_differences([load_for_report(a), load_for_report(b)])
    assert found == ["R2 vs R1: backend: 'netns' vs 'local'", "R2 vs R1: network emulated: True vs False",
                     "R2 vs R1: host: 'other-host' vs 'vm'"], found


def test_seeds_differ_for_a_comparison_not_for_check_against():
    a = {"train": {"seeds": [0, 1, 2], "steps": 30}, "name": "x"}
    b = {"train": {"seeds": [0, 1], "steps": 30}, "name": "y"}
    assert scenario_differences(a, b, may_differ=AGAINST_MAY_DIFFER) == []
    assert scenario_differences(a, b, may_differ=("name",)) == ["train.seeds: [0, 1, 2] vs [0, 1]"]


def test_api_compare_refuses_then_allows(tmp_path):
    a, b = make_run(tmp_path, "a"), make_run(tmp_path, "b", steps=10)
    with pytest.raises(ScenarioError) as e:
        api.compare([a, b], tmp_path / "cmp")
    assert e.value.problems == ["R2 vs R1: train.steps: 10 vs 20"]
    files = api.compare([a, b], tmp_path / "cmp", allow_different=True)
    assert "train.steps: 10 vs 20" in files.markdown.read_text()


def test_check_against_still_refuses_another_scenario(tmp_path):
    a, b = make_run(tmp_path, "a"), make_run(tmp_path, "b", steps=10)
    with pytest.raises(InputError, match=r"train\.steps: 20 vs 10"):
        run_checks(load_for_report(a), against=load_for_report(b), max_loss_regression=0.1)
