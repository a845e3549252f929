"""Measuring emulated links against their spec: goodput up and down against a far end on the switch
(iperf3 where installed, else the built-in Python TCP probe; each Check says which measured), and RTT
where delay is emulated (to the far end, and node to node) as TCP handshake times (harness/distro_bench/net/tcpprobe.py).

Backend-neutral: a `LinkTarget` is a namespace reference, an address and the two `Direction`s, so
the netns and Docker backends (and the delay-line tests) measure the same way.

Sites (nodes behind one shared uplink, harness/distro_bench/scenario/sites.py): each node is measured alone (against
the lower of its access link and its site's uplink: the far end is beyond both), then all nodes of a site at once
(`measure_sites`): together they get the site's rate, each about its share.
"""

from __future__ import annotations

import functools
import json
import math
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from distro_bench.errors import HarnessError
from distro_bench.net import tcpprobe
from distro_bench.net.delayline.schedule import QUEUE_LIMIT_BYTES
from distro_bench.net.engines import NetworkPlan
from distro_bench.net.ns import NetnsRef, run
from distro_bench.net.shaping import FRAME_BYTES, Direction
from distro_bench.scenario.units import format_rate

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
    region: str | None = None
    # Extra one-way delay (and its jitter) of this node's uplink by destination address: the path to another region.
    pair_delay_s: tuple[tuple[str, float], ...] = ()
    pair_jitter_s: tuple[tuple[str, float], ...] = ()
    # The site whose uplink this node shares, and that uplink's two directions (rate, one-way delay).
    site: str | None = None
    site_up: Direction | None = None
    site_down: Direction | None = None

    def rate_to_far_end(self, direction: str) -> int | None:
        """The configured rate towards (up) or from (down) the far end on the switch: the lower of the access link's
        and, behind a site, the site uplink's (None: unshaped)."""
        rates = [d.rate_bps for d in (getattr(self, direction), getattr(self, f"site_{direction}")) if d is not None]
        shaped = [r for r in rates if r]
        return min(shaped) if shaped else None

    @property
    def site_delay_s(self) -> float:
        """The site uplink's one-way delays, up and down: what a round trip to the far end adds behind a site."""
        return sum(d.delay_s for d in (self.site_up, self.site_down) if d is not None)

    def delay_to(self, addr: str) -> float:
        return dict(self.pair_delay_s).get(addr, 0.0)

    def jitter_to(self, addr: str) -> float:
        return dict(self.pair_jitter_s).get(addr, 0.0)


@dataclass(frozen=True)
class Check:
    node: str
    what: str  # "up goodput", "down goodput", "rtt to switch", "rtt to node1"
    configured: float | None  # bit/s or seconds
    measured: float | None
    unit: str  # "bit/s" | "s"
    status: str  # PASS | FAIL | SKIP
    note: str = ""
    tool: str = ""  # what measured: "iperf3", "python-tcp" (goodput), "tcp-handshake" (RTT)

    @property
    def ratio(self) -> float | None:
        if self.configured and self.measured is not None:
            return self.measured / self.configured
        return None


def expected_rtt(a_up: Direction, a_down: Direction, b_up: Direction | None = None,
                 b_down: Direction | None = None) -> float:
    """Mean RTT from node A: to the switch far end when B is None, else to node B.
    A -> B crosses A's uplink and B's downlink; the reply B's uplink and A's downlink."""
    if b_up is None or b_down is None:
        return a_up.delay_s + a_down.delay_s
    return a_up.delay_s + b_down.delay_s + b_up.delay_s + a_down.delay_s


def pair_rtt(a: LinkTarget, b: LinkTarget) -> float:
    """Mean RTT from node A to node B: both access links each way, plus the region path each way,
    up_a + d(a, b) + down_b + up_b + d(b, a) + down_a."""
    return expected_rtt(a.up, a.down, b.up, b.down) + a.delay_to(b.addr) + b.delay_to(a.addr)


def pair_tolerance(expected_s: float, jitter_sum_s: float = 0.0) -> float:
    """How far a node-to-node RTT across regions may sit from the expected one: 5%, never below 1 ms (a
    sub-ms pair is within the host's own latency), plus a third of the jitters' sum as in rtt_tolerance."""
    return max(RTT_REL_TOL * expected_s, RTT_ABS_TOL_S) + jitter_sum_s / 3


def rtt_tolerance(expected_s: float, jitter_sum_s: float = 0.0) -> float:
    """How far a mean RTT may sit from the expected one: 1 ms + 5%, plus a third of the jitters' sum
    (about two standard errors of a 10-sample mean when each hop's jitter is spread evenly)."""
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
        err = proc.stderr.read().strip() if proc.stderr is not None else ""  # a pipe, as asked above
        raise HarnessError(f"iperf3 server in {ns} exited: {err}")
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


