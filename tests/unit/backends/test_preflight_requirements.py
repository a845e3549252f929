"""Backends declare what they need of the host as data (Backend.requirements); the preflight evaluates the
chosen backend's list, so a backend it has never heard of is checked the same way."""

from __future__ import annotations

import dataclasses

from distro_bench.backends.local import LocalBackend
from distro_bench.backends.registry import BACKENDS
from distro_bench.backends.requirements import (
    ENGINE_REQUIREMENTS,
    Binary,
    DockerEngine,
    LinkEngine,
    Needs,
    NetworkNamespaces,
    PythonModule,
    Qdisc,
    Requirement,
    Root,
    engine_problems,
)
from distro_bench.run import preflight
from tests.unit.run.test_preflight import HOST, without


def _kinds(reqs: list[Requirement]) -> list[str]:
    return [type(r).__name__ for r in reqs]


def test_each_backend_declares_its_own_pieces():
    rated_and_delayed = Needs(shaped=True, impaired=True, links=("dsl",))
    assert BACKENDS["local"].requirements(rated_and_delayed) == []
    netns = BACKENDS["netns"].requirements(rated_and_delayed)
    assert _kinds(netns) == ["Root", "PythonModule", "NetworkNamespaces", "Binary", "Qdisc", "LinkEngine"]
    assert [r.links for r in netns if isinstance(r, LinkEngine)] == [("dsl",)]
    # netns reads back its qdiscs with tc even without rates; it needs no link engine without delay.
    assert _kinds(BACKENDS["netns"].requirements(Needs())) == ["Root", "PythonModule", "NetworkNamespaces", "Binary"]
    docker = BACKENDS["docker"].requirements(rated_and_delayed)
    assert isinstance(docker[0], PythonModule) and docker[0].module == "docker" and isinstance(docker[1], DockerEngine)
    assert not any(isinstance(r, NetworkNamespaces) for r in docker)  # Docker makes the namespaces
    assert _kinds(BACKENDS["docker"].requirements(Needs())) == ["PythonModule", "DockerEngine"]
    # A trace on loopback measures nothing: local declares it cannot, and --allow-unemulated waives it.
    (trace,) = LocalBackend.requirements(Needs(traces=("t",)))
    assert trace.emulation and "--backend netns" in trace.problems(HOST)[0].fix


def test_the_preflight_evaluates_a_backend_it_does_not_know_by_name(monkeypatch):
    class Tunnel(LocalBackend):
        name = "tunnel"

        @classmethod
        def requirements(cls, needs):
            return [Root(needed_for="the tunnel backend"), Binary(name="iperf3", needed_for="the tunnel's probe"),
                    Qdisc(kind="netem", needed_for="the tunnel's delay", when_untried=True)]

    monkeypatch.setitem(BACKENDS, "tunnel", Tunnel)
    h = without(HOST, "iperf3", root=False)
    found = preflight.problems(h, "tunnel", Needs())
    assert [p.what for p in found] == ["root", "`iperf3` (iperf3)", "the netem qdisc"]
    assert found[1].fix == "apt-get install iperf3" and found[0].needed_for == "the tunnel backend"
    assert preflight.problems(dataclasses.replace(HOST, qdiscs=("netem",)), "tunnel", Needs()) == []
    # doctor lists it too: one row, no link engine declared.
    assert set(preflight.readiness(h)["tunnel"]) == {"none"}


def test_link_engines_declare_theirs():
    assert set(ENGINE_REQUIREMENTS) == {"tc", "userspace"}
    assert [p.what for p in engine_problems(HOST, "tc")] == ["the netem qdisc"]  # HOST has no netem
    assert engine_problems(HOST, "userspace") == []
    assert [p.what for p in engine_problems(dataclasses.replace(HOST, root=False), "userspace")] == ["root"]
    # Untried for want of tc: said so.
    assert "not tried: `tc` is missing" in engine_problems(without(HOST, "tc"), "tc")[0].needed_for


def test_a_kernel_feature_the_probe_could_not_try_is_not_reported_twice():
    # Without root neither namespaces nor tbf could be tried: root is the one problem for them.
    h = dataclasses.replace(HOST, root=False, netns=False, netns_error="not root", qdiscs=())
    found = preflight.problems(h, "netns", Needs(shaped=True))
    assert [p.what for p in found] == ["root"]
    h = dataclasses.replace(HOST, netns=False, netns_error="operation not permitted", qdiscs=())
    assert [p.what for p in preflight.problems(h, "netns", Needs(shaped=True))] == ["network namespaces"]
    assert [p.what for p in preflight.problems(dataclasses.replace(HOST, qdiscs=()), "netns", Needs(shaped=True))] \
        == ["the tbf qdisc"]
