"""Measuring emulated links against their spec: iperf3 goodput up and down against a far end on the
switch, and ping RTT where delay is emulated (to the far end, and node to node).

Backend-neutral: a `LinkTarget` is a namespace reference, an address and the two `Direction`s, so
the netns and Docker backends (and the delay-line tests) measure the same way.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import time
from dataclasses import dataclass

from harness.errors import HarnessError
from harness.net.shaping import Direction
from harness.net.ns import NetnsRef, run

IPERF_PORT = 5201
# Goodput is TCP payload, the rate counts Ethernet frames: 1448 of 1514 bytes (95.6%) is the ceiling.
GOODPUT_RANGE = (0.90, 1.02)
RTT_ABS_TOL_S = 0.001
RTT_REL_TOL = 0.05


@dataclass(frozen=True)
class LinkTarget:
    name: str
    ns: NetnsRef
    addr: str
    up: Direction
    down: Direction
    emulated_delay: bool = True  # False when delay was asked for but not emulated (--allow-unemulated)


@dataclass(frozen=True)
class Check:
    node: str
    what: str  # "up goodput", "down goodput", "rtt to switch", "rtt to node1"
    configured: float | None  # bit/s or seconds
    measured: float | None
    unit: str  # "bit/s" | "s"
    status: str  # PASS | FAIL | SKIP
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.configured and self.measured is not None:
            return self.measured / self.configured
        return None


def expected_rtt(a_up: Direction, a_down: Direction, b_up: Direction | None = None,
                 b_down: Direction | None = None) -> float:
    """Mean ping RTT from node A: to the switch far end when B is None, else to node B.
    A -> B crosses A's uplink and B's downlink; the reply B's uplink and A's downlink."""
    if b_up is None or b_down is None:
        return a_up.delay_s + a_down.delay_s
    return a_up.delay_s + b_down.delay_s + b_up.delay_s + a_down.delay_s


def rtt_tolerance(expected_s: float, jitter_sum_s: float = 0.0) -> float:
    """How far a mean RTT may sit from the expected one: 1 ms + 5%, plus a third of the jitters' sum
    (about two standard errors of a 10-ping mean when each hop's jitter is spread evenly)."""
    return RTT_ABS_TOL_S + RTT_REL_TOL * expected_s + jitter_sum_s / 3


def goodput_status(measured: float | None, configured: float, lo: float, hi: float) -> str:
    if measured is None:
        return "FAIL"
    return "PASS" if lo * configured <= measured <= hi * configured else "FAIL"


def start_iperf_server(ns: NetnsRef, addr: str, port: int = IPERF_PORT) -> subprocess.Popen:
    proc = subprocess.Popen(ns.wrap(["iperf3", "-s", "-B", addr, "-p", str(port)]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(0.3)
    if proc.poll() is not None:
        raise HarnessError(f"iperf3 server in {ns} exited: {proc.stderr.read().strip()}")
    return proc


def iperf_goodput(client: NetnsRef, server_addr: str, *, seconds: float, reverse: bool,
                  port: int = IPERF_PORT, omit_s: int = 1, tries: int = 3) -> float:
    """Receiver-side goodput in bit/s of one TCP stream (client -> server, or server -> client with
    reverse). The first `omit_s` seconds (slow start, the token bucket's initial burst) are left out."""
    argv = ["iperf3", "-c", server_addr, "-p", str(port), "-t", f"{seconds:g}", "-O", str(omit_s), "-J"]
    if reverse:
        argv.append("-R")
    last = ""
    for attempt in range(tries):
        proc = run(client.wrap(argv), check=False, timeout=seconds + omit_s + 30)
        try:
            data = json.loads(proc.stdout)
        except ValueError:
            data = {"error": (proc.stderr or proc.stdout).strip()[:300]}
        if "error" not in data:
            return float(data["end"]["sum_received"]["bits_per_second"])
        last = data["error"]
        time.sleep(0.5 * (attempt + 1))  # the server may still be finishing the previous test
    raise HarnessError(f"iperf3 from {client} to {server_addr} failed: {last}")


_RTT_RE = re.compile(r"= [\d.]+/([\d.]+)/[\d.]+/[\d.]+ ms")


def ping_rtt(client: NetnsRef, addr: str, *, count: int = 10, interval_s: float = 0.2) -> float | None:
    """Mean RTT in seconds, or None when no reply came back. One unmeasured ping first: the first packet
    to a new neighbour waits for ARP, which is not the link's latency."""
    run(client.wrap(["ping", "-n", "-q", "-c", "1", "-W", "3", addr]), check=False, timeout=15)
    proc = run(client.wrap(["ping", "-n", "-q", "-c", str(count), "-i", f"{interval_s:g}", "-W", "3", addr]),
               check=False, timeout=count * interval_s + 15)
    m = _RTT_RE.search(proc.stdout)
    return float(m.group(1)) / 1000 if m else None


def measure(targets: list[LinkTarget], far_end: NetnsRef, far_addr: str, *, seconds: float = 5.0,
            goodput_range: tuple[float, float] = GOODPUT_RANGE, ping_count: int = 10,
            on_check=None) -> list[Check]:
    """Every rate-limited direction's goodput, then RTTs where delay is emulated. Tests run one at a
    time (a shared CPU and one iperf3 server); `on_check` sees each result as it comes."""
    lo, hi = goodput_range
    checks: list[Check] = []

    def add(c: Check) -> None:
        checks.append(c)
        if on_check:
            on_check(c)

    server = start_iperf_server(far_end, far_addr)
    try:
        for t in targets:
            for what, d, reverse in (("up goodput", t.up, False), ("down goodput", t.down, True)):
                if not d.rate_bps:
                    add(Check(t.name, what, None, None, "bit/s", "SKIP", "unshaped"))
                    continue
                got = iperf_goodput(t.ns, far_addr, seconds=seconds, reverse=reverse)
                note = f"pass: {lo:.0%}-{hi:.0%} of the rate"
                if got < lo * d.rate_bps:
                    # A busy CPU only ever lowers goodput (a late sender), never raises it: measure
                    # once more and keep the better figure, saying so.
                    got = max(got, iperf_goodput(t.ns, far_addr, seconds=seconds, reverse=reverse))
                    note += " (best of 2)"
                add(Check(t.name, what, float(d.rate_bps), got, "bit/s", goodput_status(got, d.rate_bps, lo, hi), note))
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    for i, t in enumerate(targets):
        pairs = [("rtt to switch", far_addr, expected_rtt(t.up, t.down), t.up.jitter_s + t.down.jitter_s, True)]
        if len(targets) > 1:
            b = targets[(i + 1) % len(targets)]
            pairs.append((f"rtt to {b.name}", b.addr, expected_rtt(t.up, t.down, b.up, b.down),
                          t.up.jitter_s + t.down.jitter_s + b.up.jitter_s + b.down.jitter_s, b.emulated_delay))
        for what, addr, expected, jitter, b_emulated in pairs:
            if expected == 0:
                continue  # no delay asked for: nothing to compare with but the host's own latency
            if not (t.emulated_delay and b_emulated):
                add(Check(t.name, what, expected, None, "s", "SKIP", "delay not emulated"))
                continue
            got = ping_rtt(t.ns, addr, count=ping_count)
            tol = rtt_tolerance(expected, jitter)
            ok = got is not None and abs(got - expected) <= tol
            add(Check(t.name, what, expected, got, "s", "PASS" if ok else "FAIL", f"pass: ±{tol * 1e3:.1f} ms"))
    return checks


def passed(checks: list[Check]) -> bool:
    return all(c.status != "FAIL" for c in checks)


def fmt_value(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "s":
        return f"{v * 1e3:.2f} ms"
    if v >= 1e9:
        return f"{v / 1e9:.3g} Gbit/s"
    if v >= 1e6:
        return f"{v / 1e6:.3g} Mbit/s"
    return f"{v / 1e3:.3g} kbit/s" if not math.isnan(v) else "-"
