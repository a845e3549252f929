"""Multi-host pieces that need no root or network: placement, the worker's rank under torchrun, the
interface refusals (the Slurm/Kubernetes recipes: test_multihost_recipes.py)."""

from __future__ import annotations

import pytest

from distro_bench.errors import InputError
from distro_bench.multihost import iface as iface_mod
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.scenario.placement import Placement, from_scenario, parse_flag, scenario_rank
from tests.helpers import REPO, tiny_scenario_dict


def scen(workers):
    return scenario_from_dict(tiny_scenario_dict(workers=workers))


# ---- placement ------------------------------------------------------------------------------------

def test_default_placement_takes_nodes_in_order():
    s = scen([{"count": 4}])
    assert from_scenario(s).hosts == ((0,), (1,), (2,), (3,))
    assert from_scenario(s, nnodes=2).hosts == ((0, 1), (2, 3))


def test_uneven_split_is_refused_with_the_way_out():
    with pytest.raises(InputError, match="--nnodes: 3 hosts cannot share the scenario's 4 workers"):
        from_scenario(scen([{"count": 4}]), nnodes=3)


def test_scenario_host_fields_place_groups():
    s = scen([{"count": 2, "host": 1}, {"count": 1, "host": 0}, {"count": 1, "host": 1}])
    assert from_scenario(s).hosts == ((2,), (0, 1, 3))
    with pytest.raises(InputError, match=r"--nnodes: 3, but workers\[\]\.host places the workers on 2 hosts"):
        from_scenario(s, nnodes=3)


@pytest.mark.parametrize("workers, match", [
    ([{"count": 1, "host": 0}, {"count": 1}], r"workers\[1\].host: give every worker group a host"),
    ([{"count": 1, "host": 0}, {"count": 1, "host": 2}], r"hosts \[1\] run no worker group"),
])
def test_bad_scenario_placement(workers, match):
    with pytest.raises(InputError, match=match):
        from_scenario(scen(workers))


def test_placement_flag():
    assert parse_flag("0,3;1,2", 4).hosts == ((0, 3), (1, 2))
    with pytest.raises(InputError, match=r"ranks \[2\] are placed on no host"):
        parse_flag("0,1;3", 4)
    with pytest.raises(InputError, match=r"ranks \[1\] are placed more than once"):
        parse_flag("0,1;1,2,3", 4)
    with pytest.raises(InputError, match="not a list of scenario ranks"):
        parse_flag("a;b", 4)


def test_worker_rank_follows_the_placement_not_torchruns_order():
    env = {"DISTRO_BENCH_PLACEMENT": Placement(((2, 0), (1, 3))).encode(), "DISTRO_BENCH_NODE_RANK": "1",
           "LOCAL_RANK": "1", "RANK": "0"}
    assert scenario_rank(env) == 3
    assert scenario_rank({"RANK": "2"}) is None  # not under an agent: torchrun's RANK stands


