"""The pure parts of network emulation: tc plans, read-back verification, naming, the star's ip lines."""

from __future__ import annotations

import pytest

from distro_bench.net import naming
from distro_bench.net.shaping import QdiscPlan, check_qdiscs, tc_commands
from distro_bench.net.topology import StarSpec


def test_rate_only_is_one_tbf():
    plan = QdiscPlan(rate_bps=10_000_000)
    assert tc_commands("eth0", plan) == [
        ["tc", "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "tbf",
         "rate", "10000000bit", "burst", "6250", "limit", "131250"],
    ]


def test_small_rate_keeps_a_burst_of_four_frames():
    plan = QdiscPlan(rate_bps=1_000_000)
    assert plan.burst_bytes == 4 * 1514
    assert plan.limit_bytes == 16 * 1514 + 4 * 1514


def test_rate_and_impairment_put_netem_under_tbf():
    plan = QdiscPlan(rate_bps=50_000_000, delay_s=0.015, jitter_s=0.003, loss=0.001)
    cmds = tc_commands("p3", plan)
    assert cmds[0][:9] == ["tc", "qdisc", "replace", "dev", "p3", "root", "handle", "1:", "tbf"]
    assert cmds[1] == ["tc", "qdisc", "replace", "dev", "p3", "parent", "1:1", "handle", "10:", "netem",
                       "limit", "1000", "delay", "15000us", "3000us", "loss", "random", "0.1%"]


def test_netem_alone_goes_to_the_root_and_sizes_its_queue_to_the_bdp():
    plan = QdiscPlan(delay_s=0.025, loss=0.005)
    (cmd,) = tc_commands("eth0", plan)
    assert cmd[5:8] == ["root", "handle", "10:"]
    assert cmd[cmd.index("limit") + 1] == str(plan.netem_limit_packets)
    # No rate: assume 10 Gbit, so 25 ms holds ~20k frames, twice over.
    assert plan.netem_limit_packets > 20_000
    assert cmd[-3:] == ["loss", "random", "0.5%"]


def test_empty_plan_has_no_commands():
    assert tc_commands("eth0", QdiscPlan()) == []
    assert QdiscPlan().empty


TBF = {"kind": "tbf", "handle": "1:", "dev": "eth0", "root": True, "options": {"rate": 1250000, "burst": 6250}}
NETEM = {"kind": "netem", "handle": "10:", "dev": "eth0", "parent": "1:1",
         "options": {"limit": 1000, "delay": {"delay": 0.015, "jitter": 0.003, "correlation": 0},
                     "loss-random": {"loss": 0.001, "correlation": 0}}}


def test_check_accepts_what_was_planned():
    assert check_qdiscs("eth0", QdiscPlan(rate_bps=10_000_000), [TBF]) == []
    full = QdiscPlan(rate_bps=10_000_000, delay_s=0.015, jitter_s=0.003, loss=0.001)
    assert check_qdiscs("eth0", full, [TBF, NETEM]) == []


def test_check_catches_a_missing_netem_child():
    # What tcconfig leaves behind on a kernel without netem while exiting 0.
    full = QdiscPlan(rate_bps=10_000_000, delay_s=0.015)
    problems = check_qdiscs("eth0", full, [TBF])
    assert len(problems) == 1 and "netem" in problems[0]


def test_check_catches_wrong_values_and_extras():
    assert "rate" in check_qdiscs("eth0", QdiscPlan(rate_bps=20_000_000), [TBF])[0]
    wrong_delay = QdiscPlan(rate_bps=10_000_000, delay_s=0.030, jitter_s=0.003, loss=0.001)
    assert any("delay" in p for p in check_qdiscs("eth0", wrong_delay, [TBF, NETEM]))
    assert any("unplanned netem" in p for p in check_qdiscs("eth0", QdiscPlan(rate_bps=10_000_000), [TBF, NETEM]))
    noqueue = {"kind": "noqueue", "handle": "0:", "dev": "eth0", "root": True, "options": {}}
    assert check_qdiscs("eth0", QdiscPlan(), [noqueue]) == []
    assert check_qdiscs("eth0", QdiscPlan(), [TBF])
    assert "expected tbf" in check_qdiscs("eth0", QdiscPlan(rate_bps=10_000_000), [noqueue])[0]


def test_check_ignores_other_interfaces():
    other = dict(TBF, dev="p1")
    assert "expected tbf" in check_qdiscs("eth0", QdiscPlan(rate_bps=10_000_000), [other])[0]


def test_names_are_scoped_by_run_id():
    rid = naming.new_run_id()
    assert naming.switch_ns(rid) == f"dbench-{rid}-sw"
    assert naming.node_ns(rid, 3) == f"dbench-{rid}-n3"
    assert naming.link_ns(rid, 3) == f"dbench-{rid}-l3"
    assert naming.is_ours(naming.node_ns(rid, 0), rid)
    assert not naming.is_ours(naming.node_ns("abc123", 0), rid)
    assert naming.is_ours("dbench-abc123-sw") and not naming.is_ours("docker0")
    with pytest.raises(ValueError):
        naming.switch_ns("Bad Id")
    assert len({naming.new_run_id() for _ in range(200)}) == 200  # never a repeat within a process


