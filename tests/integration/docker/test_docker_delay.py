"""Docker backend with the userspace delay line (delay, jitter and loss without netem): the splice
plan (pure), engine choice in preflight, and against a real engine: RTT between two containers
equals the sum of the four one-way delays, workers cannot touch the hop, an end-to-end run, and
nothing of ours (container, network, delay-line process) outlives a test, even a failed setup."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distro_bench.backends.base import BackendOptions
from distro_bench.backends.docker import DockerBackend
from distro_bench.errors import CapabilityError, HarnessError
from distro_bench.net.splice import SpliceState, random_local_mac, route_args, undo_lines
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import exec_as_worker, ours, tiny_scenario_dict

# ---- the splice plan (pure) --------------------------------------------------------------------

# `ip -j -d addr show dev eth0` and `ip -j route show dev eth0` of a container on Docker 20.10.
ADDR = [{"ifindex": 213, "link_index": 214, "ifname": "eth0", "mtu": 1500, "address": "02:42:ac:12:00:02",
         "linkinfo": {"info_kind": "veth"},
         "addr_info": [{"family": "inet", "local": "172.18.0.2", "prefixlen": 16, "broadcast": "172.18.255.255"}]}]
ROUTES = [{"dst": "default", "gateway": "172.18.0.1", "dev": "eth0", "flags": []},
          {"dst": "172.18.0.0/16", "dev": "eth0", "protocol": "kernel", "scope": "link", "prefsrc": "172.18.0.2"}]


def test_splice_plan_moves_address_mac_and_routes_to_a_new_eth0():
    st = SpliceState.from_ip_json("eth0", ADDR, ROUTES, "06:00:00:00:00:01")
    assert st.addresses == ("172.18.0.2/16 brd 172.18.255.255",)
    assert st.routes == ("default via 172.18.0.1 dev eth0",)  # the connected route comes with the address
    lines = st.splice_lines()
    assert lines[:5] == ["link set dev eth0 down", "link set dev eth0 name b", "link set dev b address 06:00:00:00:00:01",
                         "link set dev b arp off", "addr flush dev b"]
    assert "link add name eth0 mtu 1500 type veth peer name a mtu 1500" in lines
    assert "link set dev eth0 address 02:42:ac:12:00:02" in lines and "link set dev a arp off" in lines
    assert lines.index("addr add 172.18.0.2/16 brd 172.18.255.255 dev eth0") < lines.index("link set dev eth0 up")
    assert lines[-1] == "route add default via 172.18.0.1 dev eth0"  # after eth0 is up, or the kernel refuses it


def test_undo_gives_back_whatever_part_of_the_splice_exists():
    m = "02:42:ac:12:00:02"
    assert undo_lines({"lo": "0", "eth0": m, "a": "x", "b": "y"}) == [
        "link del dev a", "link set dev b down", "link set dev b name eth0", f"link set dev eth0 address {m}",
        "link set dev eth0 arp on"]
    # Stopped between the rename and the new pair: Docker's veth keeps the MAC it has.
    assert undo_lines({"lo": "0", "b": m}) == ["link set dev b down", "link set dev b name eth0", "link set dev eth0 arp on"]
    assert undo_lines({"lo": "0", "eth0": m}) == []  # never spliced


def test_route_args_keep_scope_source_and_metric():
    r = {"dst": "10.9.0.0/24", "dev": "eth0", "scope": "link", "prefsrc": "172.18.0.2", "metric": 5}
    assert route_args(r, "eth0") == "10.9.0.0/24 dev eth0 scope link src 172.18.0.2 metric 5"


def test_splice_refuses_what_it_cannot_carry_over():
    with pytest.raises(HarnessError, match="no interface"):
        SpliceState.from_ip_json("eth1", ADDR, ROUTES, "06:00:00:00:00:01")
    with pytest.raises(HarnessError, match="not a veth"):
        SpliceState.from_ip_json("eth0", [{**ADDR[0], "linkinfo": {"info_kind": "macvlan"}}], [], "06:00:00:00:00:01")
    with pytest.raises(HarnessError, match="no IPv4 address"):
        SpliceState.from_ip_json("eth0", [{**ADDR[0], "addr_info": []}], [], "06:00:00:00:00:01")


def test_switch_side_mac_is_unicast_locally_administered_and_new():
    macs = {random_local_mac() for _ in range(50)}
    assert len(macs) == 50
    for m in macs:
        first = int(m.split(":")[0], 16)
        assert first & 1 == 0 and first & 2 == 2, m


# ---- engine choice -------------------------------------------------------------------------------

def delayed(d0="10ms", d1="20ms", rate="20Mbit", **extra) -> dict:
    return tiny_scenario_dict(
        workers=[{"count": 1, "hardware": "host", "link": "near"}, {"count": 1, "hardware": "host", "link": "far"}],
        links={"near": {"up": rate, "down": rate, "delay": d0, **extra}, "far": {"up": rate, "down": rate, "delay": d1, **extra}})


@pytest.fixture
def caps(monkeypatch):
    """A host with namespaces, tbf and ethtool, as root; netem and the delay line as the test says."""
    from distro_bench.net import host as net_probe

    def with_(*, netem: bool, delayline: bool, delayline_detail: str = "ok"):
        c = net_probe.Capabilities(
            root=True, kernel="test", iproute2="ip 6.1", nsenter=True, netns=True, netns_error=None,
            qdiscs=("tbf", "netem") if netem else ("tbf",), iperf3=True, ping=True, ethtool=True,
            delayline=delayline, delayline_detail=delayline_detail, docker=None)
        monkeypatch.setattr(net_probe, "probe", lambda **_: c)
        monkeypatch.setattr(os, "geteuid", lambda: 0)
        return c

    return with_


def test_auto_picks_the_delay_line_without_netem(caps):
    caps(netem=False, delayline=True)
    plan = DockerBackend.preflight(scenario_from_dict(delayed()), BackendOptions())
    assert plan.engine == "userspace" and plan.delay_line_ranks == {0, 1}
    assert plan.nodes[0].up.tc.rate_bps == 20_000_000 and not plan.nodes[0].up.tc.netem


def test_userspace_engine_is_accepted_and_tc_is_chosen_with_netem(caps):
    caps(netem=True, delayline=True)
    s = scenario_from_dict(delayed())
    assert DockerBackend.preflight(s, BackendOptions()).engine == "tc"
    assert DockerBackend.preflight(s, BackendOptions(link_engine="userspace")).engine == "userspace"


def test_no_engine_at_all_is_refused_before_anything_exists(caps):
    caps(netem=False, delayline=False, delayline_detail="AF_PACKET unavailable")
    with pytest.raises(CapabilityError, match="AF_PACKET unavailable"):
        DockerBackend.preflight(scenario_from_dict(delayed()), BackendOptions())


# ---- against a real engine -------------------------------------------------------------------------

def delay_lines_of(parent: int | None) -> list[int]:
    """Delay-line processes started by `parent` (they carry --parent-pid), or by any process that is
    gone when `parent` is None (orphans)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv]
        if "distro_bench.net.delayline" not in args or "--parent-pid" not in args:
            continue
        owner = int(args[args.index("--parent-pid") + 1])
        if owner == parent or (parent is None and not Path(f"/proc/{owner}").exists()):
            found.append(int(d.name))
    return found


