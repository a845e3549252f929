"""A `node` run's stores, probed from another host (issue 51, item 1): every socket a host of the run listens
on is bound to its own address (none on `*`), and from a third namespace on the same switch, with no secret,
the agents' store serves no read and takes no write (a TCPStore client, a client with another secret), while
the run goes on and completes. Hosts are namespaces on one bridge, as in test_multihost.py."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from distro_bench.net.ns import NetnsRef, run_in
from tests.helpers import free_port
from tests.integration.netns.test_multihost import hosts, logs, run_folder, scenario, start_agents  # noqa: F401

pytestmark = [pytest.mark.root, pytest.mark.slow]

WILDCARDS = ("*", "0.0.0.0", "[::]", "::", "[::ffff:0.0.0.0]")

# Run in the attacker's namespace: connect to the agents' store as a TCPStore client and as our own client with
# a wrong secret; try to read `run` and set `abort`. Prints one line per attempt: what happened.
ATTACK = r"""
import sys
from datetime import timedelta
host, port = sys.argv[1], int(sys.argv[2])
try:
    from torch.distributed import TCPStore
    s = TCPStore(host, port, is_master=False, timeout=timedelta(seconds=5))
    try:
        print("tcpstore read:", s.get("run")[:40])
    except Exception as e:
        print("tcpstore read refused:", type(e).__name__)
    try:
        s.set("abort", '{"node_rank": 1, "kind": "failed", "message": "attacker"}')
        print("tcpstore write: accepted")
    except Exception as e:
        print("tcpstore write refused:", type(e).__name__)
except Exception as e:
    print("tcpstore connect refused:", type(e).__name__)
from distro_bench.multihost.channel import ChannelError, StoreClient
try:
    c = StoreClient(host, port, b"x" * 64, 5)
    print("wrong-secret client: connected")
    print("wrong-secret read:", c.get("run")[:40])
except ChannelError as e:
    print("wrong-secret client refused:", e)
"""


def _listeners(ns: NetnsRef) -> list[tuple[str, str]]:
    """(local address, process) of every listening TCP socket in `ns`."""
    out = run_in(ns, ["ss", "-Hltnp"], check=False).stdout
    rows = []
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 4:
            addr = cols[3].rsplit(":", 1)[0]
            rows.append((addr, " ".join(cols[5:])))
    return rows


def test_a_node_runs_stores_listen_on_its_address_and_refuse_a_stranger(hosts, tmp_path):  # noqa: F811
    if subprocess.run(["ss", "-V"], capture_output=True).returncode != 0:
        pytest.skip("no `ss` (iproute2) to read the listening sockets")
    scen = scenario(tmp_path, 2)
    star = hosts(3)  # hosts 0 and 1 run; the third namespace is a stranger on the same switch
    outs = [tmp_path / "out0", tmp_path / "out1"]
    port = free_port()
    addr0, stranger = star.spec.nodes[0].addr, NetnsRef.named(star.spec.nodes[2].ns)
    procs = start_agents(star, scen, outs, port, "--ship-records", nodes=2)
    seen: dict[int, set[tuple[str, str]]] = {0: set(), 1: set()}
    attack = ""
    try:
        deadline = time.monotonic() + 900
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            for i in (0, 1):
                seen[i].update(_listeners(NetnsRef.named(star.spec.nodes[i].ns)))
            if not attack and any(a == addr0 for a, _ in seen[0]) and len(seen[0]) >= 2:
                attack = subprocess.run(stranger.wrap([sys.executable, "-c", ATTACK, addr0, str(port + 1)]),
                                        capture_output=True, text=True, timeout=120,
                                        env=_env()).stdout
            time.sleep(0.5)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    assert [p.returncode for p in procs] == [0, 0], logs(tmp_path)
    # Host 0 served both stores and its workers' (torchrun's threads show as pt_elastic); every socket of the run
    # was bound to the host's own address. Nothing else runs in these namespaces.
    ours = seen
    assert any(a == addr0 for a, _ in ours[0]), seen
    for i, rows in ours.items():
        wild = [r for r in rows if r[0] in WILDCARDS]
        assert not wild, f"host {i} listened on every address: {wild}"
        assert {a for a, _ in rows} <= {star.spec.nodes[i].addr, "127.0.0.1"}, rows
    # The stranger read nothing and wrote nothing, and said so line by line.
    assert attack, "the stranger never got to try (host 0 never listened?)"
    assert "tcpstore read:" not in attack and "tcpstore write: accepted" not in attack, attack
    assert "wrong-secret client refused" in attack and "wrong-secret read:" not in attack, attack
    log0 = (tmp_path / "agent0.log").read_text()
    assert "does not hold this run's secret" in log0, log0[-3000:]
    folder = run_folder(outs[0])
    assert (folder / "summary.json").is_file()


def _env() -> dict[str, str]:
    import os

    from tests.helpers import REPO

    return {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO / "harness") + ":" + str(REPO)}
