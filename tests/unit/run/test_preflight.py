"""The one preflight, with made-up hosts: every missing piece listed at once with its install line,
advice that can work here, and never the flag the user already passed. Missing binaries are simulated
by an empty PATH, so no root is needed."""

from __future__ import annotations

import dataclasses

import pytest

from distro_bench.errors import CapabilityError
from distro_bench.net import host
from distro_bench.net.engines import plan_links
from distro_bench.net.host import HostInfo
from distro_bench.run import preflight
from distro_bench.run.preflight import Needs, problems
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import tiny_scenario_dict

ALL_BINARIES = {name: f"/usr/bin/{name}" for name in host.BINARIES}
ALL_MODULES = {"pyroute2": "0.9.7", "docker": "7.1.0", "torch": "2.13.0"}

# A root host without netem, with the delay line, every binary and module: userspace works, tc does not.
HOST = HostInfo(root=True, kernel="test", iproute2="iproute2-6.1.0", nsenter=True, netns=True, netns_error=None,
                qdiscs=("pfifo", "tbf", "htb"), iperf3=True, ping=True, ethtool=True, delayline=True,
                delayline_detail="AF_PACKET", docker=True, docker_detail="engine 24", gpus=(),
                binaries=ALL_BINARIES, modules=ALL_MODULES)
DSL = {"up": "10Mbit", "down": "50Mbit", "delay": "15ms", "jitter": "3ms", "loss": "0.1%"}


def scenario(link=DSL, **kw):
    return scenario_from_dict(tiny_scenario_dict(links={"dsl": link}, workers=[{"count": 2, "link": "dsl"}], **kw))


def without(h: HostInfo, *binaries: str, modules: tuple[str, ...] = (), **changes) -> HostInfo:
    return dataclasses.replace(h, binaries={k: (None if k in binaries else v) for k, v in h.binaries.items()},
                               modules={k: (None if k in modules else v) for k, v in h.modules.items()}, **changes)


def test_needs_of_a_scenario():
    n = Needs.of(scenario())
    assert n.shaped and n.impaired and not n.cuda and n.links == ("dsl",)
    n = Needs.of(scenario({"up": "10Mbit"}))
    assert n.shaped and not n.impaired
    assert Needs.of(scenario_from_dict(tiny_scenario_dict())) == Needs()


def test_a_complete_host_has_no_problem_for_every_backend_with_the_userspace_engine():
    for backend in ("local", "netns", "docker"):
        assert problems(HOST, backend, Needs.of(scenario()), link_engine="userspace") == []
        assert problems(HOST, backend, Needs.of(scenario()), link_engine="auto") == []


def test_every_missing_piece_is_listed_at_once_with_its_install_line(monkeypatch, tmp_path):
    # No binary on PATH at all, and no pyroute2: one error names them all.
    monkeypatch.setenv("PATH", str(tmp_path))
    bare = dataclasses.replace(HOST, binaries=host.binaries(), modules={**ALL_MODULES, "pyroute2": None})
    assert all(v is None for v in bare.binaries.values())
    with pytest.raises(CapabilityError) as e:
        preflight.check("netns", scenario(), link_engine="userspace", host=bare)
    found = e.value.problems
    text = str(e.value)
    assert len(found) >= 2 and f"{len(found)} problems" in text
    for piece, line in (("`tc`", "apt-get install iproute2"), ("pyroute2", "pip install pyroute2")):
        assert any(piece in p.what and line in p.fix for p in found), (piece, text)
    # Nothing pyroute2 or the Python namespace launcher covers is asked for.
    assert not any(b in text for b in ("`ip`", "setpriv", "nsenter", "ethtool", "ping", "iperf3")), text
    # One line per piece, even where two paths need it.
    assert len({p.what for p in found}) == len(found)
    # No advice names an engine flag: userspace was passed, and tc cannot work here (no netem).
    assert not any("--link-engine" in p.fix for p in found)


