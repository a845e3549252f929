"""The link test's pass criteria and plan (net/linkcheck.py; moved from api.py in issue 50). The measurements
themselves run in tests/integration/netns (test_netns.py, test_netchange.py)."""

from __future__ import annotations

import pytest

from distro_bench.errors import InputError
from distro_bench.net import linkcheck
from tests.helpers import tiny_scenario_dict


@pytest.mark.parametrize("text, want", [("0.9,1.02", (0.9, 1.02)), ("90%,102%", (0.9, 1.02)), ((0.5, 2.0), (0.5, 2.0))])
def test_tolerance_as_fractions_of_the_rate(text, want):
    assert linkcheck.parse_tolerance(text) == pytest.approx(want)


@pytest.mark.parametrize("text", ["0.9", "high,low", "1.1,0.9", "0,1"])
def test_a_tolerance_that_is_not_lo_below_hi_names_the_option(text):
    with pytest.raises(InputError) as e:
        linkcheck.parse_tolerance(text)
    assert "--tolerance" in str(e.value) and repr(text) in str(e.value)


def _schedule(outside: int, lateness: list[float]) -> linkcheck.ScheduleReport:
    return linkcheck.ScheduleReport(scenario="s", node=0, direction="up", window_s=1.0, asked_bps=[1e6, 2e6],
                                    wire_bps=[0.98e6, 1.9e6], goodput_bps=[0.9e6, 1.8e6], lateness_s=lateness,
                                    correlation=0.99, total_ratio=0.96, windows_outside=outside, windows_settled=2,
                                    tolerance=(0.9, 1.02))


def test_a_schedule_passes_with_every_window_inside_and_no_late_change():
    assert _schedule(0, [0.01]).passed
    assert not _schedule(1, [0.01]).passed
    assert not _schedule(0, [linkcheck.MAX_CHANGE_LATENESS_S + 0.01]).passed
    d = _schedule(0, [0.01]).to_dict()  # `links --schedule --json`: the keys it always had
    assert list(d) == ["scenario", "node", "direction", "window_s", "asked_bps", "wire_bps", "goodput_bps",
                       "lateness_s", "correlation", "total_ratio", "windows_outside", "passed"]
    assert d["passed"] is True and d["asked_bps"] == [1e6, 2e6]


def test_a_schedule_check_refuses_a_node_or_direction_it_cannot_follow(tmp_path):
    from distro_bench.scenario.loading import scenario_from_dict

    s = scenario_from_dict(tiny_scenario_dict())
    with pytest.raises(InputError, match="--direction"):
        linkcheck.plan_schedule(s, node=0, direction="sideways", seconds=5)
    with pytest.raises(InputError, match="--node: 7"):
        linkcheck.plan_schedule(s, node=7, direction="up", seconds=5)
    with pytest.raises(InputError, match="no timed schedule entry or trace"):
        linkcheck.plan_schedule(s, node=0, direction="up", seconds=5)
