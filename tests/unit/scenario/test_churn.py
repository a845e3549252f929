"""The churn plan (harness/distro_bench/scenario/churn.py) and the scenario's checks on it: who is away when, the same
for every optimizer of a seed, at the rate asked, and refused where a run could not do it."""

from __future__ import annotations

import itertools

import pytest

from distro_bench.errors import ScenarioError
from distro_bench.scenario.churn import ChurnPlan, ChurnSpec
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.train.churn import Change
from tests.helpers import tiny_scenario_dict


def _scenario(churn: dict, workers: int = 4, **optimizers):
    return scenario_from_dict(tiny_scenario_dict(workers=[{"count": workers, "hardware": "host"}], churn=churn,
                                                 optimizers=optimizers or {"adamw": {"lr": 3e-3}}))


def test_a_scheduled_absence_covers_leave_to_back():
    plan = ChurnPlan(ChurnSpec(events=[{"worker": 2, "leave": "3s", "back": "5s"}, {"worker": 1, "leave": "4s"}]), 4, 0)
    assert plan.members(2.99) == {0, 1, 2, 3}
    assert plan.members(3.0) == {0, 1, 3}
    assert plan.members(4.5) == {0, 3}
    assert plan.members(5.0) == {0, 2, 3}  # back at 5 s; worker 1 never returns
    assert plan.members(1e5) == {0, 2, 3}


def test_failures_come_at_the_rate_asked_and_last_the_downtime():
    rate, downtime, horizon = 6.0, 2.0, 3600.0
    plan = ChurnPlan(ChurnSpec(failures_per_minute=rate, downtime=f"{downtime}s"), 9, seed=7)
    absences = plan.absences(horizon)
    assert {a.rank for a in absences} == set(range(1, 9))  # every worker but the coordinator
    assert all(a.kind == "failure" and a.end_s - a.start_s == pytest.approx(downtime) for a in absences)
    # Present for Exp(rate) between failures, away for the downtime: failures per worker-hour = 1 / (1/rate + d).
    expected = 8 * horizon / (60.0 / rate + downtime)
    assert abs(len(absences) - expected) < 4 * expected**0.5  # 4 sigma of a Poisson count, seeded: fixed
    for r in range(1, 9):
        mine = [a for a in absences if a.rank == r]
        assert all(b.start_s >= a.end_s for a, b in itertools.pairwise(mine))  # a worker fails again only once back


def test_the_plan_is_the_seeds_alone():
    spec = ChurnSpec(failures_per_minute=3, downtime="1s")
    a, b, c = ChurnPlan(spec, 4, 1), ChurnPlan(spec, 4, 1), ChurnPlan(spec, 4, 2)
    times = [0.5 * i for i in range(400)]
    assert [a.members(t) for t in times] == [b.members(t) for t in times]  # every optimizer of a seed alike
    assert [a.members(t) for t in times] != [c.members(t) for t in times]
    # A worker's failures do not depend on how many workers there are.
    assert [a.away(2, t) for t in times] == [ChurnPlan(spec, 8, 1).away(2, t) for t in times]
    # The spec's own seed fixes the draw across run seeds.
    fixed = ChurnSpec(failures_per_minute=3, downtime="1s", seed=5)
    assert [ChurnPlan(fixed, 4, 1).members(t) for t in times] == [ChurnPlan(fixed, 4, 2).members(t) for t in times]


def test_the_coordinator_never_leaves_and_no_failure_means_no_absence():
    plan = ChurnPlan(ChurnSpec(failures_per_minute=60, downtime="10s"), 4, 0)
    assert all(plan.away(0, 0.1 * i) is None for i in range(1000))
    quiet = ChurnPlan(ChurnSpec(failures_per_minute=0), 4, 0)
    assert quiet.absences(1e6) == [] and quiet.members(123.0) == {0, 1, 2, 3}


def test_a_change_names_who_left_who_came_back_and_the_donor():
    c = Change(step=10, before=frozenset({0, 1, 3}), after=frozenset({0, 2, 3}), failure=False)
    assert (c.left, c.joined, c.donor) == ([1], [2], 0)
    assert Change(5, frozenset({1, 2}), frozenset({1, 2, 3}), False).donor == 1


@pytest.mark.parametrize(("churn", "words"), [
    ({"events": [{"worker": 0, "leave": "1s"}]}, "greater than or equal to 1"),
    ({"events": [{"worker": 4, "leave": "1s"}]}, "ranks 0-3"),
    ({"events": [{"worker": 1, "leave": "5s", "back": "2s"}]}, "must be after leave"),
    ({"failures_per_minute": 2, "downtime": "0s"}, "downtime must be more than 0s"),
    ({"failures_per_minute": 100}, "less than or equal to 60"),
    ({"failures_per_minute": -1}, "greater than or equal to 0"),
    ({"surprise": 1}, "surprise"),
])
def test_a_bad_churn_section_names_the_field(churn, words):
    with pytest.raises(ScenarioError, match="churn") as e:
        _scenario(churn)
    assert words in str(e.value)


