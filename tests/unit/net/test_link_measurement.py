"""The run's quick link measurement (harness/distro_bench/net/linktest.py measure_nodes, harness/distro_bench/run/runner.py measure_links)
and its place in the report's configured / applied / measured table, with the probes replaced by fakes."""

from __future__ import annotations

import copy
import time

import pytest

from distro_bench.net import linktest, tcpprobe
from distro_bench.net.linktest import LinkTarget, measure_nodes
from distro_bench.net.ns import NetnsRef
from distro_bench.net.shaping import Direction
from distro_bench.report import write_run_report
from distro_bench.report.describe import link_rows
from distro_bench.report.load import load_for_report
from distro_bench.run.runner import SilentProgress, measure_links
from tests.helpers import tiny_scenario_dict
from tests.unit.runfolders import make_run


def _target(name: str, up: int | None, down: int | None) -> LinkTarget:
    return LinkTarget(name=name, ns=NetnsRef.named(f"ns-{name}"), addr="10.0.0.9",
                      up=Direction(rate_bps=up, delay_s=0.015), down=Direction(rate_bps=down, delay_s=0.015))


@pytest.fixture
def fake_probes(monkeypatch):
    """Goodput: 95% of the node's configured rate (None for node 'dead'); RTT: 31 ms, one of 5 lost."""
    calls = []

    def goodput(client, server, addr, *, seconds, reverse, omit_s):
        calls.append(("goodput", client.path, reverse, seconds, omit_s))
        if "dead" in client.path:
            return None
        return {"ns-a": (9e6, 47e6), "ns-b": (1e6, 2e6)}[client.path.split("/")[-1]][1 if reverse else 0] * 0.95

    def rtt(client, server, addr, *, count, interval_s):
        calls.append(("rtt", client.path, count))
        return tcpprobe.RttResult(samples=(0.030, 0.032, 0.031, 0.031), sent=count)

    monkeypatch.setattr(tcpprobe, "tcp_goodput", goodput)
    monkeypatch.setattr(tcpprobe, "rtt", rtt)
    return calls


def test_measure_nodes_records_goodput_per_direction_and_half_the_rtt(fake_probes):
    out = measure_nodes([_target("a", 10_000_000, 50_000_000), _target("b", 1_000_000, None),
                         _target("dead", 1_000_000, 1_000_000)], NetnsRef.named("sw"), "10.0.0.1", seconds=0.7)
    a, b, dead = out["a"], out["b"], out["dead"]
    assert a["up"]["rate_bps"] == pytest.approx(9e6 * 0.95) and a["down"]["rate_bps"] == pytest.approx(47e6 * 0.95)
    assert a["rtt_s"] == pytest.approx(0.031) and a["rtt_lost"] == 1
    assert a["up"]["delay_s"] == pytest.approx(0.0155) and a["down"]["delay_s"] == pytest.approx(0.0155)
    assert a["seconds"] == 0.7 and a["concurrent_nodes"] == 3 and "error" not in a
    # slow links are measured longer (enough bytes for a figure within a few percent), up to a cap
    assert a["down"]["seconds"] == 0.7 and b["up"]["seconds"] == pytest.approx(linktest.QUICK_MAX_SECONDS)
    assert a["up"]["seconds"] == pytest.approx(linktest.QUICK_MIN_BYTES * 8 / 10e6)  # 0.84 s
    assert {round(c[3], 2) for c in fake_probes if c[0] == "goodput" and c[1].endswith("ns-a")} == {0.7, 0.84}
    # an unshaped direction is this host's CPU, not a link: not measured
    assert "rate_bps" not in b["down"] and b["up"]["rate_bps"] == pytest.approx(0.95e6)
    assert not any(c[1].endswith("ns-b") and c[0] == "goodput" and c[2] for c in fake_probes)
    # a failed node says why and keeps its RTT
    assert "no data came through" in dead["error"] and "rate_bps" not in dead["up"] and dead["rtt_s"] is not None