def test_a_run_id_whose_namespaces_are_on_the_host_is_not_issued_again(monkeypatch, tmp_path):
    """24 random bits collide (a CI run once drew one id twice in 200): an id in use on the host, or issued
    before by this process, is drawn again."""
    for name in ("dbench-aaaaaa-sw", "dbench-aaaaaa-n0", "docker0-ns", "dbench-bbbbbb-n1"):
        (tmp_path / name).touch()
    assert naming.live_run_ids(str(tmp_path)) == {"aaaaaa", "bbbbbb"}
    assert naming.live_run_ids(str(tmp_path / "absent")) == set()
    monkeypatch.setattr(naming, "live_run_ids", lambda netns_dir=str(tmp_path): {"aaaaaa", "bbbbbb"})
    draws = iter(["aaaaaa", "bbbbbb", "cccccc", "cccccc", "dddddd"])
    monkeypatch.setattr(naming.secrets, "token_hex", lambda n: next(draws))
    monkeypatch.setattr(naming, "_issued", set())
    assert naming.new_run_id() == "cccccc"
    assert naming.new_run_id() == "dddddd"  # cccccc was issued already


def test_star_creates_veths_in_place_and_link_namespaces_only_where_asked():
    spec = StarSpec.build("abc123", 3, {1})
    assert spec.namespaces() == ["dbench-abc123-sw", "dbench-abc123-n0", "dbench-abc123-n1", "dbench-abc123-l1",
                                 "dbench-abc123-n2"]
    from distro_bench.net.topology import IfaceConfig, Veth

    veths = spec.veths()
    assert veths[0] == Veth("eth0", "dbench-abc123-n0", "p0", "dbench-abc123-sw")
    assert veths[1] == Veth("eth0", "dbench-abc123-n1", "a", "dbench-abc123-l1")
    assert veths[2] == Veth("b", "dbench-abc123-l1", "p1", "dbench-abc123-sw")
    assert all(v.ns != v.peer_ns for v in veths)  # both ends in their namespaces: never one left in the root one
    cfg = spec.iface_configs()
    assert cfg["dbench-abc123-sw"][-1] == IfaceConfig("br0", addr="10.77.0.254/24")  # the bridge last, ports joined
    assert IfaceConfig("p2", master="br0") in cfg["dbench-abc123-sw"]
    assert cfg["dbench-abc123-n2"] == [IfaceConfig("eth0", addr="10.77.0.3/24")]
    assert cfg["dbench-abc123-l1"] == [IfaceConfig("a"), IfaceConfig("b")]
    assert spec.offload_targets() == [("dbench-abc123-n1", "eth0"), ("dbench-abc123-l1", "a"),
                                      ("dbench-abc123-l1", "b"), ("dbench-abc123-sw", "p1")]


def test_duplicate_is_a_netem_option_and_is_read_back():
    plan = QdiscPlan(rate_bps=10_000_000, delay_s=0.015, duplicate=0.01)
    assert tc_commands("eth0", plan)[1][-2:] == ["duplicate", "1%"]
    # What iproute2 prints for `duplicate 1%`: an object holding the fraction.
    netem = {**NETEM, "options": {"limit": 1000, "delay": {"delay": 0.015, "jitter": 0, "correlation": 0},
                                  "duplicate": {"duplicate": 0.01, "correlation": 0}}}
    assert check_qdiscs("eth0", plan, [TBF, netem]) == []
    (problem,) = check_qdiscs("eth0", QdiscPlan(rate_bps=10_000_000, delay_s=0.015, duplicate=0.05), [TBF, netem])
    assert "duplicate is 0.01, planned 0.05" in problem
    without = {**netem, "options": {k: v for k, v in netem["options"].items() if k != "duplicate"}}
    assert "duplicate" in check_qdiscs("eth0", plan, [TBF, without])[0]


def test_a_duplicate_only_direction_is_netem_alone():
    (cmd,) = tc_commands("p0", QdiscPlan(duplicate=0.02))
    assert cmd[5:9] == ["root", "handle", "10:", "netem"] and cmd[-2:] == ["duplicate", "2%"]
    assert "delay" not in cmd and "loss" not in cmd


def test_a_rate_change_keeps_the_queue_only_where_no_queued_packet_can_outgrow_the_new_burst():
    """A tbf whose burst shrinks under a queued packet larger than it never sends that packet again (a 20 ->
    10 Mbit change mid-transfer stalled a run's all-reduce until its timeout): such a change rebuilds."""
    from distro_bench.net.link import Direction
    from distro_bench.net.shaping import changes_in_place

    def rate(mbit: float) -> Direction:
        return Direction(rate_bps=int(mbit * 1e6))

    assert QdiscPlan.of(rate(10)).burst_bytes < QdiscPlan.of(rate(20)).burst_bytes
    assert not changes_in_place(rate(20), rate(10))  # the burst would shrink: rebuilt
    assert changes_in_place(rate(10), rate(20))  # it grows: in place, the queue kept
    assert QdiscPlan.of(rate(2)).burst_bytes == QdiscPlan.of(rate(5)).burst_bytes  # both at the 4-frame floor
    assert changes_in_place(rate(5), rate(2))
    assert not changes_in_place(None, rate(10)) and not changes_in_place(Direction(), rate(10))  # a rate added
