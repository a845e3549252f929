"""Geo-distributed topologies, the pure parts: the regions schema and its errors, the matrix, the link plan's
per-destination delays, the delay line's per-destination queue, and the expected RTT of a pair."""

from __future__ import annotations

import dataclasses
import socket
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from distro_bench.cli.app import app
from distro_bench.errors import CapabilityError, ScenarioError
from distro_bench.net.delayline.schedule import Schedule, dest_key
from distro_bench.net.emulation import Emulation, Endpoints
from distro_bench.net.engines import plan_links
from distro_bench.net.host import Capabilities
from distro_bench.net.link import Direction, Impairment
from distro_bench.net.linktest import LinkTarget, pair_rtt, pair_tolerance
from distro_bench.net.ns import NetnsRef
from distro_bench.net.shaping import check_qdiscs, tc_commands
from distro_bench.net.tcclass import (
    UNSHAPED_BPS,
    check_classes,
    class_of,
    parse_htb_classes,
    parse_u32_dst_filters,
    path_classes,
)
from distro_bench.scenario.loading import load_scenario, scenario_from_dict
from distro_bench.scenario.model import region_matrix
from distro_bench.scenario.region_presets import REGION_PRESETS
from tests.helpers import tiny_scenario_dict

REPO = Path(__file__).resolve().parents[3]
LINE = Capabilities(root=True, kernel="test", iproute2="iproute2-6.1.0", nsenter=True, netns=True, netns_error=None,
                    qdiscs=("pfifo", "tbf", "htb"), iperf3=True, ping=True, ethtool=True,
                    delayline=True, delayline_detail="importable", docker=None)
NETEM_AND_LINE = dataclasses.replace(LINE, qdiscs=("pfifo", "tbf", "htb", "netem"))
NO_LINE = dataclasses.replace(LINE, delayline=False, delayline_detail="not importable")


def geo(regions, groups=(("us-east", 1), ("eu-west", 1), ("ap-southeast", 1)), **extra):
    workers = [{"count": n, "hardware": "host", "region": r, "link": "dc"} for r, n in groups]
    return scenario_from_dict(tiny_scenario_dict(workers=workers, links={"dc": {"up": "100Mbit", "delay": "1ms"}},
                                                 regions=regions, **extra))


def problems(regions, **kw) -> str:
    with pytest.raises(ScenarioError) as e:
        geo(regions, **kw)
    assert e.value.exit_code == 2
    return "; ".join(e.value.problems)


# ---- schema and matrix -----------------------------------------------------------------------------------

def test_preset_shorthand_resolves_symmetric_half_rtts():
    m = region_matrix(geo("preset:cloud-3"))
    # The cited table: 80.5, 216.7 and 238.6 ms RTT, stored as whole milliseconds one way.
    assert m.delay("us-east", "eu-west") == m.delay("eu-west", "us-east") == pytest.approx(0.040)
    assert m.delay("ap-southeast", "us-east") == pytest.approx(0.108)
    assert m.rtt("eu-west", "ap-southeast") == pytest.approx(0.238)
    assert m.delay("us-east", "us-east") == 0.0
    assert "acomputerscientistlearnsaws" in REGION_PRESETS["cloud-3"].source


def test_own_table_overrides_a_preset_and_can_be_asymmetric():
    m = region_matrix(geo({"preset": "cloud-3", "intra": "2ms", "symmetric": False,
                           "delays": {"us-east": {"eu-west": "30ms"}, "eu-west": {"us-east": "50ms"}}}))
    assert m.delay("us-east", "eu-west") == pytest.approx(0.030)
    assert m.delay("eu-west", "us-east") == pytest.approx(0.050)
    assert m.delay("us-east", "ap-southeast") == pytest.approx(0.108)  # still the preset's
    assert m.delay("eu-west", "eu-west") == pytest.approx(0.002)


def test_missing_pair_is_named_with_the_field_to_set():
    msg = problems({"delays": {"us-east": {"eu-west": "40ms"}}})
    assert "no delay for the pair ap-southeast -> eu-west" in msg and "regions.delays.ap-southeast.eu-west" in msg
    assert "no delay for the pair ap-southeast -> us-east" in msg
    assert "us-east -> eu-west" not in msg  # given, and symmetric fills the way back


