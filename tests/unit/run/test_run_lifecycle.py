"""Overrides (what changes in the scenario) and RunSettings (how a run runs), and one run lifecycle for the runner and the multi-host agent
(harness/distro_bench/run/overrides.py, harness/distro_bench/run/lifecycle.py; issue 28). No training here."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from distro_bench.errors import InputError, Interrupted, WorkerFailed
from distro_bench.results.rundir import write_status
from distro_bench.run.lifecycle import RunLifecycle, finalize, training_order
from distro_bench.run.overrides import Overrides, RunSettings
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import REPO, tiny_scenario_dict


@pytest.fixture
def claims(tmp_path, monkeypatch):
    d = tmp_path / "claims"
    d.mkdir()
    monkeypatch.setattr("distro_bench.net.owner.runtime_dir", lambda: d)
    return d


# ---- Overrides and RunSettings ----------------------------------------------------------------------------

@pytest.mark.parametrize("cls, bad, field", [
    (Overrides, {"steps": 0}, "run options: steps"), (Overrides, {"repeat": 101}, "run options: repeat"),
    (Overrides, {"seed": -1}, "run options: seed"), (RunSettings, {"link_engine": "fast"}, "run settings: link_engine"),
    (RunSettings, {"collective_timeout_s": 1}, "run settings: collective_timeout_s")])
def test_a_bad_value_is_refused_naming_it(cls, bad, field):
    with pytest.raises(InputError, match=f"{field}: "):
        cls(**bad)


def test_overrides_and_settings_are_frozen_and_normalised():
    o = Overrides(optimizers=["adamw"])
    assert o.optimizers == ("adamw",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.steps = 3  # type: ignore[misc]
    assert Overrides(optimizers=[]).optimizers is None
    assert RunSettings(out="somewhere").out == Path("somewhere")  # type: ignore[arg-type]


def test_training_overrides_and_run_settings_travel_apart():
    """Issue 36: Overrides hold what changes in the scenario only; the backend and the output folder are the
    settings'."""
    assert {f.name for f in dataclasses.fields(Overrides)} == {
        "optimizers", "steps", "seed", "time_budget", "tokens", "target_val_loss", "repeat", "sets"}
    assert {"backend", "out", "link_engine", "image", "write_report"} <= {f.name for f in dataclasses.fields(RunSettings)}
    with pytest.raises(TypeError):
        Overrides(backend="local")  # type: ignore[call-arg]


def test_overrides_leave_the_scenario_alone_unless_they_change_it():
    s = scenario_from_dict(tiny_scenario_dict())
    assert Overrides().apply(s) is s and not Overrides().changes_scenario()
    changed = Overrides(steps=3, repeat=2, optimizers=("adamw",)).apply(s)
    assert changed.train.steps == 3 and len(changed.train.seed_list()) == 2 and list(changed.optimizers) == ["adamw"]
    assert Overrides(steps=3, repeat=2).given() == {"steps": 3, "repeat": 2}


def test_settings_fill_the_backend_options_from_the_scenarios_network():
    d = tiny_scenario_dict()
    d["network"] = {"link_engine": "userspace", "allow_unemulated": True}
    s = scenario_from_dict(d)
    assert RunSettings().backend_options(s).link_engine == "userspace"
    assert RunSettings().backend_options(s).allow_unemulated is True
    b = RunSettings(link_engine="tc", allow_unemulated=False, image="img").backend_options(s)
    assert (b.link_engine, b.allow_unemulated, b.image) == ("tc", False, "img")
    assert RunSettings(backend="netns", out=Path("p")).given() == {"backend": "netns", "out": Path("p")}


@pytest.mark.parametrize("objects, words", [
    ({"overrides": Overrides(seed=1)}, r"not both .*steps given beside overrides"),
    ({"settings": RunSettings(backend="local")}, None),
])
def test_api_run_takes_each_as_an_object_or_keywords_not_both(objects, words):
    from distro_bench import api

    if words:
        with pytest.raises(InputError, match=words):
            api.run(scenario_from_dict(tiny_scenario_dict()), steps=3, **objects)
    with pytest.raises(InputError, match=r"not both .*backend given beside settings"):
        api.run(scenario_from_dict(tiny_scenario_dict()), settings=RunSettings(backend="local"), backend="netns")


# ---- the lifecycle --------------------------------------------------------------------------------------