def our_delay_lines() -> list[int]:
    return delay_lines_of(os.getpid())


@pytest.fixture
def root_with_delay_line():
    from distro_bench.net.delayline import DelayLine

    if os.geteuid() != 0:
        pytest.skip("the delay line runs as root in the containers' namespaces")
    ok, why = DelayLine.available()
    if not ok:
        pytest.skip(f"no userspace delay line here: {why}")
    before = root_veths()
    yield
    left = our_delay_lines()
    for pid in left:
        os.kill(pid, 9)
    assert not left, f"delay-line processes left running: {left}"
    # Docker removes a container's host-side veth only if it finds its own eth0 in there.
    deadline = time.monotonic() + 10
    while (new := root_veths() - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    for name in new:  # removed, so that a failing test leaves nothing either
        subprocess.run(["ip", "link", "del", name], capture_output=True)
    assert not new, f"host-side veths left behind: {new}"


def root_veths() -> set[str]:
    out = subprocess.run(["ip", "-j", "link", "show", "type", "veth"], capture_output=True, text=True).stdout
    return {x["ifname"] for x in json.loads(out or "[]")}


def userspace(scen: dict, tmp_path: Path) -> DockerBackend:
    return DockerBackend(scenario_from_dict(scen), tmp_path / "run", BackendOptions(link_engine="userspace"))


UDP_ECHO_SERVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 9977))
print("ready", flush=True)
while True:
    data, addr = s.recvfrom(64)
    s.sendto(data, addr)