def test_asymmetric_table_needs_both_directions():
    msg = problems({"symmetric": False, "delays": {"us-east": {"eu-west": "40ms"}}},
                   groups=(("us-east", 1), ("eu-west", 1)))
    assert "eu-west -> us-east" in msg and "each direction is needed" in msg


def test_negative_or_unitless_delay_names_the_pair():
    msg = problems({"delays": {"us-east": {"eu-west": "-40ms"}}}, groups=(("us-east", 1), ("eu-west", 1)))
    assert "regions.delays.us-east.eu-west" in msg and "-40ms" in msg
    msg = problems({"delays": {"us-east": {"eu-west": 40}}}, groups=(("us-east", 1), ("eu-west", 1)))
    assert "regions.delays.us-east.eu-west" in msg and "no unit" in msg


def test_conflicting_directions_under_symmetric():
    msg = problems({"delays": {"us-east": {"eu-west": "40ms"}, "eu-west": {"us-east": "45ms"}}},
                   groups=(("us-east", 1), ("eu-west", 1)))
    assert "eu-west -> us-east is 45ms but us-east -> eu-west is 40ms" in msg and "symmetric: false" in msg


def test_unknown_preset_region_without_table_and_group_without_region():
    assert "unknown preset 'cloud-9'; known: cloud-3, cloud-5" in problems("preset:cloud-9")
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(tiny_scenario_dict(workers=[{"count": 2, "region": "us-east"}]))
    assert "workers[0].region: 'us-east' needs a regions: table" in str(e.value)
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(tiny_scenario_dict(workers=[{"count": 1, "region": "us-east"}, {"count": 1}],
                                              regions="preset:cloud-3"))
    assert "workers[1].region: missing" in str(e.value)
    msg = problems("preset:cloud-3", groups=(("us-east", 1), ("mars", 1)))
    assert "mars -> us-east" in msg and "regions known to preset 'cloud-3'" in msg


def test_validate_exits_2_with_one_line_naming_the_pair(tmp_path):
    import yaml

    doc = tiny_scenario_dict(workers=[{"count": 1, "region": "a"}, {"count": 1, "region": "b"}],
                             regions={"delays": {"a": {"c": "5ms"}}})
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    r = CliRunner().invoke(app, ["validate", str(path)])
    assert r.exit_code == 2, r.output
    assert "no delay for the pair a -> b" in r.output and "Traceback" not in r.output


def test_resolved_scenario_expands_the_preset_and_loads_again():
    s = load_scenario(REPO / "scenarios" / "geo-3-regions.yaml")
    d = s.resolved_dict()["regions"]
    assert "preset" not in d and d["delays"]["ap-southeast"]["eu-west"] == "119ms"
    again = region_matrix(scenario_from_dict(s.resolved_dict())).one_way
    assert again == pytest.approx(region_matrix(s).one_way)


# ---- the plan ---------------------------------------------------------------------------------------------

def test_plan_puts_each_pair_delay_on_the_senders_uplink_by_rank():
    s = geo("preset:cloud-3", groups=(("us-east", 2), ("eu-west", 1)))
    plan = plan_links(s.nodes(), LINE, regions=region_matrix(s))
    assert plan.engine == "userspace"
    by_rank = {p.rank: p for p in plan.nodes}
    assert by_rank[0].pair_delays == ((2, pytest.approx(0.040)),)  # rank 1 is in the same region: intra 0
    assert by_rank[2].pair_delays == ((0, pytest.approx(0.040)), (1, pytest.approx(0.040)))
    assert all(p.needs_delay_line for p in plan.nodes)
    # The access link is unchanged: 1 ms each way, the rate on tbf.
    assert by_rank[0].up.delay_line.delay_s == pytest.approx(0.001) and by_rank[0].up.tc.rate_bps == 100_000_000


def test_auto_takes_the_delay_line_even_with_netem_and_tc_needs_netem():
    s = geo("preset:cloud-3")
    assert plan_links(s.nodes(), NETEM_AND_LINE, regions=region_matrix(s)).engine == "userspace"
    with pytest.raises(CapabilityError, match="delay from region us-east to the other regions needs the netem qdisc"):
        plan_links(s.nodes(), LINE, engine="tc", regions=region_matrix(s))
    with pytest.raises(CapabilityError, match="delay from region us-east"):
        plan_links(s.nodes(), NO_LINE, regions=region_matrix(s))
    # Without a delay line but with netem, auto takes tc's classes per destination.
    assert plan_links(s.nodes(), dataclasses.replace(NETEM_AND_LINE, delayline=False),
                      regions=region_matrix(s)).engine == "tc"
    # Without the matrix (a backend that ignores regions) there is nothing per destination.
    assert all(not p.pair_delays for p in plan_links(s.nodes(), LINE).nodes)