def test_open_claims_the_folder_and_says_running(tmp_path, claims):
    life = RunLifecycle(scenario_from_dict(tiny_scenario_dict()), "local")
    run_dir = life.open(tmp_path / "out")
    assert json.loads((run_dir / "status.json").read_text()) == {"state": "running", "reason": None}
    assert (run_dir / "scenario.yaml").is_file()
    claim = (claims / f"{life.claim_id}.owner").read_text().splitlines()
    assert claim[1] == str(run_dir.resolve())
    life.release()
    assert not list(claims.iterdir())


def test_training_goes_seed_by_seed_through_the_launch(tmp_path, claims):
    s = Overrides(repeat=2).apply(scenario_from_dict(tiny_scenario_dict()))
    life = RunLifecycle(s, "local")
    life.open(tmp_path)
    calls = []
    with life.guard():
        life.train_all(lambda name, seed: calls.append((seed, name)))
    assert life.state == "complete" and life.reason is None
    seeds = s.train.seed_list()
    assert calls == [(seed, name) for seed in seeds for name in training_order(s)[seed]]
    assert life.worker_dir("adamw", seeds[1]) == life.run_dir / "workers" / "adamw" / f"seed{seeds[1]}"
    life.release()


def test_the_order_within_a_seed_rotates_and_is_recorded(tmp_path, claims):
    """Issue 35: methods always ran in the scenario's order within a seed, so the first met the fresh host every
    time. Now each seed starts one method further on (every method in every place over as many seeds as
    methods), the launch follows it, and summary.json's run block records it."""
    opts = {"adamw": {"lr": 3e-3}, "diloco": {"lr": 3e-3, "inner_steps": 2}, "sparta": {"lr": 3e-3}}
    s = Overrides(repeat=3).apply(scenario_from_dict(tiny_scenario_dict(optimizers=opts)))
    seeds = s.train.seed_list()
    order = training_order(s)
    assert order == {seeds[0]: ["adamw", "diloco", "sparta"], seeds[1]: ["diloco", "sparta", "adamw"],
                     seeds[2]: ["sparta", "adamw", "diloco"]}
    assert order == training_order(s), "the order is a pure function of the scenario (every host derives it)"
    life = RunLifecycle(s, "local")
    life.open(tmp_path)
    calls = []
    with life.guard():
        life.train_all(lambda name, seed: calls.append((seed, name)))
    life.release()
    assert calls == [(seed, name) for seed in seeds for name in order[seed]]
    assert {name for _, name in calls[:len(opts)]} == set(opts), "seed by seed: whole comparisons first"
    d = tmp_path / "run"
    (d / "workers").mkdir(parents=True)
    write_status(d, "running", None)
    finalize(d, s, "local", "complete", None, "t0")
    recorded = json.loads((d / "summary.json").read_text())["run"]["order_by_seed"]
    assert recorded == {str(seed): names for seed, names in order.items()}


@pytest.mark.parametrize("host, reason", [(None, "interrupted (Ctrl-C or SIGTERM)"),
                                          (1, "interrupted on host 1 (Ctrl-C or SIGTERM)")])
def test_ctrl_c_is_interrupted_and_the_run_incomplete(tmp_path, claims, host, reason):
    life = RunLifecycle(scenario_from_dict(tiny_scenario_dict()), "local", host=host)
    life.open(tmp_path)
    heard = []
    with pytest.raises(Interrupted, match="partial results kept in"), life.guard(on_failure=heard.append):
        raise KeyboardInterrupt
    assert (life.state, life.reason) == ("incomplete", reason) and isinstance(heard[0], KeyboardInterrupt)
    life.release()


def test_a_failure_is_the_status_reason_and_finish_writes_status_then_summary(tmp_path, claims):
    life = RunLifecycle(scenario_from_dict(tiny_scenario_dict()), "local", host=2)
    run_dir = life.open(tmp_path)
    (run_dir / "workers").mkdir()
    with pytest.raises(WorkerFailed), life.guard():
        raise WorkerFailed("adamw: worker rank 1 exited with code 1", rank=1)
    assert life.state == "failed" and life.reason == "host 2: adamw: worker rank 1 exited with code 1"
    summary = life.finish(write_report=False)
    status = json.loads((run_dir / "status.json").read_text())
    assert status == {"state": "failed", "reason": life.reason} and summary["run"]["state"] == "failed"
    assert json.loads((run_dir / "summary.json").read_text())["run"]["reason"] == life.reason
    assert life.claim_id is None and not list(claims.iterdir())


def test_the_agent_uses_the_lifecycle_not_the_runners_helpers():
    tree = ast.parse((REPO / "harness" / "distro_bench" / "multihost" / "agent.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "distro_bench.run.runner" not in imported and "distro_bench.run.lifecycle" in imported