def test_measure_nodes_keeps_one_nodes_exception_to_that_node(fake_probes, monkeypatch):
    def boom(client, *a, **k):
        if client.path.endswith("ns-b"):
            raise OSError("no route")
        return 5e6

    monkeypatch.setattr(tcpprobe, "tcp_goodput", boom)
    out = measure_nodes([_target("a", 10_000_000, None), _target("b", 1_000_000, None)], NetnsRef.named("sw"), "x")
    assert out["a"]["up"]["rate_bps"] == 5e6 and "error" not in out["a"]
    assert "OSError: no route" in out["b"]["error"]


class _Backend:
    name = "fake"

    def __init__(self, probe):
        self._probe = probe

    def link_probe(self):
        return self._probe


NETWORK = {"backend": "netns", "network_emulated": True,
           "nodes": [{"rank": 0, "name": "node0"}, {"rank": 1, "name": "node1"}]}


def test_runner_puts_each_nodes_measurement_on_its_node(monkeypatch):
    seen = {}

    def fake(targets, far_ns, far_addr):
        seen["args"] = (targets, far_ns, far_addr)
        return {"node1": {"up": {"rate_bps": 1.0}, "down": {}, "tool": "t"}}

    monkeypatch.setattr(linktest, "measure_nodes", fake)
    net = copy.deepcopy(NETWORK)
    measure_links(_Backend((["t0", "t1"], "sw", "10.77.0.1")), net, SilentProgress())
    assert seen["args"] == (["t0", "t1"], "sw", "10.77.0.1")
    assert "measured" not in net["nodes"][0] and net["nodes"][1]["measured"]["up"]["rate_bps"] == 1.0
    assert net["link_measurement"]["measured"] is True and net["link_measurement"]["far_end"] == "10.77.0.1"


def test_runner_records_why_links_were_not_measured(monkeypatch):
    net = copy.deepcopy(NETWORK)
    measure_links(_Backend(None), net, SilentProgress())
    assert net["link_measurement"] == {"measured": False, "why": "the fake backend has no link probe"}

    def fail(*a):
        raise RuntimeError("namespace vanished")

    monkeypatch.setattr(linktest, "measure_nodes", fail)
    net = copy.deepcopy(NETWORK)
    measure_links(_Backend(([], "sw", "x")), net, SilentProgress())  # never raises: the run goes on
    assert net["link_measurement"]["measured"] is False and "namespace vanished" in net["link_measurement"]["why"]
    assert all("measured" not in n for n in net["nodes"])


def _network(measured: dict | None, info: dict | None) -> dict:
    node = {"rank": 0, "name": "node0", "address": "10.0.0.2", "link": "dsl",
            "applied": {"up": {"plan": {"rate_bps": 10_000_000}}, "down": {"plan": {"rate_bps": 50_000_000}},
                        "delay_line": {"up": {"delay_s": 0.015, "jitter_s": 0.0, "loss": 0.0},
                                       "down": {"delay_s": 0.015, "jitter_s": 0.0, "loss": 0.0}}}}
    if measured is not None:
        node["measured"] = measured
    net = {"backend": "netns", "network_emulated": True, "link_engine": "userspace", "nodes": [node],
           "not_emulated": []}
    if info is not None:
        net["link_measurement"] = info
    return net


def test_report_shows_measured_rates_and_says_how(tmp_path):
    measured = {"up": {"rate_bps": 9_512_345.6, "delay_s": 0.0156, "seconds": 1.0},
                "down": {"rate_bps": 47_000_000.0, "delay_s": 0.01564, "seconds": 1.0},
                "rtt_s": 0.0312, "tool": linktest.QUICK_TOOL, "seconds": 1.0, "concurrent_nodes": 1}
    run = load_for_report(make_run(tmp_path, ranks=1, network=_network(measured, {"measured": True, "took_s": 3.4})))
    by = {r[2]: r for r in link_rows(run)}
    assert by["up"][3] == "10Mbit / 10Mbit / 9.51Mbit" and by["down"][3] == "50Mbit / 50Mbit / 47Mbit"
    assert by["up"][4].endswith("/ 15.6ms")
    write_run_report(run.data.path)
    md = (run.data.path / "report.md").read_text()
    # measured figures to 3 significant digits: the probe is not finer
    assert "Measured: rate is TCP goodput (python-tcp goodput, tcp-handshake RTT) over 1 s" in md
    assert "in 3.4 s in all" in md


