"""`distro-bench clean` removes what dead runs left, and leaves a live run's namespaces alone."""

from __future__ import annotations

import os
import subprocess

import pytest

from harness import owner
from harness.net import naming
from harness.net.cleanup import list_namespaces


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


def test_clean_removes_a_dead_runs_namespace_and_keeps_a_live_one(cli, namespace_pair):
    live, dead = namespace_pair
    result = cli("clean")
    assert result.exit_code == 0, result.output
    assert list_namespaces(dead) == []
    assert list_namespaces(live) == [naming.node_ns(live, 0)]
    result = cli("clean", "--force")
    assert result.exit_code == 0 and list_namespaces(live) == []
