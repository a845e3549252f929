"""A throw-away star of namespaces with a delay line on every access link, for the delay line's
own tests and benchmark (benchmarks/delayline_cpu.py); the netns backend builds the real one. A test
rig, so it lives with the tests, not in the package.

Same shape as the backend's: node ns `<prefix>n<i>` (eth0) <-> `a` in link ns `<prefix>l<i>`,
`b` <-> `p<i>` in `<prefix>sw` on bridge br0. Rate shaping, when asked, is tbf on eth0 egress (up)
and on p<i> egress (down). Everything lives in namespaces named `<prefix>*` = `dbench-<run id>-*`,
removed on exit. Like every creator of namespaces it claims its run id (harness/distro_bench/net/owner.py) while it
lives, so `distro-bench clean` leaves a running lab alone.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from distro_bench.errors import HarnessError
from distro_bench.net import naming, owner
from distro_bench.net import ns as netns
from distro_bench.net.delayline import DelayLine, Impairment
from distro_bench.net.ns import NetnsRef

MTU = 1500
SUBNET = "10.213.0"


@dataclass(frozen=True)
class LabLink:
    up: Impairment = field(default_factory=lambda: Impairment(0.0))
    down: Impairment = field(default_factory=lambda: Impairment(0.0))
    up_rate_bit: int | None = None
    down_rate_bit: int | None = None
    rtt_s: float = 0.0  # the path's round trip, to size tbf's queue for one bandwidth-delay product
    delay_line: bool = True


def tbf_args(rate_bit: int, rtt_s: float) -> list[str]:
    """tbf parameters that let one TCP flow fill the rate over a path of `rtt_s`."""
    rate_Bps = rate_bit / 8
    burst = max(4 * MTU, int(rate_Bps * 0.004))  # 4 ms of tokens: hrtimer wakeups are not free
    limit = burst + max(int(rate_Bps * max(rtt_s, 0.005)), 16 * MTU)  # >= 1 BDP of queue
    return ["rate", f"{rate_bit}bit", "burst", str(burst), "limit", str(limit)]


def run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise HarnessError(f"{' '.join(argv)} failed ({p.returncode}): {p.stderr.strip()}")
    return p


class Lab:
    """`with Lab([LabLink(...), LabLink(...)]) as lab:` then `lab.ns(i)`, `lab.ip(i)`, `lab.lines`."""

    def __init__(
        self, links: list[LabLink], log_dir: Path | None = None, run_id: str | None = None, realtime: bool = True
    ):
        self.links = links
        self.realtime = realtime
        self.run_id = run_id or f"t{secrets.token_hex(3)}"
        self.prefix = naming.run_prefix(self.run_id)
        self.log_dir = log_dir
        self.lines: list[DelayLine | None] = []
        self._namespaces: list[str] = []

    def ns(self, i: int) -> str:
        return f"{self.prefix}n{i}"

    def link_ns(self, i: int) -> str:
        return f"{self.prefix}l{i}"

    @property
    def switch_ns(self) -> str:
        return f"{self.prefix}sw"

    def ip(self, i: int) -> str:
        return f"{SUBNET}.{i + 1}"

    def exec(self, i: int, argv: list[str]) -> list[str]:
        """`argv` run inside node i's namespace."""
        return NetnsRef.named(self.ns(i)).wrap(argv)

    def _add_ns(self, name: str) -> NetnsRef:
        self._namespaces.append(name)  # before creating it: a half-made one is removed too
        return netns.create_netns(name)

    def _no_offloads(self, ns: str, dev: str) -> None:
        # Frames stay MTU-sized so tbf and the delay line see what the wire would. Checksum
        # offload stays on: the delay line must cope with partial checksums.
        netns.offloads_off(NetnsRef.named(ns), dev)

    def up(self) -> Lab:
        owner.claim(self.run_id)  # before the first namespace: `clean` must not take a live lab's
        sw = self.switch_ns
        sw_ref = self._add_ns(sw)
        netns.add_bridge(sw_ref, "br0")
        netns.link_set(sw_ref, "br0", state="up")
        for i, link in enumerate(self.links):
            node, lns = self.ns(i), self.link_ns(i)
            node_ref = self._add_ns(node)
            lns_ref = self._add_ns(lns)
            # The link namespace has no addresses; IPv6 autoconf there would only add noise frames.
            for ref in (lns_ref, node_ref):
                netns.sysctl_set(ref, "net.ipv6.conf.all.disable_ipv6", 1)
                netns.sysctl_set(ref, "net.ipv6.conf.default.disable_ipv6", 1)
            if link.delay_line:
                netns.add_veth("eth0", node_ref, "a", lns_ref)
                netns.add_veth("b", lns_ref, f"p{i}", sw_ref)
                for dev in ("a", "b"):
                    self._no_offloads(lns, dev)
                    netns.link_set(lns_ref, dev, state="up")
            else:
                netns.add_veth("eth0", node_ref, f"p{i}", sw_ref)
            self._no_offloads(node, "eth0")
            self._no_offloads(sw, f"p{i}")
            netns.configure_link(sw_ref, f"p{i}", master="br0", no_ipv6_ll=False)
            netns.configure_link(node_ref, "eth0", addr=f"{self.ip(i)}/24", no_ipv6_ll=False)
            if link.up_rate_bit:
                run(["tc", "-n", node, "qdisc", "replace", "dev", "eth0", "root", "tbf",
                     *tbf_args(link.up_rate_bit, link.rtt_s)])  # fmt: skip
            if link.down_rate_bit:
                run(["tc", "-n", sw, "qdisc", "replace", "dev", f"p{i}", "root", "tbf",
                     *tbf_args(link.down_rate_bit, link.rtt_s)])  # fmt: skip
        self._wait_links_ready()
        for i, link in enumerate(self.links):
            line = None
            if link.delay_line:
                log = self.log_dir / f"delayline-{i}.log" if self.log_dir else None
                line = DelayLine(self.link_ns(i), "a", "b", link.up, link.down, log_path=log, realtime=self.realtime)
                self.lines.append(line)
                line.start()
            else:
                self.lines.append(None)
        return self

    def _wait_links_ready(self, timeout_s: float = 5.0) -> None:
        # The kernel attaches a device's real qdisc (until then `noop`, which drops everything)
        # from its link-watch work, up to a second after carrier comes up: a frame sent before
        # that, such as the first ARP request, is lost and costs a 1 s retransmission.
        deadline = time.monotonic() + timeout_s
        while True:
            pending = []
            for ns in self._namespaces:
                for dev in netns.links(NetnsRef.named(ns)):
                    if dev["ifname"] != "lo" and (dev.get("qdisc") == "noop" or dev.get("operstate") != "UP"):
                        pending.append(f"{ns}/{dev['ifname']}")
            if not pending:
                return
            if time.monotonic() > deadline:
                raise HarnessError(f"links not up after {timeout_s:.0f}s: {', '.join(pending)}")
            time.sleep(0.05)

    def down(self) -> None:
        errors = []
        for line in self.lines:
            if line is not None:
                try:
                    line.stop()
                except Exception as e:
                    errors.append(str(e))
        for name in reversed(self._namespaces):
            problem = netns.delete_netns(name)
            if problem:
                errors.append(problem)
        self._namespaces.clear()
        owner.release(self.run_id)
        if errors:
            raise HarnessError("lab teardown: " + "; ".join(errors))

    def __enter__(self) -> Lab:
        try:
            return self.up()
        except BaseException:
            self.down()
            raise

    def __exit__(self, *exc) -> None:
        self.down()
