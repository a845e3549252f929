"""Sites on real namespaces (issue 37, shared bottlenecks): two sites of two nodes, each site behind one shaped uplink
(harness/distro_bench/net/topology.py, emulation.py). Traffic between two nodes of a site stays on its bridge; nodes
of a site sending at once share its uplink (each about half, a median of repeated samples); frames to the other
site are classified into its htb class; a WAN delay crosses the uplink's delay line; nothing is left behind.

The topology is built here as the netns backend builds it (plan_links with the site layout, StarSpec.for_plan,
Star.endpoints / site_endpoints, Emulation with the sites), so these tests hold for it whatever backend wires it."""

from __future__ import annotations

import statistics
import subprocess
from contextlib import contextmanager

import pytest

from distro_bench.net import linktest, naming, tcpprobe
from distro_bench.net.emulation import Emulation
from distro_bench.net.engines import plan_links
from distro_bench.net.ns import NetnsRef, iproute, run_in
from distro_bench.net.topology import Star, StarSpec
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.scenario.model import site_layout
from tests.helpers import namespaces_of, netns_host, own_run_ids, tiny_scenario_dict

pytestmark = pytest.mark.root
UPLINK_BPS = 40_000_000


@pytest.fixture
def run_ids(monkeypatch):
    caps = netns_host()  # skips where namespaces cannot be made, saying why
    if not caps.has_qdisc("htb"):
        pytest.skip(f"a site's classes per destination need htb; this kernel has {', '.join(caps.qdiscs)}")
    yield from own_run_ids(monkeypatch, "st")


def two_sites(**sites):
    spec = {"uplinks": {"lab-a": {"up": "40Mbit", "down": "40Mbit"}, "lab-b": {"up": "40Mbit", "down": "40Mbit"}}}
    spec.update(sites)
    return scenario_from_dict(tiny_scenario_dict(
        workers=[{"count": 2, "hardware": "host", "site": "lab-a"}, {"count": 2, "hardware": "host", "site": "lab-b"}],
        sites=spec))


@contextmanager
def lab(s, caps, tmp_path):
    """The scenario's nodes and sites up, emulated and read back; everything removed after, whatever happened."""
    plan = plan_links(s.nodes(), caps, sites=site_layout(s))
    star = Star(StarSpec.for_plan(naming.new_run_id(), plan))
    em = None
    try:
        star.up()
        em = Emulation(plan, star.endpoints(), log_dir=tmp_path, sites=star.site_endpoints())
        em.apply()
        assert star.check_reachable() == []
        yield star, em
    finally:
        problems = (em.stop() if em is not None else []) + star.down()
    assert not problems, problems


def tx_bytes(ns: str, iface: str) -> int:
    with iproute(NetnsRef.named(ns)) as ipr:
        link = ipr.get_links(ifname=iface)[0]
        return int(link.get_attr("IFLA_STATS64")["tx_bytes"])


def class_packets(ns: str, iface: str) -> dict[str, int]:
    """`tc -s class show`: packets sent per htb class."""
    out, current = {}, None
    for line in run_in(NetnsRef.named(ns), ["tc", "-s", "class", "show", "dev", iface]).stdout.splitlines():
        words = line.split()
        if words[:2] == ["class", "htb"]:
            current = words[2]
        elif words[:1] == ["Sent"] and current:
            out[current] = int(words[words.index("pkt") - 1])
    return out


def nothing_left(token: str) -> None:
    assert not namespaces_of(token), "namespaces left behind"
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    assert token not in links, "an interface of the run is left in the root namespace"