def test_emulation_keys_the_uplink_table_on_the_destinations_addresses():
    s = geo("preset:cloud-3")
    plan = plan_links(s.nodes(), LINE, regions=region_matrix(s))
    ns = NetnsRef.named("x")
    em = Emulation(plan, [Endpoints(rank=i, up_ns=ns, up_iface="eth0", down_ns=ns, down_iface=f"p{i}",
                                    delay_line_ns="l", addr=f"10.77.0.{i + 1}") for i in range(3)])
    imp = em.uplink_impairment(plan.nodes[1])  # eu-west
    assert imp.delay_s == pytest.approx(0.001)
    assert {to: d for to, d, *_ in imp.per_dest} == {"10.77.0.1": pytest.approx(0.040), "10.77.0.3": pytest.approx(0.119)}
    # It survives the JSON round trip the delay line's command line makes.
    assert Impairment(**__import__("json").loads(__import__("json").dumps(dataclasses.asdict(imp)))) == imp


# ---- the delay line's per-destination queue -----------------------------------------------------------------

def frame(dst: str, header: int = 10, ethertype: bytes = b"\x08\x00") -> bytes:
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20, 0, 0, 64, 6, 0, socket.inet_aton("10.77.0.9"),
                     socket.inet_aton(dst))
    return b"\0" * header + b"\xff" * 6 + b"\x02" * 6 + ethertype + ip


def test_dest_key_reads_the_ipv4_destination_behind_the_vnet_header():
    assert dest_key(frame("10.77.0.2"), 10) == socket.inet_aton("10.77.0.2")
    assert dest_key(frame("10.77.0.2", ethertype=b"\x08\x06"), 10) is None  # ARP
    assert dest_key(b"\0" * 20, 10) is None


def test_schedule_delays_by_destination_and_keeps_each_destinations_order():
    imp = Impairment(delay_s=0.001, per_dest=(("10.77.0.2", 0.100), ("10.77.0.3", 0.010)))
    s = Schedule(imp, header_len=10)
    far, near, arp = frame("10.77.0.2"), frame("10.77.0.3"), frame("10.77.0.2", ethertype=b"\x08\x06")
    assert s.admit(0.0, far) == pytest.approx(0.101)
    assert s.admit(0.001, near) == pytest.approx(0.012)  # not behind the far frame
    assert s.admit(0.002, arp) == pytest.approx(0.003)  # no IPv4 destination: the access delay only
    assert s.admit(0.003, frame("10.77.0.4")) == pytest.approx(0.004)  # same region (no entry)
    out = []
    while len(s):
        t = s.next_release()
        out.append(s.pop_due(t))
    assert [round(t, 6) for t, _ in out] == [0.003, 0.004, 0.012, 0.101]
    assert out[-1][1] == far and out[2][1] == near


def test_schedule_takes_a_new_table_at_run_time():
    s = Schedule(Impairment(per_dest=(("10.77.0.2", 0.05),)))
    assert s.admit(0.0, frame("10.77.0.2", header=0)) == pytest.approx(0.05)
    s.imp = Impairment(per_dest=(("10.77.0.2", 0.02),))
    assert s.admit(1.0, frame("10.77.0.2", header=0)) == pytest.approx(1.02)


# ---- expected RTT per pair ------------------------------------------------------------------------------------

def test_pair_rtt_adds_both_access_links_and_both_region_paths():
    ns = NetnsRef.named("x")
    a = LinkTarget("a", ns, "10.77.0.1", Direction(delay_s=0.001), Direction(delay_s=0.002),
                   pair_delay_s=(("10.77.0.2", 0.040),))
    b = LinkTarget("b", ns, "10.77.0.2", Direction(delay_s=0.003), Direction(delay_s=0.004),
                   pair_delay_s=(("10.77.0.1", 0.050),))
    assert pair_rtt(a, b) == pytest.approx(0.001 + 0.040 + 0.004 + 0.003 + 0.050 + 0.002)
    assert pair_tolerance(0.200) == pytest.approx(0.010)  # 5%
    assert pair_tolerance(0.004) == pytest.approx(0.001)  # the floor for (sub-)ms pairs


