"""The optimizer registries agree, every option model validates and has a JSON Schema, and per-step and
periodic methods describe their bytes through the same interface."""

from __future__ import annotations

import pytest

from distro_bench.errors import InputError, ScenarioError
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.train.optim import OPTIONS, STRATEGY_PATHS, get_strategy
from distro_bench.train.optim.base import Period, payload_of
from tests.helpers import tiny_scenario_dict

SHAPES = {"w": (64, 32), "b": (32,)}


def test_every_option_model_has_a_strategy_and_a_schema():
    assert set(OPTIONS) == set(STRATEGY_PATHS)
    for name, model in OPTIONS.items():
        assert get_strategy(name).Config is model
        schema = model.model_json_schema()
        assert schema["properties"]["type"]["const"] == name and "lr" in schema["required"]
    with pytest.raises(InputError, match="known: adamw, desloc, diloco, distro, muloco, noloco, powersgd, sparseloco, sparta, streaming-diloco"):
        get_strategy("sgd")


@pytest.mark.parametrize("options, problem", [
    ({"diloco": {"lr": 1e-3, "inner_steps": 0}}, "optimizers.diloco.inner_steps"),
    ({"sparseloco": {"lr": 1e-3, "values": "3bit"}}, "optimizers.sparseloco.values"),
    ({"powersgd": {"lr": 1e-3, "start_step": 1}}, "optimizers.powersgd.start_step"),
    ({"powersgd": {"lr": 1e-3, "outer_lr": 0.7}}, "optimizers.powersgd.outer_lr: unknown field"),
    ({"sparta": {"lr": 1e-3, "fraction": 0}}, "optimizers.sparta.fraction"),
    ({"muloco": {"lr": 1e-3, "muon_adjust_lr": "none"}}, "optimizers.muloco.muon_adjust_lr"),
    ({"desloc": {"lr": 1e-3, "variance_period": 0}}, "optimizers.desloc.variance_period"),
    ({"streaming-diloco": {"lr": 1e-3, "inner_steps": 4, "fragments": 5}}, "fragments (5) is more than inner_steps (4)"),
    ({"noloco": {"lr": 1e-3, "group_size": 1}}, "optimizers.noloco.group_size"),
])
def test_bad_method_options_name_the_field(options, problem):
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(tiny_scenario_dict(optimizers={"adamw": {"lr": 1e-3}, **options}))
    assert problem in str(e.value)


def test_periodic_methods_send_at_the_end_of_each_period_and_at_finish():
    for name, opts in (("diloco", {"inner_steps": 4}), ("sparseloco", {"inner_steps": 4})):
        cfg, s = OPTIONS[name](lr=1e-3, **opts), get_strategy(name)
        period = s.predict_period(cfg, SHAPES, 4)
        assert isinstance(period, Period) and period.steps == 4 and period.collectives
        sends = [bool(s.predict_step(cfg, SHAPES, 4, step, 10)) for step in range(10)]
        assert sends == [False, False, False, True] * 2 + [False, False]
        assert s.predict_finish(cfg, SHAPES, 4, 10) == period.collectives and s.predict_finish(cfg, SHAPES, 4, 8) == []
        tx, rx = payload_of(period.collectives, 4)
        assert s.predict_payload_bytes(cfg, SHAPES, 4) == (tx / 4, rx / 4)


def test_per_step_methods_have_a_period_of_one():
    for name in ("adamw", "distro"):
        cfg, s = OPTIONS[name](lr=1e-3), get_strategy(name)
        period = s.predict_period(cfg, SHAPES, 4)
        assert period.steps == 1 and period.collectives == s.predict_collectives(cfg, SHAPES, 4)
        assert s.predict_step(cfg, SHAPES, 4, 7, 10) == period.collectives and s.predict_finish(cfg, SHAPES, 4, 10) == []


def test_powersgd_sends_the_gradient_until_its_start():
    cfg, s = OPTIONS["powersgd"](lr=1e-3, rank=1, start_fraction=0.2), get_strategy("powersgd")
    assert cfg.start_at(10) == 2 and cfg.start_at(100) == 20 and cfg.start_at(3) == 2
    plain, compressed = s.predict_step(cfg, SHAPES, 4, 1, 10), s.predict_step(cfg, SHAPES, 4, 2, 10)
    assert [c.nbytes for c in plain] == [4 * (64 * 32 + 32)]
    # w: (64 + 32) x rank 1 = 96 < 2048 / 2, compressed into P (64) and Q (32); b: a vector, sent as is
    assert [c.nbytes for c in compressed] == [4 * 32, 4 * 64, 4 * 32]