GOODPUT_TOOLS = ("auto", "iperf3", "python")


def goodput_tool(requested: str = "auto") -> str:
    """`iperf3` when requested or (auto) installed, else `python-tcp`, the built-in probe."""
    if requested not in GOODPUT_TOOLS:
        raise HarnessError(f"goodput tool {requested!r}: one of {', '.join(GOODPUT_TOOLS)}")
    if requested == "iperf3" or (requested == "auto" and shutil.which("iperf3")):
        return "iperf3"
    return "python-tcp"


def tcp_rtt(client: NetnsRef, server: NetnsRef, addr: str, *, count: int = 10, interval_s: float = 0.2) -> float | None:
    """Median RTT in seconds (TCP handshakes to a listener at `addr` in `server`), or None when none completed."""
    return tcpprobe.rtt(client, server, addr, count=count, interval_s=interval_s).median_s


def measure(targets: list[LinkTarget], far_end: NetnsRef, far_addr: str, *, seconds: float = 5.0,
            goodput_range: tuple[float, float] = GOODPUT_RANGE, ping_count: int = 10,
            tool: str = "auto", on_check=None) -> list[Check]:
    """Every rate-limited direction's goodput, then RTTs where delay is emulated. Tests run one at a
    time (a shared CPU and one server); `on_check` sees each result as it comes. `tool`: auto (iperf3
    where installed, else the Python TCP probe), iperf3 or python."""
    lo, hi = goodput_range
    checks: list[Check] = []
    used = goodput_tool(tool)

    def add(c: Check) -> None:
        checks.append(c)
        if on_check:
            on_check(c)

    def goodput(t: LinkTarget, reverse: bool) -> float:
        if used == "iperf3":
            return iperf_goodput(t.ns, far_addr, seconds=seconds, reverse=reverse)
        got = tcpprobe.tcp_goodput(t.ns, far_end, far_addr, seconds=seconds, reverse=reverse)
        if got is None:
            raise HarnessError(f"python TCP goodput from {t.ns} to {far_addr}: no data came through")
        return got

    shaped = any(d.rate_bps for t in targets for d in (t.up, t.down))
    server = start_iperf_server(far_end, far_addr) if used == "iperf3" and shaped else None
    try:
        for t in targets:
            for what, direction, reverse in (("up goodput", "up", False), ("down goodput", "down", True)):
                rate = t.rate_to_far_end(direction)
                if not rate:
                    add(Check(t.name, what, None, None, "bit/s", "SKIP", "unshaped", tool=used))
                    continue
                got = goodput(t, reverse)
                note = f"pass: {lo:.0%}-{hi:.0%} of the rate" + (f" (alone behind site {t.site})" if t.site else "")
                if got < lo * rate:
                    # A busy CPU only ever lowers goodput (a late sender), never raises it: measure
                    # once more and keep the better figure, saying so.
                    got = max(got, goodput(t, reverse))
                    note += " (best of 2)"
                add(Check(t.name, what, float(rate), got, "bit/s", goodput_status(got, rate, lo, hi), note,
                          tool=used))
    finally:
        if server is not None:
            _stop(server)
    for c in measure_sites(targets, far_end, far_addr, seconds=seconds, goodput_range=goodput_range, tool=used):
        add(c)
    for i, t in enumerate(targets):
        pairs = [("rtt to switch", far_end, far_addr, expected_rtt(t.up, t.down) + t.site_delay_s,
                  t.up.jitter_s + t.down.jitter_s, True)]
        regional = any(x.pair_delay_s for x in targets)
        # With regions every pair is its own path (each pair once); otherwise the ring's next node.
        peers = targets[i + 1:] if regional else [targets[(i + 1) % len(targets)]] if len(targets) > 1 else []
        for b in peers:
            pairs.append((f"rtt to {b.name}", b.ns, b.addr, pair_rtt(t, b),
                          t.up.jitter_s + t.down.jitter_s + b.up.jitter_s + b.down.jitter_s
                          + t.jitter_to(b.addr) + b.jitter_to(t.addr), b.emulated_delay))
        for what, server_ns, addr, expected, jitter, b_emulated in pairs:
            if expected == 0:
                continue  # no delay asked for: nothing to compare with but the host's own latency
            if not (t.emulated_delay and b_emulated):
                add(Check(t.name, what, expected, None, "s", "SKIP", "delay not emulated", tool="tcp-handshake"))
                continue
            rtt = tcp_rtt(t.ns, server_ns, addr, count=ping_count)
            tol = pair_tolerance(expected, jitter) if regional and what != "rtt to switch" else rtt_tolerance(expected, jitter)
            ok = rtt is not None and abs(rtt - expected) <= tol
            add(Check(t.name, what, expected, rtt, "s", "PASS" if ok else "FAIL", f"pass: ±{tol * 1e3:.1f} ms",
                      tool="tcp-handshake"))
    return checks