def test_a_change_of_the_uplink_at_run_time_keeps_the_region_delays():
    s = geo("preset:cloud-3")
    plan = plan_links(s.nodes(), LINE, regions=region_matrix(s))
    ns = NetnsRef.named("x")
    em = Emulation(plan, [Endpoints(rank=i, up_ns=ns, up_iface="eth0", down_ns=ns, down_iface=f"p{i}",
                                    delay_line_ns="l", addr=f"10.77.0.{i + 1}") for i in range(3)])

    class Line:  # what Emulation asks of a running DelayLine
        def __init__(self):
            self.given: dict = {}

        def set_impairments(self, **kw):
            self.given.update(kw)
            return {k: dataclasses.asdict(v) for k, v in kw.items()}

    em.delay_lines[0] = line = Line()
    em.down.add(0)  # in an outage: no tc to change here, only the delay line
    em.change(0, "up", Direction(rate_bps=100_000_000, delay_s=0.005))
    imp = line.given["a_to_b"]
    assert imp.delay_s == pytest.approx(0.005)
    assert {to: d for to, d, *_ in imp.per_dest} == {"10.77.0.2": pytest.approx(0.040), "10.77.0.3": pytest.approx(0.108)}


# ---- per-pair jitter and loss ----------------------------------------------------------------------------------

def test_per_pair_jitter_and_loss_follow_the_symmetric_rule_and_reach_the_plan():
    s = geo({"preset": "cloud-3", "jitter": {"us-east": {"eu-west": "2ms"}}, "loss": {"eu-west": {"us-east": "1%"}}},
            groups=(("us-east", 1), ("eu-west", 1)))
    m = region_matrix(s)
    assert region_matrix(scenario_from_dict(s.resolved_dict())).loss == pytest.approx(m.loss)  # kept in scenario.yaml
    assert m.path("us-east", "eu-west") == pytest.approx((0.040, 0.002, 0.01))
    assert m.path("eu-west", "us-east") == pytest.approx((0.040, 0.002, 0.01))
    plan = plan_links(s.nodes(), LINE, regions=m)
    assert plan.nodes[0].pair_paths == ((1, pytest.approx(0.040), pytest.approx(0.002), pytest.approx(0.01)),)


def test_per_pair_jitter_beyond_the_delay_or_without_a_delay_is_refused():
    msg = problems({"delays": {"us-east": {"eu-west": "5ms"}}, "jitter": {"us-east": {"eu-west": "6ms"}}},
                   groups=(("us-east", 1), ("eu-west", 1)))
    assert "regions.jitter.us-east.eu-west: 6ms exceeds the pair's delay 5ms" in msg
    msg = problems({"delays": {"us-east": {"eu-west": "5ms"}}, "loss": {"us-east": {"mars": "1%"}}},
                   groups=(("us-east", 1), ("eu-west", 1)))
    assert "regions.loss.us-east.mars: no delay is given for us-east -> mars" in msg
    msg = problems({"delays": {"us-east": {"eu-west": "5ms"}}, "loss": {"us-east": {"eu-west": "150%"}}},
                   groups=(("us-east", 1), ("eu-west", 1)))
    assert "regions.loss.us-east.eu-west" in msg


def test_schedule_draws_loss_and_jitter_only_for_the_destination_that_has_them():
    imp = Impairment(per_dest=(("10.77.0.2", 0.050, 0.010, 0.5), ("10.77.0.3", 0.020, 0.0, 0.0)), seed=7)
    s = Schedule(imp)
    lossy, clean = frame("10.77.0.2", header=0), frame("10.77.0.3", header=0)
    assert [s.admit(float(i), clean) for i in range(50)] == [pytest.approx(i + 0.020) for i in range(50)]
    assert s.dropped_loss == 0
    got = [s.admit(100.0 + i, lossy) for i in range(400)]
    kept = [r - (100.0 + i) for i, r in enumerate(got) if r is not None]
    assert 150 < len(kept) < 250 and s.dropped_loss == 400 - len(kept)  # half lost, drawn from the seed
    assert min(kept) >= 0.040 - 1e-9 and max(kept) <= 0.060 + 1e-9 and max(kept) - min(kept) > 0.015
    again = Schedule(imp)
    assert [again.admit(100.0 + i, lossy) for i in range(400)] == got  # reproducible


