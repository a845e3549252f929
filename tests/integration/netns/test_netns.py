"""The netns backend on real namespaces (root). After every test, passed or failed, nothing of ours may
remain: no namespace, no veth or bridge in the root namespace, no qdisc or iptables rule there, no
child process."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from distro_bench.backends.base import BackendOptions
from distro_bench.errors import CapabilityError
from distro_bench.net import naming
from distro_bench.net.cleanup import list_namespaces
from distro_bench.net.ns import NetnsRef
from distro_bench.net.shaping import QdiscPlan, ShapingError, apply_plan, read_qdiscs
from distro_bench.net.topology import Star, StarSpec
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import icmp_ping, missing_tools, namespaces_of, netns_host, tiny_scenario_dict

pytestmark = pytest.mark.root


def _caps():
    return netns_host()


OUR_ROOT_LINK = re.compile(r"^(p\d+|br0|a|b|t0|t1)$|dbench")


def _root_state() -> dict:
    links = {x["ifname"] for x in json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True,
                                                            text=True).stdout or "[]")}
    qdiscs = {(q.get("dev"), q.get("kind")) for q in json.loads(subprocess.run(
        ["tc", "-j", "qdisc", "show"], capture_output=True, text=True).stdout or "[]")}
    # No iptables on a bare machine: then no rule of ours can be there either.
    rules = "" if missing_tools("iptables-save") else subprocess.run(["iptables-save"], capture_output=True,
                                                                     text=True).stdout
    return {"links": links, "qdiscs": qdiscs,
            "rules": {r for r in rules.splitlines() if "10.77." in r or "dbench" in r}}


def _live_children() -> list[str]:
    me, out = os.getpid(), []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            out.append(f"{d.name} {stat.split('(')[1].split(')')[0]}")
    return out


@pytest.fixture(autouse=True)
def nothing_left(monkeypatch):
    """Every run id in this test starts with a token of its own; afterwards none of its namespaces,
    and nothing of ours in the root namespace, may remain."""
    _caps()
    token = "t" + secrets.token_hex(3)
    counter = iter(range(10**6))
    monkeypatch.setattr(naming, "new_run_id", lambda: f"{token}{next(counter)}")
    before = _root_state()
    # Children that predate this test (multiprocessing's resource tracker from an earlier test) are not its.
    children_before = set(_live_children())
    yield token
    deadline = time.monotonic() + 5
    while True:  # namespace teardown is asynchronous in the kernel; give it a moment
        left = namespaces_of(token)
        after = _root_state()
        new_links = {x for x in after["links"] - before["links"] if OUR_ROOT_LINK.search(x)}
        # Other tools (the Docker backend) shape their own host-side veths concurrently: judge only
        # interfaces that could be ours or that the host had before (lo, eth0, ...).
        watched = {x for x in after["links"] if OUR_ROOT_LINK.search(x)} | {
            x for x in before["links"] if not x.startswith("veth")}
        new_qdiscs = {q for q in after["qdiscs"] - before["qdiscs"]
                      if q[1] in ("tbf", "netem", "htb") and q[0] in watched}
        new_rules = after["rules"] - before["rules"]
        children = sorted(set(_live_children()) - children_before)
        if not (left or new_links or new_qdiscs or new_rules or children) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for n in left:  # clean up for the next test, then fail this one
        subprocess.run(["ip", "netns", "del", n], capture_output=True)
    assert not left, f"namespaces left behind: {left}"
    assert not new_links, f"links left in the root namespace: {new_links}"
    assert not new_qdiscs, f"qdiscs left in the root namespace: {new_qdiscs}"
    assert not new_rules, f"iptables rules left: {new_rules}"
    assert not children, f"child processes left running: {children}"


def _scenario(link: dict | None = None, **kw):
    d = tiny_scenario_dict(**kw)
    if link is not None:
        d["links"] = {"l": link}
        d["workers"] = [{"count": d["workers"][0]["count"], "hardware": "host", "link": "l"}]
    return scenario_from_dict(d)


# ---- topology and shaping --------------------------------------------------------------------

def test_star_comes_up_bridges_traffic_and_goes_away(nothing_left):
    spec = StarSpec.build(naming.new_run_id(), 3)
    star = Star(spec)
    try:
        star.up()
        assert set(spec.namespaces()) <= set(list_namespaces())
        # Bridged traffic flows, also where dockerd has set the root FORWARD policy to DROP.
        assert star.check_reachable() == []
        # ICMP too (sent from Python: a bare machine has no ping), not only the harness's own TCP probe.
        assert icmp_ping(spec.nodes[0].ns, spec.nodes[2].addr, 1, 0.2) != [None]
    finally:
        assert star.down() == []
    assert not namespaces_of(spec.run_id)


def test_two_stars_coexist(nothing_left):
    a, b = Star(StarSpec.build(naming.new_run_id(), 2)), Star(StarSpec.build(naming.new_run_id(), 2))
    try:
        a.up()
        b.up()  # same interface names and addresses, separate namespaces
        assert a.check_reachable() == [] and b.check_reachable() == []
    finally:
        a.down()
        b.down()


def test_shaping_is_applied_and_read_back(nothing_left):
    star = Star(StarSpec.build(naming.new_run_id(), 1))
    try:
        star.up()
        applied = apply_plan(star.node_ref(0), "eth0", QdiscPlan(rate_bps=20_000_000))
        assert applied["qdiscs"][0]["kind"] == "tbf"
        assert applied["qdiscs"][0]["options"]["rate"] * 8 == 20_000_000
        # Re-applying a different plan replaces the tree rather than stacking on it.
        apply_plan(star.node_ref(0), "eth0", QdiscPlan(rate_bps=5_000_000))
        kinds = [q["kind"] for q in read_qdiscs(star.node_ref(0), "eth0")]
        assert kinds == ["tbf"]
    finally:
        star.down()


def test_missing_netem_is_caught_by_read_back(nothing_left):
    caps = _caps()
    if caps.netem:
        pytest.skip("this kernel has netem; the failure path cannot be provoked")
    star = Star(StarSpec.build(naming.new_run_id(), 1))
    try:
        star.up()
        with pytest.raises(ShapingError) as e:
            apply_plan(star.node_ref(0), "eth0", QdiscPlan(rate_bps=10_000_000, delay_s=0.01))
        assert "netem" in str(e.value)
    finally:
        star.down()


# ---- the backend -----------------------------------------------------------------------------

def test_backend_describes_what_it_applied_and_tears_down(tmp_path, nothing_left):
    from distro_bench.backends.netns import NetnsBackend

    s = _scenario({"up": "10Mbit", "down": "30Mbit"})
    with NetnsBackend(s, tmp_path) as backend:
        net = backend.describe()
        assert backend.master_addr() == "10.77.0.1"
        env = backend.worker_env(0)
        assert env["GLOO_SOCKET_IFNAME"] == "eth0" and env["DISTRO_BENCH_WIRE_IFACE"] == "eth0"
        node = net["nodes"][1]
        assert node["namespace"] == f"dbench-{backend.run_id}-n1"
        assert node["applied"]["up"]["qdiscs"][0]["options"]["rate"] * 8 == 10_000_000
        assert node["applied"]["down"]["iface"] == "p1"
        assert node["applied"]["down"]["qdiscs"][0]["options"]["rate"] * 8 == 30_000_000
        assert net["not_emulated"] == []
        # A worker sees only its own namespace and cannot change the shaping.
        argv = backend.worker_argv(0, ["tc", "qdisc", "del", "dev", "eth0", "root"])
        assert subprocess.run(argv, capture_output=True).returncode != 0
        assert read_qdiscs(NetnsRef.named(node["namespace"].replace("-n1", "-n0")), "eth0")[0]["kind"] == "tbf"


def test_partial_setup_and_ctrl_c_leave_nothing(tmp_path, monkeypatch, nothing_left):
    from distro_bench.backends.netns import NetnsBackend
    from distro_bench.net.emulation import Emulation

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(Emulation, "apply", interrupted)
    with pytest.raises(KeyboardInterrupt):
        with NetnsBackend(_scenario({"up": "10Mbit", "down": "10Mbit"}), tmp_path):
            pass  # never reached


def test_tc_engine_without_netem_stops_before_the_run_folder(tmp_path, nothing_left):
    from distro_bench.run.runner import RunOptions, run_scenario

    if _caps().netem:
        pytest.skip("this kernel has netem")
    s = _scenario({"up": "10Mbit", "down": "10Mbit", "delay": "5ms"})
    with pytest.raises(CapabilityError) as e:
        run_scenario(s, RunOptions(backend="netns", out=tmp_path, write_report=False, link_engine="tc"))
    assert "link 'l'" in str(e.value) and "--allow-unemulated" in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_allow_unemulated_records_what_was_not(tmp_path, nothing_left):
    from distro_bench.backends.netns import NetnsBackend

    if _caps().netem:
        pytest.skip("this kernel has netem")
    s = _scenario({"up": "10Mbit", "down": "10Mbit", "delay": "5ms", "loss": "1%"})
    with NetnsBackend(s, tmp_path, BackendOptions(link_engine="tc", allow_unemulated=True)) as backend:
        net = backend.describe()
    assert len(net["not_emulated"]) == 4
    assert "delay 5ms" in net["not_emulated"][0] and "loss 1%" in net["not_emulated"][0]
    assert net["nodes"][0]["applied"]["up"]["plan"]["rate_bps"] == 10_000_000


def test_cli_doctor_and_bad_links_input(cli, write_scenario, nothing_left):
    r = cli("doctor")
    assert r.exit_code == 0, r.output
    assert "netem" in r.output and "tbf" in r.output
    path = write_scenario(tiny_scenario_dict())
    r = cli("links", path, "--tolerance", "1.2,0.9")
    assert r.exit_code == 2 and "--tolerance" in r.output


@pytest.mark.slow
def test_cli_links_measures_two_rates(cli, write_scenario, nothing_left):
    d = tiny_scenario_dict(links={"a": {"up": "4Mbit", "down": "12Mbit"}, "b": {"up": "20Mbit", "down": "8Mbit"}},
                           workers=[{"count": 1, "hardware": "host", "link": "a"},
                                    {"count": 1, "hardware": "host", "link": "b"}])
    r = cli("links", write_scenario(d), "--seconds", "4")
    assert r.exit_code == 0, r.output
    assert r.output.count("PASS") >= 4 and "all 4 checks passed" in r.output


# ---- training over shaped links ------------------------------------------------------------------

def _train(tmp_path: Path, link: dict, *, model: dict | None = None, steps: int = 6):
    from distro_bench.run.runner import RunOptions, run_scenario

    kw = {"train": {"steps": steps, "eval_every": steps, "seed": 0}}
    if model:
        kw["model"] = model
    s = _scenario(link, **kw)
    out = tmp_path / link["up"]
    return run_scenario(s, RunOptions(backend="netns", out=out, write_report=False))


def test_wire_bytes_are_counted_and_close_to_the_ring_volume(tmp_path, nothing_left):
    result = _train(tmp_path, {"up": "50Mbit", "down": "50Mbit"})
    assert result.state == "complete"
    s = result.summary["optimizers"]["adamw"]
    n = result.summary["run"]["world_size"]
    payload_tx = s["payload_tx_bytes_per_step"]
    # A ring all-reduce of B bytes sends 2(N-1)/N * B per worker (B for two workers): wire bytes are
    # that plus TCP/IP overhead, which must stay under 15%.
    ring_tx = payload_tx * 2 * (n - 1) / n
    assert s["wire_tx_bytes_per_step"] is not None and s["wire_rx_bytes_per_step"] is not None
    assert ring_tx <= s["wire_tx_bytes_per_step"] <= 1.15 * ring_tx
    assert ring_tx <= s["wire_rx_bytes_per_step"] <= 1.15 * ring_tx
    # issue 37: wire over payload (the ring's 2(N-1)/N and the framing) and the encoding's floor (dense: itself)
    framing = (s["wire_tx_bytes_per_step"] + s["wire_rx_bytes_per_step"]) / (payload_tx + s["payload_rx_bytes_per_step"])
    assert s["framing_ratio"] == pytest.approx(framing) and s["floor_ratio"] == pytest.approx(1.0)
    env = json.loads((result.run_dir / "environment.json").read_text())
    assert env["network"]["backend"] == "netns" and len(env["network"]["nodes"]) == n


@pytest.mark.slow
def test_adamw_step_time_grows_as_the_link_slows(tmp_path, nothing_left):
    # ~27k parameters (107 KB of fp32 gradients): 0.4 s per step at 2 Mbit, 0.04 s at 20 Mbit.
    model = {"preset": None, "dim": 32, "n_layers": 1, "n_heads": 2, "ffn_dim": 64}
    fast = _train(tmp_path, {"up": "20Mbit", "down": "20Mbit"}, model=model)
    slow = _train(tmp_path, {"up": "2Mbit", "down": "2Mbit"}, model=model)
    t_fast = fast.summary["optimizers"]["adamw"]["step_time_s_mean"]
    t_slow = slow.summary["optimizers"]["adamw"]["step_time_s_mean"]
    # 10x less bandwidth; comm dominates at 2 Mbit. A generous bound: noise cannot produce 2x.
    assert t_slow > 2 * t_fast, (t_fast, t_slow)