# All of a site's nodes at once, this many times: the sum's verdict and each node's share are medians over them.
SITE_ROUNDS = 3
# A node's share passes within this range of an even split: the uplink's tree has a leaf per node (equal assured
# rates), so TCP's 95.6% ceiling is the usual figure; the low end leaves room for a busy host's late sender.
SHARE_RANGE = (0.75, 1.05)


def site_groups(targets: list[LinkTarget]) -> dict[str, list[LinkTarget]]:
    """The nodes of each site, in order (sites of one node left out: nothing shares their uplink)."""
    out: dict[str, list[LinkTarget]] = {}
    for t in targets:
        if t.site is not None:
            out.setdefault(t.site, []).append(t)
    return {k: v for k, v in out.items() if len(v) > 1}


def site_share(members: list[LinkTarget], direction: str) -> tuple[float, float] | None:
    """(what the site's nodes get together, each one's even share) in bit/s, towards the far end, all at once:
    the site uplink's rate, or the sum of their access links where that is lower; None where it is unshaped."""
    site = getattr(members[0], f"site_{direction}")
    access = [getattr(t, direction).rate_bps for t in members]
    if site is None or not site.rate_bps:
        return None
    total = float(min(site.rate_bps, sum(access))) if all(access) else float(site.rate_bps)
    return total, total / len(members)


def _at_once(members: list[LinkTarget], far_end: NetnsRef, far_addr: str, *, seconds: float, omit_s: float,
             reverse: bool, tool: str) -> dict[str, float | None]:
    """One TCP stream per node, all at once: node name -> its goodput (None: it failed). iperf3 gets a server per
    node (one takes a single test at a time); python-tcp runs the streams as threads of this process, which at
    1 Gbit in all is this process's CPU more than the link (the sum read 88-90% of 1 Gbit here, iperf3 95%)."""
    jobs: dict[str, Callable[[], float | None]]
    servers = []
    if tool == "iperf3":
        ports = {t.name: IPERF_PORT + 1 + k for k, t in enumerate(members)}
        servers = [start_iperf_server(far_end, far_addr, port) for port in ports.values()]
        jobs = {t.name: functools.partial(iperf_goodput, t.ns, far_addr, seconds=seconds, reverse=reverse,
                                          port=ports[t.name], omit_s=max(1, round(omit_s))) for t in members}
    else:
        jobs = {t.name: functools.partial(tcpprobe.tcp_goodput, t.ns, far_end, far_addr, seconds=seconds,
                                          reverse=reverse, omit_s=omit_s) for t in members}
    try:
        got = _concurrently(jobs)
    finally:
        for server in servers:
            _stop(server)
    return {k: (float(v) if isinstance(v, (int, float)) else None) for k, v in got.items()}


def _stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=5)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def measure_sites(targets: list[LinkTarget], far_end: NetnsRef, far_addr: str, *, seconds: float = 5.0,
                  goodput_range: tuple[float, float] = GOODPUT_RANGE, omit_s: float = 1.0,
                  tool: str = "python-tcp", rounds: int = SITE_ROUNDS) -> list[Check]:
    """Every site's nodes at once, each direction, `rounds` times: a check of their sum (the median of the rounds'
    sums) against the site's rate (the goodput range), and of each node's share (its median) against an even split
    (SHARE_RANGE). `tool`: iperf3 (a server per node) or python-tcp."""
    lo, hi = goodput_range
    checks = []
    label = f"{tool}, all at once"
    for site, members in site_groups(targets).items():
        for direction, reverse in (("up", False), ("down", True)):
            share = site_share(members, direction)
            what = f"{direction} goodput, {len(members)} at once"
            if share is None:
                checks.append(Check(f"site {site}", what, None, None, "bit/s", "SKIP", "site uplink unshaped",
                                    tool=label))
                continue
            total, each = share
            runs = [_at_once(members, far_end, far_addr, seconds=seconds, omit_s=omit_s, reverse=reverse, tool=tool)
                    for _ in range(rounds)]
            sums = [sum(v for v in r.values() if v is not None) for r in runs if all(r.values())]
            summed = statistics.median(sums) if sums else None
            checks.append(Check(f"site {site}", what, total, summed, "bit/s", goodput_status(summed, total, lo, hi),
                                f"pass: {lo:.0%}-{hi:.0%} of the shared rate (median of {rounds} rounds)", tool=label))
            slo, shi = SHARE_RANGE
            for t in members:
                got = [v for r in runs if (v := r[t.name]) is not None]
                mid = statistics.median(got) if got else None
                spread = f"; {min(got) / 1e6:.3g}-{max(got) / 1e6:.3g} Mbit/s" if got else ""
                checks.append(Check(t.name, f"{direction} share of site {site}", each, mid, "bit/s",
                                    goodput_status(mid, each, slo, shi),
                                    f"pass: {slo:.0%}-{shi:.0%} of an even split (median of {rounds} rounds{spread})",
                                    tool=label))
    return checks