def test_validate_shows_each_pair_and_json_carries_the_matrix():
    import json

    r = CliRunner().invoke(app, ["validate", str(REPO / "scenarios" / "geo-3-regions.yaml")])
    assert r.exit_code == 0, r.output
    assert "eu-west <-> us-east: 40ms (RTT 80ms)" in r.output and "source: AWS inter-region" in r.output
    r = CliRunner().invoke(app, ["validate", str(REPO / "scenarios" / "geo-3-regions.yaml"), "--json"])
    doc = json.loads(r.stdout)
    assert [n["region"] for n in doc["nodes"]] == ["us-east", "eu-west", "ap-southeast"]
    pairs = {(p["from"], p["to"]): p["delay_s"] for p in doc["regions"]}
    assert len(pairs) == 6 and pairs[("ap-southeast", "us-east")] == pytest.approx(0.108)


def test_nodes_of_one_region_get_the_intra_region_delay():
    s = geo({"preset": "cloud-3", "intra": "2ms"}, groups=(("us-east", 2), ("eu-west", 1)))
    plan = plan_links(s.nodes(), LINE, regions=region_matrix(s))
    assert plan.nodes[0].pair_delays == ((1, pytest.approx(0.002)), (2, pytest.approx(0.040)))
    assert plan.nodes[2].pair_delays == ((0, pytest.approx(0.040)), (1, pytest.approx(0.040)))


def test_docker_backend_refuses_regions_rather_than_ignoring_them(monkeypatch):
    import os

    from distro_bench.backends.base import BackendOptions
    from distro_bench.backends.docker.backend import DockerBackend

    monkeypatch.setattr(os, "geteuid", lambda: 0)  # the root check comes first; this test is about regions
    with pytest.raises(CapabilityError, match="docker backend does not emulate delays between regions"):
        DockerBackend.preflight(geo("preset:cloud-3"), BackendOptions())


def test_a_multi_host_run_refuses_regions_unless_allowed_unemulated():
    from distro_bench.multihost.hostshaping import plan_host

    nodes = geo("preset:cloud-3").nodes()[:1]
    with pytest.raises(CapabilityError, match="multi-host run does not emulate the delays between regions"):
        plan_host(nodes, NETEM_AND_LINE, allow_unemulated=False, seed=0)
    assert plan_host(nodes, NETEM_AND_LINE, allow_unemulated=True, seed=0).nodes[0].pair_paths == ()


# ---- the tc engine: an htb class per destination path -----------------------------------------------------------

def tc_emulation(s, caps=NETEM_AND_LINE):
    plan = plan_links(s.nodes(), caps, engine="tc", regions=region_matrix(s))
    ns = NetnsRef.named("x")
    return plan, Emulation(plan, [Endpoints(rank=i, up_ns=ns, up_iface=f"n{i}", down_ns=ns, down_iface=f"p{i}",
                                            addr=f"10.77.0.{i + 1}") for i in range(len(plan.nodes))])


def test_tc_plan_has_no_delay_line_and_keeps_the_paths_by_rank():
    s = geo("preset:cloud-3", groups=(("us-east", 2), ("eu-west", 1)))
    plan, _ = tc_emulation(s)
    assert plan.engine == "tc" and not plan.delay_line_ranks and not plan.not_emulated
    by_rank = {p.rank: p for p in plan.nodes}
    assert by_rank[2].pair_delays == ((0, pytest.approx(0.040)), (1, pytest.approx(0.040)))
    # The access link's own netem stays in the uplink's plan; the paths are added with the addresses.
    assert by_rank[2].up.tc.delay_s == pytest.approx(0.001) and by_rank[2].up.tc.rate_bps == 100_000_000
    with pytest.raises(CapabilityError, match="needs the htb qdisc"):
        plan_links(s.nodes(), dataclasses.replace(NETEM_AND_LINE, qdiscs=("tbf", "netem")), engine="tc",
                   regions=region_matrix(s))