def test_worker_ranks_under_torchrun(monkeypatch):
    from distro_bench.train.distributed import worker_ranks

    for k, v in {"DISTRO_BENCH_PLACEMENT": "1;0", "DISTRO_BENCH_NODE_RANK": "0", "LOCAL_RANK": "0", "RANK": "1",
                 "WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(k, v)
    assert worker_ranks() == (1, 2, 0)
    monkeypatch.delenv("DISTRO_BENCH_PLACEMENT")
    assert worker_ranks() == (1, 2, 0)


# ---- the interface --------------------------------------------------------------------------------

def _facts(**kw):
    base = {"name": "eth1", "ipv4": "10.0.0.2", "prefixlen": 24, "mac": None, "mtu": 1500, "speed_mbit": None,
            "driver": None, "default_route": False, "ssh_session": None}
    return iface_mod.IfaceFacts(**{**base, **kw})


def test_iface_is_never_guessed(monkeypatch):
    monkeypatch.setattr(iface_mod, "interfaces", lambda: ["eth0", "eth1", "lo"])
    with pytest.raises(InputError, match=r"--iface: name the interface to shape.*never guesses.*eth0, eth1, lo"):
        iface_mod.choose(None, shaping=True, i_know=False)
    assert iface_mod.choose(None, shaping=False, i_know=False) is None
    with pytest.raises(InputError, match="no interface 'wlan0'"):
        iface_mod.choose("wlan0", shaping=True, i_know=False)


@pytest.mark.parametrize("kw, why", [({"default_route": True}, "carries this host's default route"),
                                     ({"ssh_session": "from 1.2.3.4:5 to 10.0.0.2:22"}, "your SSH session runs over it")])
def test_the_users_own_interface_needs_i_know(monkeypatch, kw, why):
    monkeypatch.setattr(iface_mod, "interfaces", lambda: ["eth1"])
    monkeypatch.setattr(iface_mod, "facts", lambda name: _facts(**kw))
    with pytest.raises(InputError, match=f"--iface eth1: .*{why}.*--i-know"):
        iface_mod.choose("eth1", shaping=True, i_know=False)
    assert iface_mod.choose("eth1", shaping=True, i_know=True).name == "eth1"
    assert iface_mod.choose("eth1", shaping=False, i_know=False).name == "eth1"  # not shaped: nothing at stake


def test_ssh_session_is_found_by_its_local_address(monkeypatch):
    monkeypatch.setattr(iface_mod, "_addresses", lambda name: [("10.0.0.2", 24)] if name == "eth1" else [])
    env = {"SSH_CONNECTION": "192.168.1.5 50000 10.0.0.2 22"}
    assert iface_mod.ssh_session_on("eth1", env) == "from 192.168.1.5:50000 to 10.0.0.2:22"
    assert iface_mod.ssh_session_on("eth2", env) is None
    assert iface_mod.ssh_session_on("eth1", {}) is None


def test_node_cli_refuses_a_bad_rendezvous_before_touching_anything(cli):
    r = cli("node", REPO / "scenarios" / "ci-smoke.yaml", "--rdzv", "nohost", "--node-rank", "0", "--no-shaping")
    assert r.exit_code == 2 and "--rdzv: 'nohost' is not HOST:PORT" in r.output
    r = cli("node", REPO / "scenarios" / "ci-smoke.yaml", "--rdzv", "127.0.0.1:29400", "--node-rank", "7",
            "--no-shaping")
    assert r.exit_code == 2 and "--node-rank: 7; this run has hosts 0..3" in r.output


# ---- the host's link plan ---------------------------------------------------------------------------

def _caps(netem: bool):
    from distro_bench.net.host import HostInfo

    return HostInfo(root=True, kernel="6.1", iproute2="6.1", nsenter=False, netns=True, netns_error=None,
                    qdiscs=("tbf", "netem") if netem else ("tbf",), iperf3=False, ping=False, ethtool=False,
                    delayline=True, delayline_detail="ok", docker=None)


def test_host_plan_puts_rate_on_tc_and_delay_only_where_netem_exists():
    from distro_bench.errors import CapabilityError
    from distro_bench.multihost.hostshaping import plan_host

    s = scen([{"count": 2, "link": {"up": "10Mbit", "down": "50Mbit", "delay": "20ms"}}])
    plan = plan_host(s.nodes()[:1], _caps(netem=True), allow_unemulated=False, seed=0)
    (node,) = plan.nodes
    assert node.up.tc.rate_bps == 10_000_000 and node.down.tc.rate_bps == 50_000_000
    assert node.up.tc.delay_s == 0.02 and node.up.delay_line is None  # netem, never a delay line on a real NIC
    # No netem: a real interface has no place for the userspace delay line, so only --allow-unemulated helps.
    with pytest.raises(CapabilityError, match="allow-unemulated") as e:
        plan_host(s.nodes()[:1], _caps(netem=False), allow_unemulated=False, seed=0)
    assert "--link-engine userspace" not in str(e.value)
    plan = plan_host(s.nodes()[:1], _caps(netem=False), allow_unemulated=True, seed=0)
    assert plan.nodes[0].up.tc.delay_s == 0 and plan.nodes[0].up.delay_line is None and plan.not_emulated


def test_nodes_sharing_a_host_must_share_a_link():
    from distro_bench.multihost.hostshaping import plan_host

    s = scen([{"count": 1, "link": {"up": "10Mbit"}}, {"count": 1, "link": {"up": "20Mbit"}}])
    with pytest.raises(InputError, match="share this host's interface but have different links"):
        plan_host(s.nodes(), _caps(netem=True), allow_unemulated=False, seed=0)