def with_sites(targets: list[LinkTarget], plan: NetworkPlan) -> list[LinkTarget]:
    """`targets` (in the plan's node order) with each node's site and, to every node of another site, the extra
    one-way delay of the path: its site's uplink, the WAN path, the other site's downlink."""
    if not plan.sites:
        return targets
    from dataclasses import replace

    pos = {p.rank: i for i, p in enumerate(plan.nodes)}
    out = list(targets)
    for s in plan.sites:
        for r in s.ranks:
            extra = tuple((targets[pos[x]].addr, s.up.spec.delay_s + p.delay_s + other.down.spec.delay_s)
                          for p in s.paths for other in plan.sites if other.name == p.site for x in p.ranks)
            out[pos[r]] = replace(targets[pos[r]], site=s.name, site_up=s.up.spec, site_down=s.down.spec,
                                  pair_delay_s=targets[pos[r]].pair_delay_s + extra)
    return out


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


# ---- a quick measurement for the run folder ---------------------------------------------------------

QUICK_SECONDS = 1.0  # measured span of each goodput test, after QUICK_OMIT_S
QUICK_OMIT_S = 0.5  # slow start and the token bucket's first burst, left out
QUICK_MAX_SECONDS = 3.0
# Receivers see data in bursts of up to 64 KB (GRO): a span must hold many of them for a figure within a few
# percent, so slow links are measured longer (5 Mbit: 1.7 s), up to QUICK_MAX_SECONDS.
QUICK_MIN_BYTES = 1 << 20
QUICK_RTT_COUNT = 5
QUICK_TOOL = "python-tcp goodput, tcp-handshake RTT"


_Result = TypeVar("_Result")


