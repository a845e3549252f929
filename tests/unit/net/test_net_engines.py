"""Link planning with made-up host capabilities: which engine, what tc does, what is not emulated, and
the error that stops a run before it starts. Also the link-test arithmetic."""

from __future__ import annotations

import dataclasses

import pytest

from distro_bench.errors import CapabilityError, InputError
from distro_bench.net.engines import Direction, plan_links, select_engine
from distro_bench.net.host import Capabilities
from distro_bench.net.link import Impairment
from distro_bench.net.linktest import expected_rtt, goodput_status, rtt_tolerance
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import tiny_scenario_dict

HOST = Capabilities(root=True, kernel="test", iproute2="iproute2-6.1.0", nsenter=True, netns=True, netns_error=None,
                    qdiscs=("pfifo", "tbf", "htb"), iperf3=True, ping=True, ethtool=True,
                    delayline=False, delayline_detail="not importable", docker=None)
WITH_NETEM = dataclasses.replace(HOST, qdiscs=("pfifo", "tbf", "htb", "netem"))
WITH_LINE = dataclasses.replace(HOST, delayline=True, delayline_detail="importable")


def scenario(link: dict):
    """The nodes of a two-worker scenario on link `link`: what planning takes."""
    return scenario_from_dict(tiny_scenario_dict(links={"l": link}, workers=[{"count": 2, "link": "l"}])).nodes()


RATE_ONLY = {"up": "10Mbit", "down": "50Mbit"}
DSL = {"up": "10Mbit", "down": "50Mbit", "delay": "15ms", "jitter": "3ms", "loss": "0.1%"}


def test_rate_only_needs_no_engine_even_without_netem():
    plan = plan_links(scenario(RATE_ONLY), HOST, engine="tc")
    assert plan.engine == "none" and plan.not_emulated == []
    n0 = plan.nodes[0]
    assert n0.up.tc.rate_bps == 10_000_000 and n0.down.tc.rate_bps == 50_000_000
    assert not n0.up.tc.netem and not n0.needs_delay_line


def test_netem_host_puts_impairment_into_tc():
    plan = plan_links(scenario(DSL), WITH_NETEM)
    assert plan.engine == "tc"
    q = plan.nodes[1].down.tc
    assert (q.rate_bps, q.delay_s, q.jitter_s, q.loss) == (50_000_000, 0.015, 0.003, 0.001)
    assert plan.delay_line_ranks == set()


def test_auto_without_netem_uses_the_delay_line_and_keeps_rate_in_tc():
    plan = plan_links(scenario(DSL), WITH_LINE)
    assert plan.engine == "userspace"
    assert plan.delay_line_ranks == {0, 1}
    up = plan.nodes[0].up
    assert up.delay_line and up.tc.rate_bps == 10_000_000 and not up.tc.netem


def test_tc_engine_without_netem_stops_before_starting_and_names_the_way_out():
    with pytest.raises(CapabilityError) as e:
        plan_links(scenario(DSL), WITH_LINE, engine="tc")
    msg = str(e.value)
    assert "link 'l'" in msg and "node0, node1" in msg
    assert "delay 15ms" in msg and "netem" in msg
    assert "--link-engine userspace" in msg and "--allow-unemulated" in msg
    assert e.value.exit_code == 2


def test_no_engine_at_all_says_both_are_missing():
    with pytest.raises(CapabilityError) as e:
        plan_links(scenario(DSL), HOST)
    assert "netem" in str(e.value) and "delay line" in str(e.value)


def test_allow_unemulated_runs_with_rate_and_lists_what_is_missing():
    plan = plan_links(scenario(DSL), HOST, allow_unemulated=True)
    assert plan.nodes[0].up.tc.rate_bps == 10_000_000 and not plan.nodes[0].up.tc.netem
    missing = plan.not_emulated
    assert len(missing) == 4  # two nodes, two directions
    assert missing[0].startswith("node0 up: delay 15ms, jitter 3ms, loss 0.1% needs")


def test_unknown_engine_is_an_input_error():
    with pytest.raises(InputError):
        select_engine("ebpf", HOST)


def test_expected_rtt_sums_four_one_way_delays():
    a_up, a_down = Direction(delay_s=0.010), Direction(delay_s=0.020)
    b_up, b_down = Direction(delay_s=0.001), Direction(delay_s=0.002)
    assert expected_rtt(a_up, a_down) == pytest.approx(0.030)
    assert expected_rtt(a_up, a_down, b_up, b_down) == pytest.approx(0.033)
    assert rtt_tolerance(0.030) == pytest.approx(0.0025)  # 1 ms + 5%, the bound
    assert rtt_tolerance(0.030, jitter_sum_s=0.006) == pytest.approx(0.0045)


def test_goodput_range():
    assert goodput_status(9.5e6, 10e6, 0.90, 1.02) == "PASS"
    assert goodput_status(8.9e6, 10e6, 0.90, 1.02) == "FAIL"
    assert goodput_status(10.3e6, 10e6, 0.90, 1.02) == "FAIL"
    assert goodput_status(None, 10e6, 0.90, 1.02) == "FAIL"


# ---- duplication: the proof that a new impairment flows through one type ------------------------

DUP = {"up": "10Mbit", "down": "50Mbit", "delay": "15ms", "duplicate": "1%"}


def test_duplicate_goes_to_netem_where_the_kernel_has_it():
    plan = plan_links(scenario(DUP), WITH_NETEM)
    assert plan.engine == "tc" and plan.delay_line_ranks == set()
    up = plan.nodes[0].up
    assert (up.tc.rate_bps, up.tc.delay_s, up.tc.duplicate) == (10_000_000, 0.015, 0.01)
    assert up.delay_line is None and up.spec.duplicate == 0.01


def test_duplicate_goes_to_the_delay_line_with_a_seed_per_node_and_direction():
    plan = plan_links(scenario(DUP), WITH_LINE, seed=3)  # the run's seed
    assert plan.engine == "userspace"
    n1 = plan.nodes[1]
    assert n1.up.tc.duplicate == 0 and n1.up.tc.delay_s == 0 and n1.up.tc.rate_bps == 10_000_000
    assert n1.up.delay_line == Impairment(0.015, duplicate=0.01, seed=3002)
    assert n1.down.delay_line == Impairment(0.015, duplicate=0.01, seed=3003)


def test_duplicate_alone_needs_an_engine_and_says_so():
    with pytest.raises(CapabilityError, match="duplicate 1%"):
        plan_links(scenario({"up": "10Mbit", "duplicate": "1%"}), HOST)
    plan = plan_links(scenario({"up": "10Mbit", "duplicate": "1%"}), HOST, allow_unemulated=True)
    assert plan.not_emulated[0].startswith("node0 up: duplicate 1% needs")
