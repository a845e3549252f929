"""Shared bottlenecks (issue 37), the pure parts: the sites schema and its messages, the layout, the link plan of a
site's uplink (both engines), its htb classes per destination site (commands and read-back), the topology's
description, what `links` expects behind a site, and the bottleneck each method's bytes name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from distro_bench.cli.app import app
from distro_bench.errors import CapabilityError, ScenarioError
from distro_bench.net.emulation import Emulation
from distro_bench.net.engines import plan_links
from distro_bench.net.host import Capabilities
from distro_bench.net.linktest import LinkTarget, site_groups, site_share, with_sites
from distro_bench.net.ns import NetnsRef
from distro_bench.net.shaping import check_qdiscs, tc_commands
from distro_bench.net.tcclass import (
    check_classes,
    inner_classes,
    json_pairs,
    parse_htb_classes,
    parse_u32_dst_filters,
    path_classes,
    tree_filters,
)
from distro_bench.net.topology import Star, StarSpec
from distro_bench.report.bottleneck_section import bottleneck_rows
from distro_bench.results.bottleneck import bottlenecks, link_loads, site_link_loads
from distro_bench.results.build import build_summary
from distro_bench.scenario.loading import load_scenario, scenario_from_dict
from distro_bench.scenario.model import site_layout
from tests.helpers import tiny_scenario_dict

REPO = Path(__file__).resolve().parents[3]
CAPS: dict = {"root": True, "kernel": "test", "iproute2": "iproute2-6.1.0", "nsenter": True, "netns": True,
              "netns_error": None, "iperf3": True, "ping": True, "ethtool": True, "delayline_detail": "importable",
              "docker": None}
LINE = Capabilities(qdiscs=("pfifo", "tbf", "htb"), delayline=True, **CAPS)  # this host: no netem
NETEM = Capabilities(qdiscs=("pfifo", "tbf", "htb", "netem"), delayline=True, **CAPS)


def labs(per_site: int = 2, **sites_overrides) -> dict:
    sites = {"uplinks": {"lab-a": {"up": "100Mbit", "down": "100Mbit", "delay": "1ms"},
                         "lab-b": {"up": "100Mbit", "down": "100Mbit"}},
             "delays": {"lab-a": {"lab-b": "40ms"}}, "rates": {"lab-a": {"lab-b": "50Mbit"}}}
    sites.update(sites_overrides)
    return tiny_scenario_dict(workers=[{"count": per_site, "link": "lan", "site": "lab-a"},
                                       {"count": per_site, "link": "lan", "site": "lab-b"}],
                              links={"lan": {"up": "1Gbit", "down": "1Gbit"}}, sites=sites)


def problems(doc: dict) -> str:
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(doc)
    return "\n".join(e.value.problems)


# ---- schema and validation --------------------------------------------------------------------------------

def test_layout_mirrors_the_wan_tables_and_keeps_rank_order():
    lay = site_layout(scenario_from_dict(labs()))
    assert lay is not None
    assert [(s.name, s.ranks, s.up_bps, s.delay_s) for s in lay.sites] == [
        ("lab-a", (0, 1), 100_000_000, pytest.approx(0.001)), ("lab-b", (2, 3), 100_000_000, 0.0)]
    back = lay.path("lab-b", "lab-a")
    assert back.delay_s == pytest.approx(0.040) and back.rate_bps == 50_000_000 and back.loss == 0.0


@pytest.mark.parametrize("doc, expected", [
    (labs(delays={"lab-a": {"lab-c": "5ms"}}), "sites.delays.lab-a.lab-c: unknown site 'lab-c'; known: lab-a, lab-b"),
    (labs(delays={"lab-a": {"lab-a": "5ms"}}), "sites.delays.lab-a.lab-a: a WAN path joins two sites"),
    (labs(loss={"lab-a": {"lab-b": "1%"}, "lab-b": {"lab-a": "2%"}}),
     "sites.loss: lab-a -> lab-b is 1% but lab-b -> lab-a is 2%; set sites.symmetric: false"),
    (labs(uplinks={"Lab A": {"up": "1Mbit"}}), "sites.uplinks: invalid site name 'Lab A'"),
    (labs(uplinks={}), "sites.uplinks: List should have at least 1 item"),
    (labs(uplinks={"lab-a": {"up": "fast"}}), "sites.uplinks.lab-a.up"),
])
def test_a_bad_sites_table_names_the_field_the_value_and_what_is_valid(doc, expected):
    assert expected in problems(doc) or expected.replace("List", "Dictionary") in problems(doc)


def test_workers_name_known_sites_and_all_or_none_of_them_do():
    doc = labs()
    doc["workers"][1]["site"] = "lab-z"
    assert "workers[1].site: unknown site 'lab-z'; known: lab-a, lab-b (sites.uplinks)" in problems(doc)
    doc = labs()
    del doc["workers"][1]["site"]
    assert "workers[1].site: missing; with sites: set, every worker group names its site" in problems(doc)
    doc = tiny_scenario_dict(workers=[{"count": 2, "site": "home"}])
    assert "workers[0].site: 'home' needs a sites: table (sites.uplinks.home:" in problems(doc)
    doc = labs()
    doc["workers"][0]["region"], doc["workers"][1]["region"] = "us-east", "eu-west"
    doc["regions"] = "preset:cloud-3"
    assert "sites: not with regions: in one scenario" in problems(doc)


def test_validate_describes_the_shipped_two_labs_and_json_carries_them():
    path = str(REPO / "scenarios" / "two-labs.yaml")
    r = CliRunner().invoke(app, ["validate", path])
    assert r.exit_code == 0, r.output
    assert "lab-a: 4 nodes (node0, node1, node2, node3) share 1Gbit up / 1Gbit down" in r.output
    assert "lab-a <-> lab-b: WAN 40ms, 1Gbit (RTT between the sites' bridges 80ms)" in r.output
    doc = json.loads(CliRunner().invoke(app, ["validate", path, "--json"]).stdout)
    assert [n["site"] for n in doc["nodes"]] == ["lab-a"] * 4 + ["lab-b"] * 4
    assert doc["sites"]["uplinks"][1] == {"site": "lab-b", "nodes": ["node4", "node5", "node6", "node7"],
                                          "up_bps": 10**9, "down_bps": 10**9, "delay_s": 0.0}
    assert {(p["from"], p["to"]): p["delay_s"] for p in doc["sites"]["paths"]} == {
        ("lab-a", "lab-b"): pytest.approx(0.04), ("lab-b", "lab-a"): pytest.approx(0.04)}


def test_validate_exits_2_on_a_bad_site(tmp_path):
    doc = labs()
    doc["workers"][0]["site"] = "lab-q"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    r = CliRunner().invoke(app, ["validate", str(path)])
    assert r.exit_code == 2 and "unknown site 'lab-q'" in r.output and "Traceback" not in r.output


def test_the_resolved_scenario_keeps_the_sites_and_loads_again():
    s = load_scenario(REPO / "scenarios" / "two-labs.yaml")
    again = scenario_from_dict(s.resolved_dict())
    assert site_layout(again) == site_layout(s)


# ---- the plan -------------------------------------------------------------------------------------------

def test_a_backend_that_builds_no_sites_refuses_them():
    s = scenario_from_dict(labs())
    with pytest.raises(CapabilityError, match="sites: node0, node1, node2, node3 name a site"):
        plan_links(s.nodes(), LINE)


def test_userspace_engine_puts_the_site_and_wan_delays_on_the_uplinks_delay_line():
    s = scenario_from_dict(labs())
    plan = plan_links(s.nodes(), LINE, sites=site_layout(s), seed=2)
    assert plan.engine == "userspace" and plan.delay_line_sites == {0, 1}
    a, b = plan.sites
    assert a.ranks == (0, 1) and b.ranks == (2, 3)
    assert a.up.tc.rate_bps == 100_000_000 and not a.up.tc.netem  # the rate by tc, the delay by the line
    assert a.up.delay_line is not None and a.up.delay_line.delay_s == pytest.approx(0.001)
    assert [(p.site, p.ranks, p.delay_s, p.rate_bps) for p in a.paths] == [("lab-b", (2, 3), pytest.approx(0.04),
                                                                           50_000_000)]
    assert a.up.delay_line.seed != b.up.delay_line.seed  # type: ignore[union-attr]
    assert not plan.delay_line_ranks  # the access links have no delay: no line of their own


def test_tc_engine_puts_them_in_netem_and_without_netem_says_the_way_out():
    s = scenario_from_dict(labs())
    plan = plan_links(s.nodes(), NETEM, engine="tc", sites=site_layout(s))
    assert plan.sites[0].up.tc.delay_s == pytest.approx(0.001) and plan.sites[0].up.delay_line is None
    with pytest.raises(CapabilityError) as e:
        plan_links(s.nodes(), LINE, engine="tc", sites=site_layout(s))
    assert "site lab-a's shared uplink" in str(e.value) and "--link-engine userspace" in str(e.value)


def emulation(doc: dict, caps: Capabilities = LINE, engine: str = "auto") -> tuple[Emulation, Star]:
    s = scenario_from_dict(doc)
    plan = plan_links(s.nodes(), caps, engine=engine, sites=site_layout(s))
    star = Star(StarSpec.for_plan("abc123", plan))
    return Emulation(plan, star.endpoints(), sites=star.site_endpoints()), star


def test_the_uplink_gets_a_class_per_destination_site_and_under_each_a_leaf_per_node():
    em, _ = emulation(labs())
    up = em.site_egress_tc(em.plan.sites[0], "up")
    assert [(c.classid, c.ceil_bps, c.path) for c in inner_classes(up)] == [("1:10", None, ""),
                                                                            ("1:11", 50_000_000, "lab-b")]
    leaves = path_classes(up)
    assert [(c.classid, c.parent, c.src, c.addrs) for c in leaves] == [
        ("1:f", "1:1", "", ()),  # what no filter matches: ARP, IPv6
        ("1:100", "1:10", "10.77.0.1", ()), ("1:101", "1:10", "10.77.0.2", ()),  # towards the core
        ("1:200", "1:11", "10.77.0.1", ("10.77.0.3", "10.77.0.4")),
        ("1:201", "1:11", "10.77.0.2", ("10.77.0.3", "10.77.0.4"))]
    assert all(c.netem is None for c in leaves) and not up.per_dest  # userspace: the delay line has the delays
    assert tree_filters(up) == [
        ("10.77.0.1", "10.77.0.3", "1:200", 1), ("10.77.0.1", "10.77.0.4", "1:200", 1),
        ("10.77.0.2", "10.77.0.3", "1:201", 1), ("10.77.0.2", "10.77.0.4", "1:201", 1),
        ("10.77.0.1", "", "1:100", 2), ("10.77.0.2", "", "1:101", 2)]
    cmds = [" ".join(c) for c in tc_commands("up", up)]
    assert cmds[0].endswith("htb default f")
    assert any("classid 1:1 htb rate 100000000bit ceil 100000000bit" in c for c in cmds)
    assert any("parent 1:1 classid 1:11 htb rate 33333333bit ceil 50000000bit" in c for c in cmds)
    assert any("parent 1:11 classid 1:200 htb rate 16666666bit ceil 50000000bit" in c for c in cmds)  # half of 1:11's
    assert any("prio 1 u32 match ip src 10.77.0.2/32 match ip dst 10.77.0.4/32 flowid 1:201" in c for c in cmds)
    assert any("prio 2 u32 match ip src 10.77.0.1/32 flowid 1:100" in c for c in cmds)
    assert not any("netem" in c for c in cmds)
    down = em.site_egress_tc(em.plan.sites[0], "down")  # the core's side: a class per node of the site
    assert [(c.classid, c.addrs) for c in path_classes(down)] == [("1:f", ()), ("1:100", ()), ("1:200", ("10.77.0.1",)),
                                                                  ("1:300", ("10.77.0.2",))]


def test_a_site_alone_still_gets_a_leaf_per_node_and_no_destination_classes():
    doc = labs()
    doc["workers"] = doc["workers"][:1]
    doc["sites"] = {"uplinks": {"lab-a": {"up": "100Mbit"}}}
    em, _ = emulation(doc)
    up = em.site_egress_tc(em.plan.sites[0], "up")
    assert [c.classid for c in path_classes(up)] == ["1:f", "1:100", "1:101"]
    assert [(s, d) for s, d, _, _ in tree_filters(up)] == [("10.77.0.1", ""), ("10.77.0.2", "")]


def test_with_tc_the_wan_delay_is_each_leaf_netem_and_two_equal_paths_stay_two_classes():
    doc = labs()
    doc["workers"].append({"count": 1, "link": "lan", "site": "lab-c"})
    doc["sites"]["uplinks"]["lab-c"] = {"up": "100Mbit", "down": "100Mbit"}
    doc["sites"]["delays"]["lab-a"]["lab-c"] = "40ms"
    doc["sites"]["rates"]["lab-a"]["lab-c"] = "50Mbit"
    em, _ = emulation(doc, NETEM, "tc")
    up = em.site_egress_tc(em.plan.sites[0], "up")
    assert [c.path for c in inner_classes(up)] == ["", "lab-b", "lab-c"]  # equal paths, two links: never merged
    leaves = {c.classid: c for c in path_classes(up)}
    assert leaves["1:f"].netem is not None and leaves["1:f"].netem.delay_s == pytest.approx(0.001)  # the uplink's
    assert leaves["1:101"].netem is not None and leaves["1:101"].netem.delay_s == pytest.approx(0.001)
    assert leaves["1:200"].netem is not None and leaves["1:200"].netem.delay_s == pytest.approx(0.041)
    assert leaves["1:301"].addrs == ("10.77.0.5",)
    assert any("parent 1:200 handle 200: netem" in " ".join(c) and "41000us" in " ".join(c)
               for c in tc_commands("up", up))


CLASSES = """class htb 1:101 parent 1:10 prio 0 rate 50Mbit ceil 100Mbit burst 62500b cburst 62500b
class htb 1:1 root rate 100Mbit ceil 100Mbit burst 62500b cburst 62500b
class htb 1:10 parent 1:1 rate 33333Kbit ceil 100Mbit burst 62500b cburst 62500b
class htb 1:11 parent 1:1 rate 33333Kbit ceil 50Mbit burst 62500b cburst 62500b
class htb 1:f parent 1:1 prio 0 rate 33333Kbit ceil 100Mbit burst 62500b cburst 62500b
class htb 1:100 parent 1:10 prio 0 rate 50Mbit ceil 100Mbit burst 62500b cburst 62500b
class htb 1:200 parent 1:11 prio 0 rate 25Mbit ceil 50Mbit burst 62500b cburst 62500b
class htb 1:201 parent 1:11 prio 0 rate 25Mbit ceil 50Mbit burst 62500b cburst 62500b
"""


def u32(flowid: str, *keys: tuple[int, int]) -> str:
    """One u32 filter as `tc -j filter show` prints it: each key a `match` member of its own (repeated)."""
    matches = ",".join(f'"match":{{"value":"a4d000{host:x}","mask":"ffffffff","offmask":"","off":{off}}}'
                       for off, host in keys)
    return f'{{"protocol":"ip","pref":1,"kind":"u32","options":{{"fh":"800::800","flowid":"{flowid}",{matches}}}}}'


FILTERS = "[" + ",".join([u32("1:200", (12, 1), (16, 3)), u32("1:200", (12, 1), (16, 4)),
                          u32("1:201", (12, 2), (16, 3)), u32("1:201", (12, 2), (16, 4)),
                          u32("1:100", (12, 1)), u32("1:101", (12, 2)),
                          '{"protocol":"ip","pref":1,"kind":"u32","options":{"fh":"800:","ht_divisor":1}}']) + "]"


def test_the_tree_read_back_is_checked_class_by_class_and_filter_by_filter():
    em, _ = emulation(labs())
    up = em.site_egress_tc(em.plan.sites[0], "up")
    classes = parse_htb_classes(CLASSES)
    filters = parse_u32_dst_filters(json.loads(FILTERS, object_pairs_hook=json_pairs))
    assert filters["10.77.0.2>10.77.0.4"] == "1:201" and filters["10.77.0.1>"] == "1:100"
    assert check_classes("up", up, classes, filters) == []
    wrong = parse_htb_classes(CLASSES.replace("ceil 50Mbit", "ceil 100Mbit", 1))
    assert check_classes("up", up, wrong, filters) == [
        "up: htb class 1:11 ceil is 100000000 bit/s, planned 50000000 bit/s"]
    swapped = {**filters, "10.77.0.1>10.77.0.3": "1:201"}
    assert check_classes("up", up, classes, swapped) == [
        "up: frames from 10.77.0.1 to 10.77.0.3 go to 1:201, planned 1:200"]
    assert "up: htb class 1:101 has parent 1:1, planned 1:10" in check_classes(
        "up", up, parse_htb_classes(CLASSES.replace("1:101 parent 1:10", "1:101 parent 1:1")), filters)
    qdiscs = [{"kind": "htb", "handle": "1:", "root": True, "options": {"default": "0xf"}}]
    assert check_qdiscs("up", up, qdiscs) == []


# ---- topology ------------------------------------------------------------------------------------------

def test_the_topology_puts_each_site_behind_its_own_bridge_and_uplink():
    _, star = emulation(labs())
    spec = star.spec
    assert spec.namespaces() == ["dbench-abc123-sw", "dbench-abc123-s0", "dbench-abc123-sl0", "dbench-abc123-s1",
                                 "dbench-abc123-sl1", *(f"dbench-abc123-n{i}" for i in range(4))]
    veths = {(v.name, v.ns, v.peer, v.peer_ns) for v in spec.veths()}
    assert ("up", "dbench-abc123-s0", "a", "dbench-abc123-sl0") in veths
    assert ("b", "dbench-abc123-sl0", "c0", "dbench-abc123-sw") in veths
    assert ("eth0", "dbench-abc123-n2", "p2", "dbench-abc123-s1") in veths
    configs = spec.iface_configs()
    assert [c.iface for c in configs["dbench-abc123-s0"]] == ["p0", "p1", "up", "br0"]
    assert [c.iface for c in configs["dbench-abc123-sw"]] == ["c0", "c1", "br0"]
    assert spec.bridge_namespaces() == ["dbench-abc123-sw", "dbench-abc123-s0", "dbench-abc123-s1"]
    # a site's delay line sees its nodes' frames whole: their offloads go off too
    assert ("dbench-abc123-n0", "eth0") in spec.offload_targets()
    e = star.endpoints()[3]
    assert (e.down_ns, e.down_iface, e.addr) == (NetnsRef.named("dbench-abc123-s1"), "p3", "10.77.0.4")
    site = star.site_endpoints()[0]
    assert site.egress("up") == (NetnsRef.named("dbench-abc123-s0"), "up")
    assert site.egress("down") == (NetnsRef.named("dbench-abc123-sw"), "c0")
    assert site.delay_line_ns == "dbench-abc123-sl0"


# ---- links -----------------------------------------------------------------------------------------------

def targets(em: Emulation) -> list[LinkTarget]:
    return [LinkTarget(name=p.name, ns=NetnsRef.named(f"n{p.rank}"), addr=em.endpoints[p.rank].addr or "",
                       up=p.up.spec, down=p.down.spec) for p in em.plan.nodes]


def test_links_expects_the_lower_rate_alone_an_even_share_together_and_the_wan_delay_across():
    em, _ = emulation(labs(per_site=4))
    ts = with_sites(targets(em), em.plan)
    t0 = ts[0]
    assert t0.site == "lab-a" and t0.rate_to_far_end("up") == 100_000_000  # the site's, below the access link's
    assert t0.site_delay_s == pytest.approx(0.002)  # lab-a's 1 ms each way
    assert t0.delay_to("10.77.0.5") == pytest.approx(0.041) and t0.delay_to("10.77.0.2") == 0.0
    assert ts[4].delay_to("10.77.0.1") == pytest.approx(0.041)  # lab-b's uplink 0 + WAN 40 + lab-a's downlink 1
    groups = site_groups(ts)
    assert list(groups) == ["lab-a", "lab-b"] and len(groups["lab-a"]) == 4
    assert site_share(groups["lab-a"], "up") == (1e8, 2.5e7)  # four behind 100 Mbit: 25 Mbit each


# ---- the bottleneck ----------------------------------------------------------------------------------------

def test_ring_edges_cross_each_lab_uplink_once_each_way():
    s = load_scenario(REPO / "scenarios" / "two-labs.yaml")
    loads = {x.link: (x.rate_bps, x.bytes, x.workers) for x in link_loads(s.nodes(), site_layout(s))}
    assert loads["site lab-a uplink (up)"] == (10**9, "tx", 1) and loads["site lab-b uplink (down)"] == (10**9, "rx", 1)
    assert loads["WAN lab-a -> lab-b"] == (10**9, "tx", 1) and loads["access node0 (up)"] == (10**9, "tx", 1)


def test_the_bound_is_the_link_with_the_longest_time_and_lands_in_the_summary():
    doc = labs(per_site=4, uplinks={"lab-a": {"up": "10Mbit", "down": "10Mbit"}, "lab-b": {"up": "10Mbit"}})
    doc["links"] = {"lan": {"up": "5Mbit", "down": "100Mbit"}}
    s = scenario_from_dict(doc)
    loads = site_link_loads(s)
    assert loads is not None
    figures = bottlenecks({"adamw": {"wire_tx_bytes_per_step": 1e6, "wire_rx_bytes_per_step": 1e6,
                                     "step_time_s_mean": 2.5},
                           "distro": {"payload_tx_bytes_per_step": 1e3, "payload_rx_bytes_per_step": 1e3}}, loads)
    assert figures is not None
    adamw = figures["optimizers"]["adamw"]
    assert adamw["link"] == "access node0 (up)" and adamw["seconds_per_step"] == pytest.approx(1.6)  # 8 Mbit at 5
    assert adamw["links"]["site lab-a uplink (up)"] == pytest.approx(0.8)
    assert figures["optimizers"]["distro"]["basis"] == "payload"
    assert adamw["tied"] == [f"access node{i} (up)" for i in range(1, 8)] and adamw["share_of_step"] == pytest.approx(0.64)
    rows = bottleneck_rows(figures)
    assert rows[0][:5] == ["adamw", "access node0 (up) (tied with 7 more)", "1.6 s", "64%", "site lab-a uplink (up)"]
    import pandas as pd

    summary = build_summary(pd.DataFrame(), [], schema_version=1, run={}, baseline="adamw", link_loads=loads)
    assert summary["bottlenecks"] == {"model": figures["model"], "optimizers": {}}
    assert "bottlenecks" not in build_summary(pd.DataFrame(), [], schema_version=1, run={}, baseline="adamw")


def test_measure_sites_judges_the_median_sum_and_each_median_share(monkeypatch):
    from distro_bench.net import linktest, tcpprobe

    em, _ = emulation(labs(per_site=4))
    ts = with_sites(targets(em), em.plan)
    got = {"n0": [26e6, 30e6, 20e6], "n1": [24e6] * 3, "n2": [23e6] * 3, "n3": [9e6] * 3, "n4": [25e6] * 3,
           "n5": [25e6] * 3, "n6": [25e6] * 3, "n7": [24e6] * 3}
    calls: dict[str, int] = {}

    def probe(client, *a, **k):
        name = client.path.rsplit("/", 1)[-1]
        calls[name] = calls.get(name, 0) + 1
        return got[name][(calls[name] - 1) % 3]

    monkeypatch.setattr(tcpprobe, "tcp_goodput", probe)
    checks = linktest.measure_sites(ts, NetnsRef.named("sw"), "10.77.0.254", seconds=1.0)
    rows = {(c.node, c.what): (c.configured, c.measured, c.status) for c in checks}
    assert rows[("site lab-a", "up goodput, 4 at once")] == (1e8, pytest.approx(82e6), "FAIL")  # 82% < 90%
    assert rows[("site lab-b", "up goodput, 4 at once")] == (1e8, pytest.approx(99e6), "PASS")
    assert rows[("node0", "up share of site lab-a")] == (2.5e7, 26e6, "PASS")  # the median of 26, 30, 20
    assert rows[("node3", "up share of site lab-a")][2] == "FAIL"  # 9 of an even 25 Mbit
    assert calls["n0"] == 2 * 3  # three rounds each way
    assert len(checks) == 2 * 2 * (1 + 4)  # two sites, both directions, the sum and four shares


def test_the_assured_rates_of_the_leaves_add_up_to_the_uplinks_at_most():
    # htb lets a class send at its own rate whatever its parent's ceil: leaves assured more than the link overrun it
    em, _ = emulation(labs(per_site=4))
    for direction in ("up", "down"):
        cmds = tc_commands("x", em.site_egress_tc(em.plan.sites[0], direction))
        leaves = {c.classid for c in path_classes(em.site_egress_tc(em.plan.sites[0], direction))}
        assured = sum(int(c[c.index("rate") + 1].removesuffix("bit")) for c in cmds
                      if c[1] == "class" and c[c.index("classid") + 1] in leaves)
        assert 0.99e8 <= assured <= 1e8, (direction, assured)
