"""Networks that change (issue 18) on the docker backend: the same Emulation.change/outage as netns, on a
container's namespace (entered by path) and the host-side veth; read back; nothing left afterwards."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from distro_bench.backends.base import BackendOptions
from distro_bench.backends.docker import DockerBackend
from distro_bench.net.link import Direction
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import ours, tiny_scenario_dict


def _root(qdiscs: list[dict]) -> dict:
    return next(q for q in qdiscs if q.get("root"))


def test_change_and_outage_on_containers(worker_image, engine, tmp_path, tracked):
    from distro_bench.net.delayline import DelayLine
    from distro_bench.net.shaping import read_qdiscs

    if os.geteuid() != 0:
        pytest.skip("tc in the containers' namespaces needs root")
    ok, why = DelayLine.available()
    if not ok:
        pytest.skip(f"no userspace delay line here: {why}")
    s = scenario_from_dict(tiny_scenario_dict(
        workers=[{"count": 2, "hardware": "host", "link": "l"}],
        links={"l": {"up": "10Mbit", "down": "20Mbit", "schedule": [{"at": "5s", "loss": "1%"}]}}))
    b = DockerBackend(s, tmp_path / "run", BackendOptions(link_engine="userspace"))
    tracked.append(b)
    with b:
        em = b.emulation
        got = em.change(1, "up", Direction(rate_bps=2_000_000, delay_s=0.01, loss=0.02))
        assert int(next(q for q in got["tc"] if q["kind"] == "tbf")["options"]["rate"]) * 8 == 2_000_000
        assert got["delay_line"]["loss"] == pytest.approx(0.02)
        out = em.outage(1, True)
        assert _root(out["up"])["kind"] == _root(out["down"])["kind"] == "blackhole"
        back = em.outage(1, False)
        assert int(_root(back["up"])["options"]["rate"]) * 8 == 2_000_000
        ns, iface = em.endpoints[1].egress("down")
        assert int(_root(read_qdiscs(ns, iface))["options"]["rate"]) * 8 == 20_000_000
        assert em.verify() == []
        pids = [line.pid for line in em.delay_lines.values()]
    assert not [p for p in pids if Path(f"/proc/{p}").exists()]
    assert b.teardown_problems == []


@pytest.mark.slow
def test_run_survives_a_short_outage_on_docker(worker_image, engine, tmp_path, tracked):
    from distro_bench.results.events import read_events
    from distro_bench.run.runner import RunOptions, run_scenario

    if os.geteuid() != 0:
        pytest.skip("tc in the containers' namespaces needs root")
    s = scenario_from_dict(tiny_scenario_dict(
        workers=[{"count": 2, "hardware": "host", "link": "l"}], train={"steps": 8, "eval_every": 4, "seed": 0},
        links={"l": {"up": "20Mbit", "down": "20Mbit",
                     "schedule": [{"at_step": 3, "outage": "2s"}, {"at_step": 4, "down": "10Mbit"}]}}))
    res = run_scenario(s, RunOptions(backend="docker", out=tmp_path, write_report=False))
    assert res.state == "complete"
    ev = read_events(res.run_dir)
    assert sorted(ev["kind"]) == ["outage", "outage", "restore", "restore", "schedule", "schedule"], ev
    assert ev["ok"].all(), ev[["kind", "verified", "detail"]]
    rate = ev[ev["kind"] == "schedule"]
    assert set(rate["verified"]) == {"10Mbit"} and set(rate["direction"]) == {"down"}
    # how late each change was on this host (entering a container's namespace per tc call), for the record
    print((ev["t_s"] - ev["scheduled_s"]).describe())
    net = json.loads((res.run_dir / "environment.json").read_text())["network"]
    assert not ours(engine, net["run_id"])
