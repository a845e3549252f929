"""Each host's real network to its peers, measured after shaping: TCP handshake RTT to every peer and one
stream's goodput to the next host (i -> i+1 mod N, all at once: every uplink and downlink carries exactly
one stream, so they do not compete). Real links add their own delay and limits to the emulated ones;
environment.json records both. Pure sockets (harness/distro_bench/net/tcpprobe.py), no ping or iperf3.
"""

from __future__ import annotations

import json
import socket
import statistics
import time

from distro_bench.multihost.store import AgentStore
from distro_bench.net.ns import NetnsRef
from distro_bench.net.tcpprobe import Listener, _receive, _send_until, connect_time

HERE = NetnsRef.current()


def _sink(conn: socket.socket) -> None:
    """Counts a stream until EOF, then answers with what it measured (JSON) and closes."""
    out: dict = {}
    try:
        _receive(conn, time.monotonic(), float(conn.recv(8).decode() or 0.5), out)
        conn.sendall(json.dumps(out).encode())
    except OSError:
        pass
    finally:
        conn.close()


class Probes:
    """This host's two listeners: handshakes (RTT) and a byte sink (goodput)."""

    def __init__(self, addr: str):
        self.addr = addr
        self.rtt = Listener(HERE, addr)
        self.sink = Listener(HERE, addr, _sink)

    def __enter__(self) -> Probes:
        self.rtt.__enter__()
        self.sink.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.sink.__exit__(*exc)
        self.rtt.__exit__(*exc)

    def endpoint(self) -> dict:
        return {"addr": self.addr, "rtt_port": self.rtt.port, "sink_port": self.sink.port}


def rtt_to(addr: str, port: int, count: int = 5) -> float | None:
    samples = [t for t in (connect_time(HERE, addr, port, timeout_s=3.0) for _ in range(count)) if t is not None]
    return statistics.median(samples) if samples else None


def goodput_to(addr: str, port: int, seconds: float = 2.0, omit_s: float = 0.5) -> float | None:
    """Bit/s of one stream to a peer's sink, counted by the receiver after `omit_s`."""
    s = socket.create_connection((addr, port), timeout=10)
    try:
        s.sendall(f"{omit_s:<8}".encode()[:8])
        _send_until(s, time.monotonic() + omit_s + seconds)
        s.settimeout(omit_s + seconds + 30)
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        out = json.loads(data or b"{}")
    except (OSError, ValueError):
        return None
    finally:
        s.close()
    return out["bytes"] * 8 / out["span_s"] if out.get("span_s") else None


def measure_peers(st: AgentStore, addr: str, me: int, n: int) -> dict:
    """Every host at once, in step through the agents' store: RTT to each peer, then goodput to the next host."""
    measured: dict = {"rtt_s": {}, "goodput_bps": {}}
    with Probes(addr) as probes:
        st.set_json(f"probe/{me}", probes.endpoint())
        st.wait_keys([f"probe/{i}" for i in range(n)], "every host's probe listeners")
        peers = {i: st.get_record(f"probe/{i}", {"addr": str, "rtt_port": int, "sink_port": int})
                 for i in range(n) if i != me}
        st.barrier("rtt")
        for i, p in peers.items():
            measured["rtt_s"][str(i)] = rtt_to(p["addr"], p["rtt_port"])
        st.barrier("goodput")
        nxt = (me + 1) % n
        measured["goodput_bps"][str(nxt)] = goodput_to(peers[nxt]["addr"], peers[nxt]["sink_port"])
        st.barrier("measured")
    return measured
