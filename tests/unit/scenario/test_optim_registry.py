"""The one optimizer registry (entry points and import paths) gives each name its options model and strategy,
every option model validates and has a JSON Schema, and per-step and periodic methods describe their bytes
through the same interface."""

from __future__ import annotations

import pytest

from distro_bench.errors import InputError, ScenarioError
from distro_bench.scenario import methods
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.scenario.optimizers import StrategyConfig
from distro_bench.train.optim import get_strategy
from distro_bench.train.optim.base import Period, payload_of
from tests.helpers import tiny_scenario_dict

SHAPES = {"w": (64, 32), "b": (32,)}


OPTIONS = {name: methods.options_class(name) for name in methods.shipped_names()}


def test_every_option_model_has_a_strategy_and_a_schema():
    # The names come from pyproject.toml's entry points; nothing lists them by hand.
    assert len(OPTIONS) >= 10 and "adamw" in OPTIONS and "distro" in OPTIONS
    for name, model in OPTIONS.items():
        assert get_strategy(name).Config is model
        assert get_strategy(model.strategy or "") is get_strategy(name)  # the import path names the same strategy
        schema = model.model_json_schema()
        assert schema["properties"]["type"]["const"] == name and "lr" in schema["required"]
    with pytest.raises(InputError, match="known: " + ", ".join(sorted(methods.names()))):
        get_strategy("sgd")


def test_an_import_path_names_the_same_method_and_is_recorded_by_its_name():
    s = scenario_from_dict(tiny_scenario_dict(optimizers={
        "adamw": {"lr": 1e-3}, "mine": {"type": "distro_bench.train.optim.distro:DisTrO", "lr": 1e-3, "topk": 4}}))
    assert type(s.optimizers["mine"]) is OPTIONS["distro"] and s.optimizers["mine"].type == "distro"
    assert get_strategy("distro_bench.train.optim.distro:DisTrO") is get_strategy("distro")


@pytest.mark.parametrize("kind, problem", [
    ("nowhere.at_all:Thing", "module 'nowhere' cannot be imported here"),
    ("distro_bench.scenario.optimizers:Nothing", "has no 'Nothing'"),
    ("distro_bench.scenario.optimizers:option_names", "neither a distro_bench.Strategy"),
    ("not a path:", "is not an import path"),
])
def test_a_bad_import_path_says_what_is_wrong(kind, problem):
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(tiny_scenario_dict(optimizers={"adamw": {"lr": 1e-3}, "mine": {"type": kind, "lr": 1e-3}}))
    assert "optimizers.mine.type: " in str(e.value) and problem in str(e.value), str(e.value)


def test_a_stored_scenario_keeps_an_unloadable_method_as_data():
    from distro_bench.scenario.model import Scenario
    from distro_bench.scenario.optimizers import StoredOptions

    d = tiny_scenario_dict(optimizers={"adamw": {"lr": 1e-3},
                                       "mine": {"type": "gone.pkg:Method", "lr": 0.5, "votes": "majority"}})
    with pytest.raises(ScenarioError):
        scenario_from_dict(d)  # running it needs the code
    s = Scenario.model_validate(d, context={"stored": True})
    kept = s.optimizers["mine"]
    assert isinstance(kept, StoredOptions) and kept.code_missing
    # shown as recorded: no option the method's own model might not have is added
    assert s.model_dump(mode="json")["optimizers"]["mine"] == {"type": "gone.pkg:Method", "lr": 0.5, "votes": "majority"}
    # a shipped method's options are still checked: a stored folder is not a way around validation
    bad = tiny_scenario_dict(optimizers={"adamw": {"lr": 1e-3, "topk": 3}})
    with pytest.raises(Exception, match="topk"):
        Scenario.model_validate(bad, context={"stored": True})


class _NoStrategy(StrategyConfig):
    pass


def test_a_config_without_a_strategy_is_refused_at_run_time():
    with pytest.raises(InputError, match="names no strategy"):
        get_strategy(f"{__name__}:_NoStrategy")


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


def test_other_distributions_add_names_a_clash_is_refused_and_shipped_names_stay(monkeypatch):
    from importlib import metadata

    def ep(name, value, dist):
        e = metadata.EntryPoint(name, value, methods.GROUP)
        object.__setattr__(e, "dist", type("Dist", (), {"name": dist})())  # what metadata fills in for an installed one
        return e

    fake = [ep("adamw", "evil.mod:AdamW", "evil"), ep("twice", "a.mod:M", "pkg-a"), ep("twice", "b.mod:M", "pkg-b"),
            ep("mine", f"{__name__}:_NoStrategy", "mine-dist")]
    monkeypatch.setattr(methods.metadata, "entry_points", lambda group: fake if group == methods.GROUP else [])
    methods.registrations.cache_clear()
    methods.options_class.cache_clear()
    try:
        assert methods.target_of("adamw") == "distro_bench.scenario.optimizers:AdamWConfig"
        assert methods.options_class("mine") is _NoStrategy and not methods.is_shipped("mine")
        with pytest.raises(methods.MethodError) as clash:
            methods.target_of("twice")
        assert "registered by more than one distribution (pkg-a: a.mod:M, pkg-b: b.mod:M)" in str(clash.value)
        assert "mine" in methods.names() and "mine" not in methods.shipped_names()
    finally:
        methods.registrations.cache_clear()
        methods.options_class.cache_clear()