def test_the_userspace_engine_needs_no_ethtool_on_the_netns_backend():
    h = without(HOST, "iperf3", ethtool=False, ping=False, iperf3=False, nsenter=False)
    assert problems(h, "netns", Needs.of(scenario()), link_engine="userspace") == []
    # Nor on docker: the splice, offloads and entering a container's namespace are pyroute2 and enter.py.
    assert problems(h, "docker", Needs.of(scenario()), link_engine="userspace") == []
    assert h.userspace_engine
    plan = plan_links(scenario().nodes(), h, engine="userspace")
    assert plan.engine == "userspace"


def test_the_passed_engine_is_never_the_advice():
    # userspace passed and unusable (no delay line), netem missing too: no --link-engine advice at all.
    h = dataclasses.replace(HOST, delayline=False, delayline_detail="AF_PACKET raw sockets are unavailable")
    found = problems(h, "netns", Needs.of(scenario()), link_engine="userspace")
    fixes = " ".join(p.fix for p in found)
    assert found and "--link-engine" not in fixes
    assert "--allow-unemulated" in fixes and "AF_PACKET" in fixes
    # tc passed on a kernel without netem, userspace usable: that is the advice, and tc is not.
    found = problems(HOST, "netns", Needs.of(scenario()), link_engine="tc")
    fixes = " ".join(p.fix for p in found)
    assert [p.what for p in found] == ["the netem qdisc"]
    assert "--link-engine userspace (works here)" in fixes and "--link-engine tc" not in fixes
    assert "modprobe sch_netem" in fixes


def test_the_link_planner_does_not_advise_the_engine_passed():
    h = dataclasses.replace(HOST, delayline=False, delayline_detail="not here")
    with pytest.raises(CapabilityError) as e:
        plan_links(scenario().nodes(), h, engine="userspace")
    way_out = str(e.value).split("Way out:")[1]
    assert "--link-engine" not in way_out and "--allow-unemulated" in way_out


def test_auto_with_neither_engine_lists_both_and_suggests_no_engine_flag():
    h = without(HOST, delayline=False, delayline_detail="no AF_PACKET")
    found = problems(h, "netns", Needs.of(scenario()), link_engine="auto")
    whats = [p.what for p in found]
    assert "the netem qdisc" in whats and "the userspace delay line" in whats
    assert not any("--link-engine" in p.fix for p in found)


def test_allow_unemulated_drops_the_impairment_problems_only():
    h = without(HOST, "tc", delayline=False)
    found = problems(h, "netns", Needs.of(scenario()), link_engine="tc", allow_unemulated=True)
    assert [p.what for p in found] == ["`tc` (iproute2)"]


def test_docker_paths_need_the_engine_and_for_shaping_root():
    h = dataclasses.replace(HOST, root=False, docker=False, docker_detail="no engine reachable")
    found = problems(h, "docker", Needs.of(scenario()), link_engine="userspace")
    whats = [p.what for p in found]
    assert "a Docker engine" in whats and "root" in whats
    assert any("start-engine.sh" in p.fix for p in found)
    # Unshaped containers need no root, no tc.
    plain = problems(h, "docker", Needs(), link_engine="auto")
    assert [p.what for p in plain] == ["a Docker engine"]


def test_local_needs_torch_only():
    h = without(HOST, *host.BINARIES, modules=("pyroute2", "docker"), root=False, netns=False)
    assert problems(h, "local", Needs.of(scenario())) == []
    h = without(HOST, modules=("torch",))
    assert [p.what for p in problems(h, "local", Needs())] == ["Python module torch"]


def test_a_cuda_worker_without_a_gpu_is_a_problem():
    s = scenario_from_dict(tiny_scenario_dict(hardware={"g": {"device": "cuda"}},
                                              workers=[{"count": 2, "hardware": "g"}]))
    found = problems(HOST, "local", Needs.of(s))
    assert [p.what for p in found] == ["a CUDA GPU usable by torch"]
    assert problems(dataclasses.replace(HOST, gpus=("NVIDIA H200",)), "local", Needs.of(s)) == []
