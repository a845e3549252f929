"""Measure a changing link against its schedule or trace (issue 18): `distro-bench links --schedule` and
benchmarks/link_schedule.py.

One node's direction is saturated by one TCP stream to (or from) the far end on the switch for the
whole schedule, while the same scheduler a run uses (harness/distro_bench/net/netchange.py) applies the changes on a
clock that starts with the stream. Every `window_s` the egress interface's tx byte counter is read
(the bytes tbf let through, Ethernet headers included, the unit tbf's rate is in) and the receiver's
payload bytes are counted (goodput). Each window is compared with the rate the schedule or trace
asked for over that window; each change's lateness comes from the scheduler's own events rows.
"""

from __future__ import annotations

import math
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from distro_bench.net.netchange import ChangeScheduler
from distro_bench.net.ns import NetnsRef, entered
from distro_bench.net.tcpprobe import Listener, _socket
from distro_bench.scenario.trace import load_trace


@dataclass
class ScheduleMeasurement:
    window_s: float
    wire_bps: list[float]  # egress frames per window, bit/s
    goodput_bps: list[float]  # receiver payload per window, bit/s
    expected_bps: list[float]  # the rate asked for, averaged over each window
    events: list[dict] = field(default_factory=list)

    def lateness_s(self) -> list[float]:
        return [e["t_s"] - e["scheduled_s"] for e in self.events if e["kind"] in ("schedule", "trace", "outage",
                                                                                   "restore")]

    def ratios(self, skip_after_change: int = 1) -> list[tuple[int, float, float]]:
        """(window, wire/expected, goodput/expected) for windows that do not straddle a change (the window a
        change falls in, and `skip_after_change` more for TCP to settle, are left out)."""
        out = []
        changes = [i for i in range(1, len(self.expected_bps)) if self.expected_bps[i] != self.expected_bps[i - 1]]
        for i, exp in enumerate(self.expected_bps):
            if i == 0 or any(c - 1 <= i <= c + skip_after_change for c in changes) or not exp:
                continue
            out.append((i, self.wire_bps[i] / exp, self.goodput_bps[i] / exp))
        return out

    def correlation(self) -> float:
        return pearson(self.wire_bps[1:], self.expected_bps[1:])

    def total_ratio(self) -> float:
        return sum(self.wire_bps[1:]) / sum(self.expected_bps[1:])


def pearson(a: list[float], b: list[float]) -> float:
    n = len(a)
    ma, mb = sum(a) / n, sum(b) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    va, vb = math.sqrt(sum((x - ma) ** 2 for x in a)), math.sqrt(sum((y - mb) ** 2 for y in b))
    return cov / (va * vb) if va and vb else float("nan")


def _tx_bytes(ns: NetnsRef, iface: str) -> int:
    with entered(ns):
        with open("/proc/thread-self/net/dev") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == iface:
                    return int(rest.split()[8])
    raise RuntimeError(f"[{ns}] no interface {iface}")


def expected_series(timeline, rank: int, direction: str, base_bps: int | None, seconds: float,
                    window_s: float) -> list[float]:
    """The rate the timeline asks of one node direction, averaged over each window (traces included)."""
    n = int(seconds / window_s)
    trace = next((t for t in timeline.traces if t.rank == rank and t.direction == direction), None)
    if trace is not None:
        res = trace.resolution_s
        w = load_trace(trace.path).windows(res)
        per = max(1, round(window_s / res))
        return [sum(w[(i * per + k) % len(w)] for k in range(per)) / per for i in range(n)]
    steps = [(0.0, base_bps)]
    for c in timeline.changes:
        if c.rank == rank and c.kind == "schedule" and direction in c.directions and c.at_s is not None:
            steps.append((c.at_s, getattr(c.link, direction)))
    out = []
    for i in range(n):
        a, b = i * window_s, (i + 1) * window_s
        total = 0.0
        for j, (t, r) in enumerate(steps):
            end = steps[j + 1][0] if j + 1 < len(steps) else math.inf
            lo, hi = max(a, t), min(b, end)
            if hi > lo:
                total += (r or 0) * (hi - lo)
        out.append(total / window_s)
    return out


def measure_schedule(backend, timeline, *, rank: int = 0, direction: str = "up", seconds: float = 90.0,
                     window_s: float = 1.0) -> ScheduleMeasurement:
    """Saturate `rank`'s `direction` for `seconds` while its schedule plays; see the module docstring."""
    em = backend.emulation
    node_ns = em.endpoints[rank].up_ns
    far_ns, far_addr = backend.far_end()
    egress_ns, egress_iface = em.endpoints[rank].egress(direction)
    base = em._node_plan(rank).direction(direction).spec.rate_bps
    received = [0]
    stop = threading.Event()
    chunk = b"\0" * 65536

    def sink(conn: socket.socket) -> None:
        buf = bytearray(262144)
        try:
            if direction == "up":
                while not stop.is_set():
                    n = conn.recv_into(buf)
                    if not n:
                        break
                    received[0] += n
            else:
                while not stop.is_set():
                    conn.sendall(chunk)
        except OSError:
            pass
        finally:
            conn.close()

    with tempfile.TemporaryDirectory(prefix="dbench-schedtest-") as tmp, Listener(far_ns, far_addr, sink) as lst:
        s = _socket(node_ns)
        s.connect((far_addr, lst.port))
        sender = None
        if direction == "up":
            def send() -> None:
                try:
                    while not stop.is_set():
                        s.sendall(chunk)
                except OSError:
                    pass
            sender = threading.Thread(target=send, daemon=True)
        else:
            def recv() -> None:
                buf = bytearray(262144)
                try:
                    while not stop.is_set():
                        n = s.recv_into(buf)
                        if not n:
                            break
                        received[0] += n
                except OSError:
                    pass
            sender = threading.Thread(target=recv, daemon=True)
        sched = ChangeScheduler(timeline, em, Path(tmp), "links", 0)
        t0 = time.time()
        # The scheduler's clock starts as a run's would: at rank 0's first step, here the stream's start.
        (Path(tmp) / "rank0.hb").write_text(f"0 compute {t0:.3f}\n")
        sched.start()
        sender.start()
        wire, good = [], []
        last_tx, last_rx = _tx_bytes(egress_ns, egress_iface), received[0]
        mono0 = time.monotonic()
        n = int(seconds / window_s)
        try:
            for i in range(n):
                time.sleep(max(0.0, mono0 + (i + 1) * window_s - time.monotonic()))
                tx, rx = _tx_bytes(egress_ns, egress_iface), received[0]
                wire.append((tx - last_tx) * 8 / window_s)
                good.append((rx - last_rx) * 8 / window_s)
                last_tx, last_rx = tx, rx
        finally:
            stop.set()
            events = sched.stop()
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
            sender.join(timeout=5)
    return ScheduleMeasurement(window_s=window_s, wire_bps=wire, goodput_bps=good,
                               expected_bps=expected_series(timeline, rank, direction, base, n * window_s, window_s),
                               events=events)