def _concurrently(jobs: Mapping[str, Callable[[], _Result]]) -> dict[str, _Result | Exception]:
    """Run each zero-argument callable in a thread of its own; name -> its result (or the exception it raised)."""
    import threading

    out: dict[str, _Result | Exception] = {}

    def call(name, fn):
        try:
            out[name] = fn()
        except Exception as e:  # one node's failure is that node's record, not the others'
            out[name] = e

    threads = [threading.Thread(target=call, args=(k, fn), daemon=True) for k, fn in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def quick_seconds(rate_bps: float, seconds: float = QUICK_SECONDS) -> float:
    """How long to measure a direction of `rate_bps`: at least `seconds`, long enough for QUICK_MIN_BYTES,
    at most QUICK_MAX_SECONDS."""
    return max(seconds, min(QUICK_MAX_SECONDS, QUICK_MIN_BYTES * 8 / rate_bps))


def measure_nodes(targets: list[LinkTarget], far_end: NetnsRef, far_addr: str, *, seconds: float = QUICK_SECONDS,
                  omit_s: float = QUICK_OMIT_S, rtt_count: int = QUICK_RTT_COUNT) -> dict[str, dict]:
    """What each node's link delivers, for environment.json: node name -> {"up": {"rate_bps"}, "down":
    {"rate_bps"}, "rtt_s", "delay_s" (half the RTT), "tool", ...; with regions also "pair_rtt_s" and
    "pair_rtt_expected_s", peer name -> seconds}. Unlike `measure` (the `links` command's
    pass/fail test) it is quick and judges nothing: every node's uplinks at once, then every downlink,
    then the RTTs (a few seconds in all, whatever the node count; links are independent in the star, and
    training loads them all at once too). Unshaped directions are not measured (their goodput is this
    host's CPU, not a link). A failure is recorded per node as `error`, never raised."""
    out: dict[str, dict] = {t.name: {"up": {}, "down": {}, "tool": QUICK_TOOL, "seconds": seconds,
                                     "concurrent_nodes": len(targets)} for t in targets}
    for direction, reverse in (("up", False), ("down", True)):
        spans = {t.name: quick_seconds(getattr(t, direction).rate_bps, seconds)
                 for t in targets if getattr(t, direction).rate_bps}
        jobs = {t.name: functools.partial(tcpprobe.tcp_goodput, t.ns, far_end, far_addr, seconds=spans[t.name],
                                          reverse=reverse, omit_s=omit_s)
                for t in targets if t.name in spans}
        for name, got in _concurrently(jobs).items():
            if isinstance(got, Exception):
                out[name].setdefault("error", f"{direction} goodput: {type(got).__name__}: {got}")
            elif got is None:
                out[name].setdefault("error", f"{direction} goodput: no data came through")
            else:
                out[name][direction]["rate_bps"] = got
                out[name][direction]["seconds"] = spans[name]
    if any(t.pair_delay_s for t in targets):
        # Regions: each pair's path is its own (up + d(i,j) + down, both ways): every pair measured once, all
        # at once (handshakes are tiny), as `pair_rtt_s` {peer: measured} beside `pair_rtt_expected_s`.
        pairs = {(a.name, b.name): (a, b) for i, a in enumerate(targets) for b in targets[i + 1:]}
        pair_rtts = _concurrently({f"{a.name}|{b.name}": functools.partial(tcpprobe.rtt, a.ns, b.ns, b.addr,
                                                                           count=rtt_count, interval_s=0.05)
                                   for a, b in pairs.values()})
        for key, res in pair_rtts.items():
            a_name, b_name = key.split("|")
            a, b = pairs[(a_name, b_name)]
            for x, y in ((a, b), (b, a)):
                out[x.name].setdefault("pair_rtt_expected_s", {})[y.name] = pair_rtt(a, b)
                out[x.name].setdefault("pair_rtt_s", {})[y.name] = None if isinstance(res, Exception) else res.median_s
    rtts = _concurrently({t.name: functools.partial(tcpprobe.rtt, t.ns, far_end, far_addr, count=rtt_count,
                                                    interval_s=0.05)
                          for t in targets})
    for name, rtt in rtts.items():
        if isinstance(rtt, Exception):
            out[name].setdefault("error", f"rtt: {type(rtt).__name__}: {rtt}")
            continue
        out[name]["rtt_s"] = rtt.median_s
        out[name]["rtt_lost"] = rtt.lost
        if rtt.median_s is not None:
            # The star's scenario delay applies each way, so half the RTT to the switch is the one-way delay.
            for d in ("up", "down"):
                out[name][d]["delay_s"] = rtt.median_s / 2
    return out


NETEM_DEFAULT_LIMIT = 1000  # packets: what netem holds when no limit is given


def queue_notes(nodes: list[dict]) -> list[str]:
    """What each emulated direction can hold before it drops (issue 37), from a backend's `describe()` nodes:
    every netem's `limit` as read back beside the bandwidth-delay product of its delay at the direction's rate
    (netem holds every packet for the whole delay, so at 1 Gbit x 100 ms its default 1000 packets drop
    silently; ours are sized to twice that product), and the delay line's fixed queue per direction."""
    notes, lines = [], False
    for n in nodes:
        applied = n.get("applied") or {}
        lines = lines or applied.get("delay_line") is not None
        for d in ("up", "down"):
            a = applied.get(d) or {}
            rate = (a.get("plan") or {}).get("rate_bps")
            for q in a.get("qdiscs", []):
                if q.get("kind") != "netem":
                    continue
                opts = q.get("options", {})
                limit = int(opts.get("limit", NETEM_DEFAULT_LIMIT))
                held_s = sum(float((opts.get("delay") or {}).get(k, 0.0)) for k in ("delay", "jitter"))
                if not rate or not held_s:
                    notes.append(f"{n.get('name')} {d}: netem holds up to {limit} packets"
                                 + ("" if rate else " (no rate on this direction: sized for 10 Gbit/s)"))
                    continue
                bdp = rate / 8 * held_s / FRAME_BYTES
                default = "would drop" if bdp > NETEM_DEFAULT_LIMIT else "would hold them"
                notes.append(f"{n.get('name')} {d}: netem holds up to {limit} packets, {limit / bdp:.1f}x the "
                             f"{bdp:,.0f} frames in flight at {format_rate(rate)} x {held_s * 1e3:g} ms "
                             f"(netem's default, {NETEM_DEFAULT_LIMIT}, {default})")
    if lines:
        notes.append(f"delay line: each direction queues up to {QUEUE_LIMIT_BYTES >> 20} MB "
                     f"({QUEUE_LIMIT_BYTES * 8 / 1e9:.2f} s at 1 Gbit/s), then drops")
    return notes
