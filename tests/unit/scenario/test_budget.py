"""Budgets: how a train block resolves to one budget, and rank 0's stop rule (pure, no processes)."""

from __future__ import annotations

import pytest

from distro_bench.errors import ScenarioError
from distro_bench.scenario.budget import FIRST_CHECK_STEP, Budget, Decision, StopPolicy, parse_count
from distro_bench.scenario.loading import scenario_from_dict, with_overrides
from tests.helpers import tiny_scenario_dict


@pytest.mark.parametrize("raw, n", [("2M", 2_000_000), ("500k", 500_000), (4096, 4096), ("1.5G", 1_500_000_000)])
def test_parse_count(raw, n):
    assert parse_count(raw) == n


@pytest.mark.parametrize("raw", ["2 Mbit", "-1", 0, "lots", True])
def test_parse_count_rejects(raw):
    with pytest.raises(ValueError):
        parse_count(raw)


def _scenario(**train):
    return scenario_from_dict(tiny_scenario_dict(train={"eval_every": 3, **train}))


def test_steps_stay_the_default_budget():
    s = scenario_from_dict(tiny_scenario_dict(train={}))
    assert s.train.steps == 50 and s.budget() == Budget("steps", 50, max_steps=50, tokens_per_step=2 * 4 * 32)


def test_tokens_become_steps_of_the_whole_world():
    b = _scenario(tokens="1k").budget()  # 2 workers x batch 4 x seq 32 = 256 tokens a step
    assert (b.kind, b.max_steps, b.time_s) == ("tokens", 4, None)


def test_time_budget_has_no_step_count_and_needs_a_decision():
    b = _scenario(time_budget="90s").budget()
    assert (b.kind, b.time_s, b.max_steps, b.needs_decision) == ("time", 90.0, None, True)


def test_target_takes_steps_or_time_as_its_cap():
    by_steps = _scenario(target_val_loss=2.5, steps=40).budget()
    by_time = _scenario(target_val_loss=2.5, time_budget="30s").budget()
    assert (by_steps.kind, by_steps.max_steps, by_steps.time_s) == ("target", 40, None)
    assert (by_time.kind, by_time.max_steps, by_time.time_s) == ("target", None, 30.0)
    assert by_time.as_dict() == {"kind": "target", "value": 2.5, "cap": {"kind": "time", "value": 30.0},
                                 "tokens_per_step": 256}


@pytest.mark.parametrize("train, message", [
    ({"steps": 10, "time_budget": "30s"}, "give one budget, not steps and time_budget"),
    ({"tokens": "1M", "time_budget": "30s"}, "give one budget"),
    ({"target_val_loss": 2.0, "tokens": "1M"}, "capped by steps or time_budget, not tokens"),
    ({"time_budget": "30"}, "has no unit"),
    ({"seeds": [1, 1]}, "seeds must be distinct"),
])
def test_bad_budgets_are_located(train, message):
    with pytest.raises(ScenarioError) as e:
        _scenario(**train)
    assert any(p.startswith("train") and message in p for p in e.value.problems), e.value.problems


def test_overrides_replace_the_budget_and_repeat_makes_seeds():
    s = _scenario(steps=6, seed=3)
    t = with_overrides(s, time_budget="20s", repeat=3)
    assert t.budget().kind == "time" and t.train.steps is None and t.train.seed_list() == [3, 4, 5]
    assert with_overrides(t, steps=5).budget() == Budget("steps", 5, max_steps=5, tokens_per_step=256)
    assert with_overrides(t, target_val_loss=2.0).budget().time_s == 20.0  # the time budget becomes its cap
    assert s.train.seed_list() == [3]


def _simulate(policy: StopPolicy, durations, val=lambda step: None, max_steps=10_000):
    """Run the worker's decision protocol: decisions only at the steps rank 0 named (and at evaluations
    for a target), returning (last step, number of decisions, elapsed at the end, last total estimate)."""
    nxt, elapsed, decisions, total = policy.first_check(), 0.0, 0, None
    for step in range(max_steps):
        elapsed += durations(step)
        policy.observe(step, durations(step))
        v = val(step)
        if step == nxt or (policy.budget.target_val_loss is not None and v is not None):
            d = Decision.decode(policy.decide(step, elapsed, v).encode())  # through the broadcast's encoding
            decisions += 1
            nxt, total = d.next_check, d.total_steps or total
            if d.stop:
                return step, decisions, elapsed, total
    raise AssertionError("never stopped")


def test_time_budget_stops_after_the_first_step_that_reaches_it_with_few_decisions():
    policy = StopPolicy(Budget("time", 10.0, time_s=10.0), eval_every=10)
    last, decisions, elapsed, total = _simulate(policy, lambda s: 0.5 if s == 0 else 0.125)
    # 0.5 + 0.125 * n >= 10 first at n = 76: the step with index 76 (binary-exact durations)
    assert last == 76 and elapsed == 10.0
    assert total == 77
    assert decisions <= 12  # about log2(77) + a few, not one per step


def test_time_budget_follows_a_slowdown_without_overshooting_by_more_than_a_step():
    policy = StopPolicy(Budget("time", 20.0, time_s=20.0), eval_every=10)
    _last, _, elapsed, _ = _simulate(policy, lambda s: 0.1 if s < 50 else 0.3)
    assert 20.0 <= elapsed < 20.0 + 0.3 + 1e-9


