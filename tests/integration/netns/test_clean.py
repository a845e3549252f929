"""`distro-bench clean` removes what dead runs left, and leaves a live run's namespaces alone."""

from __future__ import annotations

import os
import subprocess

import pytest

from distro_bench.net import naming, owner
from distro_bench.net.cleanup import list_namespaces


def test_owner_claim_is_alive_until_released():
    rid = naming.new_run_id()
    assert not owner.owner_alive(rid)
    owner.claim(rid)
    try:
        assert owner.owner_alive(rid)
    finally:
        owner.release(rid)
    assert not owner.owner_alive(rid)


def test_a_dead_or_recycled_owner_is_not_alive():
    rid = naming.new_run_id()
    proc = subprocess.Popen(["true"])
    proc.wait()
    (owner.runtime_dir() / f"{rid}.owner").write_text(f"{proc.pid} 12345\n")
    try:
        assert not owner.owner_alive(rid)
        # our own pid but another start time: a recycled pid, not the owner
        (owner.runtime_dir() / f"{rid}.owner").write_text(f"{os.getpid()} 1\n")
        assert not owner.owner_alive(rid)
    finally:
        owner.release(rid)


@pytest.fixture
def namespace_pair():
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces")
    live, dead = naming.new_run_id(), naming.new_run_id()
    names = [naming.node_ns(live, 0), naming.node_ns(dead, 0)]
    for n in names:
        if subprocess.run(["ip", "netns", "add", n], capture_output=True).returncode:
            pytest.skip("network namespaces unavailable here")
    owner.claim(live)
    try:
        yield live, dead
    finally:
        owner.release(live)
        for n in names:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)


def test_clean_removes_a_dead_runs_namespace_and_keeps_a_live_one(cli, namespace_pair, monkeypatch):
    from distro_bench.net import cleanup

    live, dead = namespace_pair
    # Scoped to this test's two runs: `clean --force` ends every live run it sees, and CI runs other tests'
    # runs beside this one (unscoped, it SIGKILLed a netns test's workers mid-run).
    real = cleanup.list_namespaces
    monkeypatch.setattr(cleanup, "list_namespaces",
                        lambda run_id=None: [n for n in real(run_id) if naming.run_id_of(n) in (live, dead)])
    result = cli("clean")
    assert result.exit_code == 0, result.output
    assert real(dead) == []
    assert real(live) == [naming.node_ns(live, 0)]
    result = cli("clean", "--force")
    assert result.exit_code == 0 and real(live) == []


def test_clean_leaves_a_live_delay_line_lab_alone(cli, monkeypatch):
    # The lab (tests/delayline_lab.py) once claimed no owner, so `clean` deleted a running lab's
    # namespaces from under its test. Scoped to the lab's own run id: other runs on this machine stay.
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces")
    from distro_bench.net import cleanup
    from tests.delayline_lab import Lab, LabLink

    lab = Lab([LabLink(delay_line=False)])
    real = cleanup.list_namespaces
    monkeypatch.setattr(cleanup, "list_namespaces", lambda run_id=None: real(run_id or lab.run_id))
    try:
        lab.up()
    except Exception as e:
        lab.down()
        pytest.skip(f"network namespaces unavailable here: {e}")
    try:
        names = real(lab.run_id)
        assert len(names) == 3 and owner.owner_alive(lab.run_id)
        result = cli("clean")
        assert result.exit_code == 0, result.output
        assert real(lab.run_id) == names  # a live lab is not a leftover
    finally:
        lab.down()
    assert real(lab.run_id) == [] and not owner.owner_alive(lab.run_id)
    # Once its owner is gone, what a lab left behind is a leftover like any other.
    subprocess.run(["ip", "netns", "add", lab.ns(0)], check=True)
    result = cli("clean")
    assert result.exit_code == 0 and real(lab.run_id) == [], result.output


def test_the_host_probe_namespace_is_claimed_while_it_lives(monkeypatch):
    # `clean` removes a namespace whose run id has no live owner: an unclaimed probe namespace of a running
    # doctor or preflight was pulled from under it.
    if os.geteuid() != 0:
        pytest.skip("needs root to create the probe's network namespace")
    from distro_bench.net import host
    from distro_bench.net import ns as ns_mod

    seen = {}
    real_create, real_veth = ns_mod.create_netns, ns_mod.add_veth

    def create_netns(name, *args, **kwargs):
        seen["ns"] = name
        return real_create(name, *args, **kwargs)

    def add_veth(*args, **kwargs):  # the namespace exists now: is it protected from `clean`?
        seen["alive"] = seen["ns"] in list_namespaces() and owner.owner_alive(naming.run_id_of(seen["ns"]))
        return real_veth(*args, **kwargs)

    monkeypatch.setattr(ns_mod, "create_netns", create_netns)
    monkeypatch.setattr(ns_mod, "add_veth", add_veth)
    ok, why, _ = host.probe_qdiscs()
    if not ok and "alive" not in seen:
        pytest.skip(f"network namespaces unavailable here: {why}")
    assert seen["alive"], f"{seen['ns']} was not owner-claimed while the probe ran"
    assert seen["ns"] not in list_namespaces()
    assert not owner.owner_alive(naming.run_id_of(seen["ns"])), "the probe's claim outlived it"