"""

UDP_ECHO_CLIENT = """
import socket, sys, time, statistics
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
rtts = []
for i in range(25):
    t = time.perf_counter(); s.sendto(b"x%d" % i, (sys.argv[1], 9977))
    try:
        s.recvfrom(64)
    except socket.timeout:
        continue
    rtts.append(time.perf_counter() - t); time.sleep(0.1)
# The fastest echo: the delay line holds every packet at least its delay, and what a busy host adds (this client's
# and the server's wake-ups, at normal priority unlike the delay line) only ever adds. A median moved by 6 ms
# here under CI's load; a wrong or missing delay moves every sample, the fastest too.
print("rtt", min(rtts[3:]) if len(rtts) > 3 else -1, "median", statistics.median(rtts[3:]) if len(rtts) > 3 else -1)
"""


TCP_SINK = """
import socket
s = socket.create_server(("0.0.0.0", 9978))
c, _ = s.accept()
while c.recv(1 << 16):
    pass
"""

TCP_SOURCE = """
import socket, sys
c = socket.create_connection((sys.argv[1], 9978))
while True:
    c.sendall(bytes(1 << 16))
"""


@pytest.mark.slow
def test_rtt_between_containers_is_the_sum_of_four_one_way_delays(worker_image, engine, tmp_path, tracked,
                                                                   root_with_delay_line):
    from distro_bench.net import tcpprobe
    from distro_bench.net.ns import NetnsRef
    from distro_bench.net.shaping import read_qdiscs

    b = userspace(delayed("10ms", "20ms"), tmp_path)
    tracked.append(b)
    with b:
        expected = 0.010 + 0.020 + 0.020 + 0.010
        tol = 0.001 + 0.05 * expected
        # From the host, inside node0's namespace (the same path as the workers' traffic).
        # The fastest of 20 handshakes (issue 38: no wall-clock figure from one sample, nor a mean or median that
        # late wake-ups on a busy host move): the delay is a floor every sample sits on, and a host's load only
        # adds to it, so the fastest sample is the delay line's own figure; a wrong delay moves every sample.
        rtt = tcpprobe.rtt(NetnsRef(path=f"/proc/{b.pids[0]}/ns/net"), NetnsRef(path=f"/proc/{b.pids[1]}/ns/net"),
                           b.addresses[1], count=20, interval_s=0.2)
        got = min(rtt.samples) if rtt.samples else None
        print(f"TCP handshake RTT node0 -> node1: fastest {got * 1e3 if got else float('nan'):.2f} ms, median "
              f"{statistics.median(rtt.samples) * 1e3 if rtt.samples else float('nan'):.2f} ms, "
              f"expected {expected * 1e3:.0f} ms")
        assert got is not None and abs(got - expected) <= tol, (got, expected)
        # From inside the worker containers, as a worker (no NET_RAW: UDP echo, not ping).
        server = engine.api.exec_create(b.containers[1].id, [b.python(), "-c", UDP_ECHO_SERVER])
        engine.api.exec_start(server["Id"], detach=True)
        time.sleep(1.0)
        rc, out = exec_as_worker(engine, b.containers[0].id, [b.python(), "-c", UDP_ECHO_CLIENT, b.addresses[1]])
        udp = float(out.split()[1])
        print(f"UDP echo RTT worker0 -> worker1: fastest {udp * 1e3:.2f} ms ({out.strip()})")
        assert rc == 0 and abs(udp - expected) <= tol, out

        # The rate shaping is still there, on the interface the worker uses, and recorded.
        qd = read_qdiscs(NetnsRef(path=f"/proc/{b.pids[0]}/ns/net"), "eth0")
        tbf = [q for q in qd if q["kind"] == "tbf"]
        assert tbf and int(tbf[0]["options"]["rate"]) * 8 == 20_000_000
        desc = b.describe()
        assert desc["link_engine"] == "userspace" and desc["topology"]["delay_line"]
        for node, d in zip(desc["nodes"], (0.010, 0.020)):
            line = node["applied"]["delay_line"]
            assert line["up"]["delay_s"] == line["down"]["delay_s"] == d
            assert line["interfaces"] == ["a", "b"] and line["namespace"].startswith("/proc/")
            assert node["applied"]["up"]["iface"] == "eth0" and node["applied"]["down"]["iface"] == node["host_veth"]
        assert all(line.running() for line in b.emulation.delay_lines.values())
        pids = [line.pid for line in b.emulation.delay_lines.values()]
    # Teardown stopped the lines before the containers went.
    assert not [p for p in pids if Path(f"/proc/{p}").exists()]
    assert b.teardown_problems == []


@pytest.mark.slow
def test_worker_cannot_touch_the_delay_line_or_the_shaping(worker_image, engine, tmp_path, tracked,
                                                           root_with_delay_line):
    b = userspace(delayed("5ms", "5ms"), tmp_path)
    tracked.append(b)
    with b:
        c = b.containers[0].id
        for argv in (["ip", "link", "set", "dev", "a", "down"], ["ip", "link", "set", "dev", "b", "nomaster"],
                     ["ip", "addr", "add", "172.31.0.9/24", "dev", "b"],
                     ["tc", "qdisc", "del", "dev", "eth0", "root"]):
            rc, out = exec_as_worker(engine, c, argv)
            assert rc != 0 and "Operation not permitted" in out, (argv, out)
        # No raw sockets (NET_RAW is dropped), so no sending around the line on `b`; and the
        # forwarder, a host process, is not visible from the container.
        rc, out = exec_as_worker(engine, c, [b.python(), "-c", (
            "import socket, errno, os\n"
            "try:\n"
            "    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)\n"
            "except OSError as e:\n"
            "    print('errno', e.errno == errno.EPERM)\n"
            "print('procs', [open(f'/proc/{p}/cmdline').read() for p in os.listdir('/proc') if p.isdigit()])\n")])
        assert "errno True" in out and "delayline" not in out, out
        assert all(line.running() for line in b.emulation.delay_lines.values())


def test_failed_setup_after_the_splice_stops_every_line(worker_image, engine, tmp_path, tracked, monkeypatch,
                                                        root_with_delay_line):
    from distro_bench.net.emulation import Emulation

    real = Emulation._start_delay_lines

    def start_then_fail(self):
        real(self)
        assert len(our_delay_lines()) == 2
        raise HarnessError("injected after the delay lines started")

    monkeypatch.setattr(Emulation, "_start_delay_lines", start_then_fail)
    b = userspace(delayed("5ms", "5ms"), tmp_path)
    tracked.append(b)
    with pytest.raises(HarnessError, match="injected"):
        with b:
            pass
    assert our_delay_lines() == [] and ours(engine, b.run_id) == []


def test_ctrl_c_stops_the_lines_and_gives_docker_its_eth0_back(worker_image, engine, tmp_path, tracked,
                                                               root_with_delay_line):
    from distro_bench.net.ns import NetnsRef, run_in

    b = userspace(delayed("5ms", "5ms"), tmp_path)
    tracked.append(b)
    with pytest.raises(KeyboardInterrupt):
        with b:
            ns = NetnsRef(path=f"/proc/{b.pids[0]}/ns/net")
            names = {x["ifname"] for x in json.loads(run_in(ns, ["ip", "-j", "link", "show"]).stdout)}
            assert {"eth0", "a", "b"} <= names
            # Undo alone (the containers still running): Docker's interface is eth0 again.
            b.teardown_problems += b._stop_delay_lines()
            after = {x["ifname"]: x for x in json.loads(run_in(ns, ["ip", "-j", "link", "show"]).stdout)}
            assert "a" not in after and "b" not in after and after["eth0"]["address"] == mac_of(b, 0)
            raise KeyboardInterrupt
    assert b.teardown_problems == []
    assert our_delay_lines() == [] and ours(engine, b.run_id) == []


def mac_of(b: DockerBackend, rank: int) -> str:
    return b.containers[rank].attrs["NetworkSettings"]["Networks"][b.network.name]["MacAddress"]


@pytest.mark.slow
def test_run_end_to_end_with_delay_on_docker(worker_image, engine, write_scenario, tmp_path, root_with_delay_line):
    out = tmp_path / "results"
    scen = write_scenario(delayed("5ms", "5ms", rate="50Mbit", jitter="1ms", loss="0.1%"))
    proc = subprocess.run([sys.executable, "-m", "distro_bench", "run", str(scen), "--backend", "docker",
                           "--link-engine", "userspace", "--steps", "4", "--out", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    env = json.loads((run_dir / "environment.json").read_text())
    net = env["network"]
    assert net["backend"] == "docker" and net["link_engine"] == "userspace" and not net["not_emulated"]
    for node in net["nodes"]:
        line = node["applied"]["delay_line"]
        assert line["up"]["delay_s"] == 0.005 and line["up"]["jitter_s"] == 0.001 and line["up"]["loss"] == 0.001
        stats = json.loads((run_dir / "net" / f"delayline-{node['name']}.stats.json").read_text())
        assert stats["a_to_b"]["frames_out"] > 0 and stats["b_to_a"]["frames_out"] > 0
    s = json.loads((run_dir / "summary.json").read_text())["optimizers"]["adamw"]
    assert s["steps"] == 4 and s["wire_tx_bytes_per_step"] and s["wire_rx_bytes_per_step"]
    assert s["wire_tx_bytes_per_step"] > 0.95 * s["payload_tx_bytes_per_step"]
    print(f"step time with 4 x 5 ms per round trip: {s['step_time_s_mean']:.3f} s")
    assert not ours(engine, net["run_id"])
    assert delay_lines_of(None) == []


@pytest.mark.slow
def test_clean_after_a_killed_run_gives_docker_its_eth0_back(worker_image, engine, tmp_path, tracked,
                                                             root_with_delay_line):
    from distro_bench.backends.docker import remove_labelled

    b = userspace(delayed("5ms", "5ms"), tmp_path)
    tracked.append(b)
    b.setup()
    try:
        veths = set(b.host_veths)
        assert veths <= root_veths()
        # Traffic between the nodes, as training makes (with it, Docker's cleanup leaks otherwise).
        server = engine.api.exec_create(b.containers[1].id, [b.python(), "-c", TCP_SINK])
        engine.api.exec_start(server["Id"], detach=True)
        time.sleep(1.0)
        client = engine.api.exec_create(b.containers[0].id, [b.python(), "-c", TCP_SOURCE, b.addresses[1]])
        engine.api.exec_start(client["Id"], detach=True)
        time.sleep(2.0)
        assert engine.api.exec_inspect(client["Id"])["Running"]
        # As if the harness had been killed: the lines die with it, the splices and containers stay.
        for line in b.emulation.delay_lines.values():
            line.stop()
        removed, problems = remove_labelled(engine, b.run_id)  # what `distro-bench clean` does
        assert problems == [] and len(removed) == 3
        deadline = time.monotonic() + 10
        while veths & root_veths() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not veths & root_veths()
    finally:
        b.teardown()