def test_tc_uplink_gets_one_class_per_distinct_path_and_a_filter_per_peer():
    s = geo("preset:cloud-3", groups=(("us-east", 2), ("eu-west", 1), ("ap-southeast", 2)))
    plan, em = tc_emulation(s)
    ireland = em.egress_tc(plan.nodes[2], "up")  # ranks 0, 1 us-east; 3, 4 ap-southeast
    assert em.egress_tc(plan.nodes[2], "down").per_dest == ()  # the downlink is the access link only
    leaves = path_classes(ireland)
    assert [c.classid for c in leaves] == ["1:10", "1:11", "1:12"]
    default, virginia, singapore = leaves
    # The default class: the access link's 1 ms (ARP, the switch, the far end, same-region peers).
    assert default.addrs == () and default.netem.delay_s == pytest.approx(0.001)
    assert virginia.addrs == ("10.77.0.1", "10.77.0.2") and virginia.netem.delay_s == pytest.approx(0.041)
    assert singapore.addrs == ("10.77.0.4", "10.77.0.5") and singapore.netem.delay_s == pytest.approx(0.120)
    assert class_of(ireland, "10.77.0.2") == virginia and class_of(ireland, "10.77.0.9") == default
    # A same-region peer has no filter: virginia's uplink sends rank 1 to the default class.
    virginia_up = em.egress_tc(plan.nodes[0], "up")
    assert class_of(virginia_up, "10.77.0.2").classid == "1:10"
    assert {c.classid: c.addrs for c in path_classes(virginia_up)[1:]} == {
        "1:11": ("10.77.0.3",), "1:12": ("10.77.0.4", "10.77.0.5")}

    cmds = tc_commands("n2", ireland)
    assert cmds[0] == ["tc", "qdisc", "replace", "dev", "n2", "root", "handle", "1:", "htb", "default", "10"]
    assert cmds[1][:13] == ["tc", "class", "replace", "dev", "n2", "parent", "1:", "classid", "1:1", "htb",
                            "rate", "100000000bit", "ceil"]
    netems = {c[6]: c for c in cmds if "netem" in c}
    assert set(netems) == {"1:10", "1:11", "1:12"}
    assert netems["1:12"][netems["1:12"].index("delay") + 1] == "120000us"
    filters = [(c[c.index("dst") + 1], c[-1]) for c in cmds if c[1] == "filter"]
    assert filters == [("10.77.0.1/32", "1:11"), ("10.77.0.2/32", "1:11"), ("10.77.0.4/32", "1:12"),
                       ("10.77.0.5/32", "1:12")]


def test_a_class_combines_the_access_links_impairment_with_its_path():
    d = Direction(rate_bps=None, delay_s=0.002, jitter_s=0.003, loss=0.1,
                  per_dest=(("10.0.0.2", 0.050, 0.004, 0.5), ("10.0.0.3", 0.0, 0.0, 0.0)))
    default, far = path_classes(d)
    assert far.addrs == ("10.0.0.2",) and class_of(d, "10.0.0.3") == default  # a path of nothing: no class
    assert far.netem.delay_s == pytest.approx(0.052)
    assert far.netem.jitter_s == pytest.approx(0.005)  # sqrt(3² + 4²): the same spread as two draws
    assert far.netem.loss == pytest.approx(1 - 0.9 * 0.5)
    cmds = tc_commands("n0", d)
    assert cmds[1][cmds[1].index("rate") + 1] == f"{UNSHAPED_BPS}bit"  # htb needs a rate; none here
    # No impairment on the access link: the default class has no netem child.
    plain = Direction(rate_bps=10**8, per_dest=(("10.0.0.2", 0.05, 0.0, 0.0),))
    assert path_classes(plain)[0].netem is None
    assert [c[6] for c in tc_commands("n0", plain) if "netem" in c] == ["1:11"]


# What this host's tc (iproute2 6.1) printed for the tree of test_..._read_back (netem missing here, so added).
CLASSES_TEXT = """class htb 1:11 parent 1:1 leaf 11: prio 0 rate 33333Kbit ceil 100Mbit burst 62499b cburst 62500b
class htb 1:1 root rate 100Mbit ceil 100Mbit burst 62500b cburst 62500b
class htb 1:10 parent 1:1 leaf 10: prio 0 rate 33333Kbit ceil 100Mbit burst 62499b cburst 62500b
class htb 1:12 parent 1:1 leaf 12: prio 0 rate 33333Kbit ceil 100Mbit burst 62499b cburst 62500b
"""


def u32(value: str, flowid: str) -> dict:
    return {"parent": "1:", "protocol": "ip", "pref": 1, "kind": "u32", "chain": 0,
            "options": {"fh": "800::800", "flowid": flowid, "match": {"value": value, "mask": "ffffffff", "off": 16}}}