def test_traffic_within_a_site_stays_on_its_bridge_and_to_the_other_site_takes_its_class(tmp_path, run_ids):
    caps = netns_host()
    with lab(two_sites(), caps, tmp_path) as (star, em):
        assert em.verify() == []  # tbf on the core side, htb classes per destination site on the site side
        a0, a1, b0 = star.spec.nodes[0], star.spec.nodes[1], star.spec.nodes[2]
        site_a = star.spec.sites[0]

        # Intra-site: 2 s of a0 -> a1 at full speed: the bytes arrive, and the site's uplink carries next to none.
        before = tx_bytes(site_a.ns, "up")
        local = tcpprobe.tcp_goodput(NetnsRef.named(a0.ns), NetnsRef.named(a1.ns), a1.addr, seconds=2.0,
                                     reverse=False, omit_s=0.5)
        crossed = tx_bytes(site_a.ns, "up") - before
        assert local is not None and local > 1.5 * UPLINK_BPS, local  # the uplink's rate does not bind it
        assert crossed < 50_000, f"{crossed} bytes crossed lab-a's uplink for traffic within lab-a"

        # Across sites: frames to b0 take lab-a's class for lab-b (1:11), not the default class.
        classes_before = class_packets(site_a.ns, "up")
        assert tcpprobe.tcp_goodput(NetnsRef.named(a0.ns), NetnsRef.named(b0.ns), b0.addr, seconds=1.0,
                                    reverse=False, omit_s=0.3)
        classes_after = class_packets(site_a.ns, "up")
        assert classes_after["1:11"] - classes_before.get("1:11", 0) > 100, classes_after
    nothing_left(run_ids)


@pytest.mark.slow
def test_two_nodes_of_a_site_sending_at_once_get_about_half_of_its_uplink_each(tmp_path, run_ids):
    caps = netns_host()
    with lab(two_sites(), caps, tmp_path) as (star, em):
        far = star.switch_ref, star.spec.switch_addr
        # Each of lab-a's nodes alone gets the uplink; both at once, about half each (medians of 3 rounds).
        targets = linktest.with_sites([
            linktest.LinkTarget(name=f"node{n.index}", ns=NetnsRef.named(n.ns), addr=n.addr,
                                up=p.up.spec, down=p.down.spec) for n, p in zip(star.spec.nodes, em.plan.nodes)],
            em.plan)
        alone = [tcpprobe.tcp_goodput(targets[0].ns, *far, seconds=2.0, reverse=False, omit_s=0.5) for _ in range(3)]
        checks = linktest.measure_sites(targets[:2], *far, seconds=2.0, omit_s=0.5, rounds=3)
    nothing_left(run_ids)
    assert None not in alone and 0.85 * UPLINK_BPS <= statistics.median(alone) <= 1.02 * UPLINK_BPS, alone
    shares = {c.node: c.measured for c in checks if c.what == "up share of site lab-a"}  # medians of 3 rounds
    assert set(shares) == {"node0", "node1"} and None not in shares.values(), checks
    for name, m in shares.items():
        assert 0.38 * UPLINK_BPS <= m <= 0.52 * UPLINK_BPS, (name, checks)  # about half each (TCP: 47.8% at most)
    total = next(c for c in checks if c.node == "site lab-a" and c.what.startswith("up goodput"))
    assert total.status == "PASS", total  # their sum: the uplink's rate


@pytest.mark.slow
def test_a_wan_delay_crosses_the_uplinks_delay_line_to_the_other_site_only(tmp_path, run_ids):
    caps = netns_host()
    if not caps.delayline:
        pytest.skip(f"the WAN delay needs the userspace delay line here: {caps.delayline_detail}")
    s = two_sites(delays={"lab-a": {"lab-b": "20ms"}})
    with lab(s, caps, tmp_path) as (star, em):
        assert em.plan.engine in ("userspace", "tc") and em.verify() == []
        a0, a1, b0 = (NetnsRef.named(n.ns) for n in star.spec.nodes[:3])
        across = tcpprobe.rtt(a0, b0, star.spec.nodes[2].addr, count=10, interval_s=0.05).median_s
        within = tcpprobe.rtt(a0, a1, star.spec.nodes[1].addr, count=10, interval_s=0.05).median_s
        described = em.describe_sites()
    nothing_left(run_ids)
    assert across is not None and abs(across - 0.040) <= linktest.pair_tolerance(0.040), across
    assert within is not None and within < 0.005, within  # never through the uplink, nor its delay
    if em.plan.engine == "userspace":
        assert described[0]["delay_line"]["up"]["per_dest"][0][1] == pytest.approx(0.020)