@pytest.mark.parametrize(("options", "words"), [
    ({"type": "noloco", "lr": 1e-3}, "type noloco does not follow a changing set of workers"),
    ({"type": "powersgd", "lr": 1e-3}, "type powersgd does not follow"),
    ({"type": "distro", "lr": 1e-3, "overlap": True}, "overlap must be false with churn"),
])
def test_an_optimizer_that_cannot_follow_churn_is_refused_with_the_ones_that_can(options, words):
    with pytest.raises(ScenarioError) as e:
        _scenario({"failures_per_minute": 1}, adamw={"lr": 3e-3}, other=options)
    text = str(e.value)
    assert "optimizers.other" in text and words in text and "adamw, diloco, distro" in text


def test_churn_that_asks_nothing_lets_every_optimizer_run():
    s = _scenario({"failures_per_minute": 0}, adamw={"lr": 3e-3}, noloco={"lr": 1e-3})
    assert s.churn is not None and not s.churn.active
    assert _scenario({"events": [{"worker": 3, "leave": "2s"}]}, adamw={"lr": 3e-3}, diloco={"lr": 1e-3}).churn.active


def _rows(present: dict[int, list[int]], tokens: int = 100):
    import pandas as pd

    return pd.DataFrame([{"rank": r, "step": s, "tokens": tokens} for r, steps in present.items() for s in steps])


def test_goodput_counts_the_tokens_that_reached_the_model_and_availability_the_steps_trained():
    from distro_bench.results.metrics import churn_figures

    # 3 workers, 10 steps; rank 2 away for steps 4-7 after losing 3 local steps, and handed 1 kB on its return
    rows = _rows({0: list(range(10)), 1: list(range(10)), 2: [0, 1, 2, 3, 8, 9]})
    events = [{"type": "churn", "event": "leave", "rank": 2, "lost_steps": 3, "lost_tokens": 300},
              {"type": "churn", "event": "join", "rank": 2, "state_bytes": 1000},
              {"type": "churn", "event": "handover", "rank": 0, "state_bytes": 1000}]
    got = churn_figures(rows, events, world=3, steps=10, train_time_s=2.0)
    assert got == {"churn_leaves": 1, "lost_steps": 3, "worker_availability": 26 / 30,
                   "goodput_tokens_per_s": (2600 - 300) / 2.0, "state_handover_bytes": 1000}
    quiet = churn_figures(_rows({0: list(range(10)), 1: list(range(10))}), [], world=2, steps=10, train_time_s=4.0)
    assert quiet == {"churn_leaves": 0, "lost_steps": 0, "worker_availability": 1.0, "goodput_tokens_per_s": 500.0,
                     "state_handover_bytes": 0}


def test_the_report_has_a_churn_section_only_for_a_run_with_churn(tmp_path):
    import yaml

    from distro_bench.report.churn_section import churn_section
    from distro_bench.report.load import load_for_report
    from tests.unit.runfolders import make_run

    run = make_run(tmp_path)
    assert churn_section(load_for_report(run)) is None
    scen = yaml.safe_load((run / "scenario.yaml").read_text())
    scen["churn"] = {"failures_per_minute": 2, "downtime": "5s", "detection": "1s"}
    (run / "scenario.yaml").write_text(yaml.safe_dump(scen))
    section = churn_section(load_for_report(run))
    assert section is not None and section.title == "Churn"
    assert "failures at 2 per worker-minute, each away 5s, detected after 1s" in section.blocks[0].text
    table = section.blocks[1]
    assert [r[0] for r in table.rows] == ["adamw", "distro"] and table.rows[0][2] == "100%"


def test_an_absence_shorter_than_a_step_still_costs_the_next_step():
    plan = ChurnPlan(ChurnSpec(events=[{"worker": 1, "leave": "2s", "back": "3s"}]), 3, 0)
    # Rank 0 looks at 1.5 s and again at 4 s (a 2.5 s step): worker 1 was away in between, so it sits out one step.
    assert plan.members(1.5) == plan.members(4.0) == {0, 1, 2}
    assert plan.members_since(1.5, 4.0) == {0, 2} and plan.away_since(1, 1.5, 4.0) == "scheduled"
    assert plan.members_since(4.0, 6.5) == {0, 1, 2}  # and only that one
    failing = ChurnPlan(ChurnSpec(failures_per_minute=6, downtime="1s"), 2, 0)
    start = failing.absences(100)[0].start_s
    assert failing.away_since(1, start - 0.1, start + 5) == "failure"  # back long before the look
    assert failing.away(1, start + 5) is None


def test_a_time_budget_decides_again_after_a_change_of_workers():
    from types import SimpleNamespace

    from distro_bench.scenario.budget import resolve_budget
    from distro_bench.train.loop import Progress, TrainLoop

    class Members:  # steps 0-9 everyone, 10-14 without rank 2, then everyone again
        def members(self, step):
            return frozenset({0, 1}) if 10 <= step < 15 else frozenset({0, 1, 2})

    budget = resolve_budget(steps=None, time_budget=20.0, tokens=None, target_val_loss=None, tokens_per_step=1,
                            default_steps=50)
    loop = SimpleNamespace(membership=Members(), budget=budget, progress=Progress(next_check=40))
    due = [s for s in range(30) if TrainLoop.decision_due(loop, s, evaluated=False)]
    assert due == [10, 15]  # the first steps with other workers; otherwise the policy's next look, step 40
    loop.membership = None
    assert [s for s in range(41) if TrainLoop.decision_due(loop, s, evaluated=False)] == [40]
