"""`optimizers:` entries are typed: the option model their `type` names (default: the entry's name)."""

from __future__ import annotations

import pytest

from distro_bench.errors import ScenarioError
from distro_bench.scenario import methods
from distro_bench.scenario.loading import scenario_from_dict, with_overrides
from distro_bench.scenario.optimizers import AdamWConfig, DisTrOConfig
from tests.helpers import tiny_scenario_dict


def _scenario(**optimizers):
    return scenario_from_dict(tiny_scenario_dict(optimizers=optimizers, baseline=next(iter(optimizers))))


def test_each_shipped_name_is_its_models_type():
    # The registry (pyproject.toml's entry points) and each options model's own `type` agree.
    assert methods.shipped_names()
    for name in methods.shipped_names():
        assert methods.options_class(name).model_fields["type"].default == name


def test_entries_are_typed_and_type_defaults_to_the_name():
    s = _scenario(adamw={"lr": 3e-3}, distro={"lr": 1e-3, "topk": 8},
                  **{"distro-2bit": {"type": "distro", "lr": 1e-3, "values": "1bit"}})
    assert isinstance(s.optimizers["adamw"], AdamWConfig) and s.optimizers["adamw"].lr == 3e-3
    assert isinstance(s.optimizers["distro"], DisTrOConfig) and s.optimizers["distro"].topk == 8
    two = s.optimizers["distro-2bit"]
    assert isinstance(two, DisTrOConfig) and two.type == "distro" and two.values == "1bit"
    assert s.optimizer_configs() == s.optimizers
    # An entry named after one type may still name another.
    assert isinstance(_scenario(adamw={"type": "distro", "lr": 1e-3}).optimizers["adamw"], DisTrOConfig)


def test_the_dump_keeps_every_option_and_reloads_to_the_same_scenario():
    # AdamW's max_grad_norm: null (no clipping) must survive the exclude_none dump that overrides and sweeps use.
    s = _scenario(adamw={"lr": 3e-3, "max_grad_norm": None}, fast={"type": "distro", "lr": 1e-3})
    dumped = s.model_dump(mode="json", exclude_none=True)["optimizers"]
    assert dumped["adamw"]["max_grad_norm"] is None and dumped["fast"]["type"] == "distro"
    again = with_overrides(s, steps=2)
    assert again.optimizers == s.optimizers and again.optimizers["adamw"].max_grad_norm is None
    assert s.resolved_dict()["optimizers"] == dumped


@pytest.mark.parametrize("entry,expected", [
    ({"adamw": {"lr": 1e-3, "topk": 4}},
     ["optimizers.adamw.topk: unknown field 'topk' for optimizer 'adamw' (type adamw); valid: beta1, beta2,"]),
    ({"fast": {"type": "distro", "lr": 1e-3, "beta1": 0.9}},
     ["optimizers.fast.beta1: unknown field 'beta1' for optimizer 'fast' (type distro); valid: bucket, chunk,"]),
    ({"fast": {"lr": 1e-3}}, ["optimizers.fast.(name): unknown optimizer 'fast'; known: adamw, desloc,",
                              "a run named otherwise names its type"]),
    ({"fast": {"type": "lion", "lr": 1e-3}}, ["optimizers.fast.type: unknown optimizer 'lion'; known: adamw,"]),
    ({"distro": {"lr": 1e-3, "topk": 5000}}, ["optimizers.distro: topk (5000) is more than the 4096"]),
])
def test_a_wrong_entry_names_the_field_the_optimizer_and_what_is_valid(entry, expected):
    with pytest.raises(ScenarioError) as e:
        _scenario(**entry)
    text = str(e.value)
    assert all(x in text for x in expected), text
    assert ".adamw.adamw" not in text and ".fast.distro" not in text  # the union's tag is not part of the place


def test_an_entry_problem_does_not_hide_the_other_problems():
    # The failing entry keeps its name (the baseline refers to it); the worker's unknown link is still reported.
    d = tiny_scenario_dict(optimizers={"adamw": {"lr": 3e-3}, "distro": {"lr": 1e-3, "bogus": 1}}, baseline="distro",
                           workers=[{"count": 2, "link": "nope"}])
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(d)
    assert [p.split(":")[0] for p in e.value.problems] == ["optimizers.distro.bogus", "workers[0].link"], e.value