def test_report_says_when_links_were_not_measured(tmp_path):
    run = load_for_report(make_run(tmp_path, ranks=1, network=_network(None, {"measured": False,
                                                                                 "why": "--no-measure-links"})))
    assert all(r[3].endswith("/ not measured") for r in link_rows(run))
    write_run_report(run.data.path)
    assert "Links were not measured (--no-measure-links)." in (run.data.path / "report.md").read_text()


@pytest.mark.parametrize("flag, expected", [([], None), (["--no-measure-links"], False), (["--measure-links"], True)])
def test_run_flag_reaches_the_runner(cli, write_scenario, monkeypatch, flag, expected):
    from distro_bench import api
    from distro_bench.errors import InputError

    seen = {}

    def fake_run(scenario, overrides=None, settings=None, **kw):
        seen["settings"] = settings
        raise InputError("stopped by the test")  # a clean exit 2, not a bug report with a traceback file

    monkeypatch.setattr(api, "run", fake_run)
    cli("run", write_scenario(tiny_scenario_dict()), *flag)
    assert seen["settings"] is not None and seen["settings"].measure_links is expected


def test_scenario_turns_measuring_off_and_rejects_a_non_boolean():
    from distro_bench.errors import ScenarioError
    from distro_bench.scenario.loading import scenario_from_dict

    assert scenario_from_dict(tiny_scenario_dict()).network.measure_links is True
    assert scenario_from_dict(tiny_scenario_dict(network={"measure_links": False})).network.measure_links is False
    with pytest.raises(ScenarioError, match="measure_links"):
        scenario_from_dict(tiny_scenario_dict(network={"measure_links": "sometimes"}))


def test_goodput_leaves_out_what_was_queued_before_its_mark():
    """A receiver the CPU kept waiting past the mark finds a backlog larger than one read; all of it arrived
    before the mark. Here everything arrives before the mark and nothing after: nothing may be counted
    (counting the backlog after the first read would give 600 KB in a few milliseconds)."""
    import socket
    import time

    size = 600 * 1024
    with socket.socket() as lst:
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)  # inherited by the accepted socket
        lst.bind(("127.0.0.1", 0))
        lst.listen(1)
        with socket.create_connection(lst.getsockname()) as tx:
            rx, _ = lst.accept()
            with rx:
                tx.sendall(b"x" * size)
                tx.shutdown(socket.SHUT_WR)
                deadline = time.monotonic() + 30
                while tcpprobe._queued(rx) < size and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert tcpprobe._queued(rx) == size
                out: dict = {}
                tcpprobe._receive(rx, start=time.monotonic() - 2.0, omit_s=0.5, out=out)
    assert out.get("bytes") in (None, 0), out


def test_handshake_rtt_is_the_kernels_sample_not_this_process_wake_up(monkeypatch):
    """On a busy host the prober wakes late after every SYN-ACK, so connect()'s own duration is long
    every time (the median does not remove it); the figure is the kernel's stamp-to-stamp sample."""
    me = NetnsRef.current()
    real = time.perf_counter
    calls = []

    def late_clock() -> float:  # every reading after the first is 50 ms later: a late wake-up
        calls.append(None)
        return real() + (0.050 if len(calls) > 1 else 0.0)

    with tcpprobe.Listener(me, "127.0.0.1") as lst:
        monkeypatch.setattr(tcpprobe.time, "perf_counter", late_clock)
        got = tcpprobe.connect_time(me, "127.0.0.1", lst.port)
        monkeypatch.setattr(tcpprobe.time, "perf_counter", real)
    assert len(calls) >= 2, "connect_time did not time the handshake"
    assert got is not None and 0 < got < 0.010, got  # loopback: tens of microseconds, not 50 ms