def test_first_check_is_early_and_total_is_estimated_there():
    policy = StopPolicy(Budget("time", 10.0, time_s=10.0), eval_every=10)
    assert policy.first_check() == FIRST_CHECK_STEP
    for s in range(FIRST_CHECK_STEP + 1):
        policy.observe(s, 0.1)
    d = policy.decide(FIRST_CHECK_STEP, 0.4, None)
    assert not d.stop and d.total_steps == 100 and FIRST_CHECK_STEP < d.next_check <= FIRST_CHECK_STEP + 64


def test_target_stops_at_the_first_evaluation_at_or_below_it():
    policy = StopPolicy(Budget("target", 2.0, max_steps=100, target_val_loss=2.0), eval_every=10)
    losses = {9: 3.0, 19: 2.4, 29: 1.99, 39: 1.5}
    last, decisions, _, _ = _simulate(policy, lambda s: 0.1, val=losses.get)
    assert last == 29 and decisions == 3


def test_target_cap_stops_when_never_reached():
    policy = StopPolicy(Budget("target", 0.5, max_steps=30, target_val_loss=0.5), eval_every=10)
    d = policy.decide(29, 3.0, 1.0)
    assert d.stop


def test_decision_round_trips_through_its_encoding():
    for d in (Decision(True, None, 12), Decision(False, 40, None), Decision(False, 7, 300)):
        assert Decision.decode(d.encode()) == d


def test_cli_rejects_a_bad_budget_with_exit_2(cli, write_scenario):
    path = write_scenario(tiny_scenario_dict())
    r = cli("run", path, "--backend", "local", "--time-budget", "60")
    assert r.exit_code == 2 and "train.time_budget" in r.output and "has no unit" in r.output
    assert "Traceback" not in r.output
    r = cli("run", path, "--backend", "local", "--tokens", "lots")
    assert r.exit_code == 2 and "train.tokens" in r.output


# ---- warm-up as a fraction of the budget (issue 27) -------------------------------------------------

def _warm(train: dict, **opts):
    return scenario_from_dict(tiny_scenario_dict(
        train={"eval_every": 1, **train},
        optimizers={"adamw": {"lr": 1e-3, "schedule": "cosine", **opts}}))


def test_warmup_fraction_resolves_against_the_budget_steps():
    s = _warm({"steps": 200}, warmup="5%")
    cfg = s.optimizer_configs()["adamw"]
    total = s.budget().expected_steps()
    assert cfg.warmup == 0.05 and cfg.warmup_steps_for(total) == 10
    assert cfg.lr_at(0, total) == pytest.approx(1e-4) and cfg.lr_at(9, total) == pytest.approx(1e-3)
    assert cfg.lr_at(10, total) == pytest.approx(1e-3) and cfg.lr_at(11, total) < 1e-3  # cosine after warm-up
    # the same fraction scales with a longer budget, and a token budget resolves to its steps
    assert _warm({"steps": 1000}, warmup=0.05).optimizer_configs()["adamw"].warmup_steps_for(1000) == 50
    t = _warm({"tokens": 64_000}, warmup="10%")
    assert t.optimizer_configs()["adamw"].warmup_steps_for(t.budget().expected_steps()) == round(
        0.1 * t.budget().max_steps)
    # the resolved scenario (a run folder's scenario.yaml) reloads to the same fraction
    assert scenario_from_dict(s.resolved_dict()).optimizer_configs()["adamw"].warmup == 0.05


def test_warmup_fraction_of_a_time_budget_follows_rank_0s_estimate():
    s = _warm({"time_budget": "60s"}, warmup="5%")
    cfg = s.optimizer_configs()["adamw"]
    assert s.budget().expected_steps() is None  # unknown until rank 0 times steps
    p = StopPolicy(s.budget(), 1)
    for step in range(FIRST_CHECK_STEP + 1):
        p.observe(step, 0.1)
    d = p.decide(FIRST_CHECK_STEP, 0.4)  # ~596 steps left at 0.1 s
    assert d.total_steps == 600 and cfg.warmup_steps_for(d.total_steps) == 30
    assert cfg.lr_at(29, d.total_steps) == pytest.approx(1e-3) and cfg.lr_at(14, d.total_steps) == pytest.approx(5e-4)


def test_warmup_steps_still_load_and_bad_fractions_are_named(cli, write_scenario):
    old = _warm({"steps": 200}, warmup_steps=3).optimizer_configs()["adamw"]
    assert old.warmup is None and old.warmup_steps_for(200) == 3 and old.lr_at(0, 200) == pytest.approx(1e-3 / 3)
    for bad, words in (("150%", "below 100%"), (5, "warmup_steps: 5"), ("soon", "invalid warmup")):
        path = write_scenario(tiny_scenario_dict(optimizers={"adamw": {"lr": 1e-3, "warmup": bad}}))
        r = cli("validate", path)
        assert r.exit_code == 2 and "warmup" in r.output and words in r.output and "Traceback" not in r.output
    with pytest.raises(ScenarioError, match="not both"):
        _warm({"steps": 200}, warmup="5%", warmup_steps=3)