FILTERS = [{"parent": "1:", "protocol": "ip", "pref": 1, "kind": "u32", "chain": 0},
           u32("a4d0001", "1:11"), u32("a4d0004", "1:11"), u32("a4d0003", "1:12")]


def netem_q(parent: str, delay: float, jitter: float = 0.0, loss: float = 0.0) -> dict:
    opts: dict = {"limit": 1000, "delay": {"delay": delay, "jitter": jitter}}
    if loss:
        opts["loss-random"] = {"loss": loss}
    return {"kind": "netem", "handle": parent.split(":")[1] + ":", "parent": parent, "options": opts}


def test_tree_read_back_is_checked_class_filter_and_netem_each():
    d = Direction(rate_bps=100_000_000, delay_s=0.001, per_dest=(
        ("10.77.0.1", 0.040, 0, 0), ("10.77.0.3", 0.119, 0.002, 0.01), ("10.77.0.4", 0.040, 0, 0)))
    classes, filters = parse_htb_classes(CLASSES_TEXT), parse_u32_dst_filters(FILTERS)
    assert classes["1:1"] == {"parent": "root", "leaf": None, "rate": 100_000_000, "ceil": 100_000_000}
    assert classes["1:12"]["leaf"] == "12:" and classes["1:12"]["rate"] == 33_333_000
    assert filters == {"10.77.0.1": "1:11", "10.77.0.4": "1:11", "10.77.0.3": "1:12"}
    assert check_classes("n0", d, classes, filters) == []
    qdiscs = [{"kind": "htb", "handle": "1:", "root": True, "options": {"r2q": 10, "default": "0x10"}},
              netem_q("1:10", 0.001), netem_q("1:11", 0.041), netem_q("1:12", 0.120, 0.002, 0.01)]
    assert check_qdiscs("n0", d, qdiscs) == []

    # Each kind of difference is named.
    swapped = {**filters, "10.77.0.3": "1:11"}
    assert check_classes("n0", d, classes, swapped) == [
        "n0: frames to 10.77.0.3 go to 1:11, planned 1:12"]
    assert "frames to 10.77.0.4 go to the default class" in "; ".join(
        check_classes("n0", d, classes, {k: v for k, v in filters.items() if k != "10.77.0.4"}))
    assert "n0: unplanned filter: 10.77.0.9 -> 1:12" in check_classes("n0", d, classes, {**filters, "10.77.0.9": "1:12"})
    slow = parse_htb_classes(CLASSES_TEXT.replace("class htb 1:1 root rate 100Mbit", "class htb 1:1 root rate 10Mbit"))
    assert check_classes("n0", d, slow, filters) == ["n0: htb class 1:1 rate is 10000000 bit/s, planned 100000000 bit/s"]
    assert "n0: htb class 1:12 missing" in check_classes("n0", d, {k: v for k, v in classes.items() if k != "1:12"},
                                                     filters)
    far_wrong = [*qdiscs[:3], netem_q("1:12", 0.06, 0.002, 0.01)]
    assert check_qdiscs("n0", d, far_wrong) == ["n0: 1:12 netem delay is 0.06s, planned 0.12s"]
    assert "expected netem under 1:11, found none" in "; ".join(check_qdiscs("n0", d, [qdiscs[0], qdiscs[1]]))
    assert "expected htb 1: at the root" in check_qdiscs("n0", d, [{"kind": "tbf", "root": True}])[0]


def test_a_change_of_a_tc_uplink_rebuilds_its_tree_with_the_region_paths(monkeypatch):
    s = geo("preset:cloud-3")
    _plan, em = tc_emulation(s)
    calls = []
    monkeypatch.setattr("distro_bench.net.emulation.change_plan",
                        lambda ns, iface, old, new: calls.append((iface, old, new)) or {"qdiscs": []})
    em.change(1, "up", Direction(rate_bps=50_000_000, delay_s=0.005))
    iface, old, new = calls[0]
    assert iface == "n1" and old.per_dest and new.rate_bps == 50_000_000 and new.delay_s == pytest.approx(0.005)
    assert {c.classid: c.addrs for c in path_classes(new)[1:]} == {"1:11": ("10.77.0.1",), "1:12": ("10.77.0.3",)}
    assert path_classes(new)[1].netem.delay_s == pytest.approx(0.045)
