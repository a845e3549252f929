"""The link-emulation layer both real backends call: given the link plan (harness/distro_bench/net/engines.py, made
once at preflight) and where each node's link lives, it applies the plan, verifies it by reading it
back, describes what was applied, and stops it.

A backend owns the topology (namespaces, veths, containers; the delay line's namespace or splice)
and hands over, per node, its `Endpoints`: the namespace and interface whose egress is the uplink,
the same for the downlink, and where the delay line runs when the plan has one. Everything a link's
spec turns into happens here, once:

    plan.nodes[i].up.tc / .down.tc       -> tc on the up/down egress interfaces (harness/distro_bench/net/shaping.py),
                                            one batch per namespace, read back with `tc -j qdisc show`
    plan.nodes[i].up/.down.delay_line    -> one DelayLine per node between its two interfaces
                                            (harness/distro_bench/net/delayline/), a->b the uplink
    plan.nodes[i].pair_paths             -> the uplink delay line's paths by destination address, or (tc
                                            engine) the uplink's htb class per path (`egress_tc`)
    plan.sites[k].up/.down               -> a site's shared uplink (`SiteEndpoints`): tc on both egresses (up:
                                            an htb class per destination site, `site_egress_tc`), and a
                                            delay line between them for the site and WAN delays (userspace)

A change at run time (link schedules, traces, outages; issue 18) is `change()`: re-plan one node's
direction with the split planning made (harness/distro_bench/net/engines.py: direction_plan), change that one
interface's tc (read back), and give its delay line the new `Impairment` (read back from the
forwarder). `outage()` puts a `blackhole` qdisc on both egresses of a node and later restores its
current plan. Only the coordinator calls these (workers have no NET_ADMIN).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from distro_bench.net.delayline import DelayLine, stop_all
from distro_bench.net.engines import NetworkPlan, NodeLinkPlan, SiteLinkPlan, direction_plan
from distro_bench.net.link import Direction, Impairment
from distro_bench.net.ns import NetnsRef
from distro_bench.net.shaping import (
    QdiscPlan,
    apply_plan,
    apply_plans,
    blackhole,
    change_plan,
    check_interface,
    read_qdiscs,
)
from distro_bench.net.tcpprobe import unreachable
from distro_bench.scenario import environ

DIRECTIONS = ("up", "down")


@dataclass(frozen=True, kw_only=True)
class LinkEgress:
    """Where one emulated link's two directions leave: the egress of `up_iface` in `up_ns` and of `down_iface` in
    `down_ns`; its delay line, when the plan has one, forwards between `delay_line_ifaces` in `delay_line_ns`
    (an `ip netns` name or a path such as /proc/<pid>/ns/net)."""

    up_ns: NetnsRef
    up_iface: str
    down_ns: NetnsRef
    down_iface: str
    delay_line_ns: str | None = None
    delay_line_ifaces: tuple[str, str] = ("a", "b")

    def egress(self, direction: str) -> tuple[NetnsRef, str]:
        return (self.up_ns, self.up_iface) if direction == "up" else (self.down_ns, self.down_iface)


@dataclass(frozen=True, kw_only=True)
class Endpoints(LinkEgress):
    """One node's link: the uplink leaves the node's side, the downlink the switch's side; the delay line's
    interfaces are (node side, switch side)."""

    rank: int
    addr: str | None = None  # the node's IPv4 address: where other nodes' per-destination (region) delays key on


@dataclass(frozen=True, kw_only=True)
class SiteEndpoints(LinkEgress):
    """One site's shared uplink: `up` leaves the site's side (towards the core), `down` the core's side (towards
    the site); the delay line's interfaces are (site side, core side)."""

    index: int


def worker_env(iface: str) -> dict[str, str]:
    """What a worker needs so that its traffic takes the emulated link and is counted there."""
    return {
        "GLOO_SOCKET_IFNAME": iface, environ.WIRE_IFACE: iface,
        # NCCL would otherwise take shared memory or P2P between GPUs of this host and bypass the link.
        "NCCL_SOCKET_IFNAME": iface, "NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1",
    }


def check_reachable(probes: Sequence[tuple[str, NetnsRef, NetnsRef, str]], timeout_s: float = 5.0) -> list[str]:
    """A TCP handshake for each `(label, from namespace, to namespace, to address)`, all at once; the labels
    that got no answer. Catches a bridge that silently drops (the iptables FORWARD trap) or a hop that does
    not forward, before a worker hangs on its first collective. Pure Python (harness/distro_bench/net/tcpprobe.py): no
    `ping` binary, so a missing tool can never read as a firewall problem."""
    return unreachable({label: (client, server, addr) for label, client, server, addr in probes}, timeout_s=timeout_s)


def describe_plan(plan: NetworkPlan | None) -> dict:
    """environment.json's `link_engine`, `link_engine_reason` and `not_emulated` (None/[] without a plan)."""
    return {"link_engine": plan.engine if plan else None, "link_engine_reason": plan.engine_reason if plan else None,
            "not_emulated": plan.not_emulated if plan else []}


class Emulation:
    """The emulated links of one run. `apply()` then `stop()` (safe after a partial apply, and twice)."""

    def __init__(self, plan: NetworkPlan, endpoints: Sequence[Endpoints], log_dir: Path | None = None,
                 sites: Sequence[SiteEndpoints] = ()):
        self.plan = plan
        self.endpoints = {e.rank: e for e in endpoints}
        missing = [p.rank for p in plan.nodes if p.rank not in self.endpoints]
        if missing:
            raise ValueError(f"no endpoints for ranks {missing}")
        self.site_endpoints = {e.index: e for e in sites}
        no_site = [s.name for s in plan.sites if s.index not in self.site_endpoints]
        if no_site:
            raise ValueError(f"no endpoints for the uplinks of sites {no_site}")
        self.site_applied: dict[int, dict[str, dict]] = {}  # site index -> direction -> what apply_plans recorded
        self.site_lines: dict[int, DelayLine] = {}  # site index -> its uplink's delay line
        self.log_dir = log_dir
        self.applied: dict[int, dict[str, dict]] = {}  # rank -> direction -> what apply_plans recorded
        self.delay_lines: dict[int, DelayLine] = {}  # rank -> its delay line
        self.down: set[int] = set()  # ranks in an outage now

    # ---- apply, verify, stop -----------------------------------------------------------------------
    def apply(self) -> None:
        """tc on every egress interface (read back; ShapingError on any mismatch), then the delay lines
        (each returns once it forwards)."""
        self._apply_tc()
        self._apply_site_tc()
        self._start_delay_lines()
        self._start_site_lines()

    def _egress_by_namespace(self) -> dict[NetnsRef, dict[str, tuple[int, str]]]:
        out: dict[NetnsRef, dict[str, tuple[int, str]]] = {}
        for p in self.plan.nodes:
            for d in DIRECTIONS:
                ns, iface = self.endpoints[p.rank].egress(d)
                out.setdefault(ns, {})[iface] = (p.rank, d)
        return out

    def _apply_tc(self) -> None:
        nodes = {p.rank: p for p in self.plan.nodes}
        # One tc batch per namespace: the node side's of every node, then the switch side's together.
        for ns, ifaces in self._egress_by_namespace().items():
            applied = apply_plans(ns, {iface: self.egress_tc(nodes[rank], d) for iface, (rank, d) in ifaces.items()})
            for iface, (rank, d) in ifaces.items():
                self.applied.setdefault(rank, {})[d] = applied[iface]

    def _start_delay_lines(self) -> None:
        lines = [p for p in self.plan.nodes if p.needs_delay_line]
        if not lines:
            return
        for p in lines:
            e = self.endpoints[p.rank]
            if e.delay_line_ns is None:
                raise ValueError(f"rank {p.rank}: the plan has a delay line but its endpoints have no namespace for it")
            line = DelayLine(netns=e.delay_line_ns, iface_a=e.delay_line_ifaces[0], iface_b=e.delay_line_ifaces[1],
                             a_to_b=self.uplink_impairment(p), b_to_a=p.down.delay_line or Impairment(),
                             log_path=self.log_dir / "net" / f"delayline-{p.name}.log" if self.log_dir else None)
            self.delay_lines[p.rank] = line
            line.start()

    # ---- sites' shared uplinks ---------------------------------------------------------------------------
    def _site_egress_by_namespace(self) -> dict[NetnsRef, dict[str, tuple[SiteLinkPlan, str]]]:
        out: dict[NetnsRef, dict[str, tuple[SiteLinkPlan, str]]] = {}
        for s in self.plan.sites:
            for d in DIRECTIONS:
                ns, iface = self.site_endpoints[s.index].egress(d)
                out.setdefault(ns, {})[iface] = (s, d)
        return out

    def _apply_site_tc(self) -> None:
        for ns, ifaces in self._site_egress_by_namespace().items():
            applied = apply_plans(ns, {iface: self.site_egress_tc(s, d) for iface, (s, d) in ifaces.items()})
            for iface, (s, d) in ifaces.items():
                self.site_applied.setdefault(s.index, {})[d] = applied[iface]

    def _addr(self, rank: int) -> str:
        e = self.endpoints.get(rank)
        if e is None or e.addr is None:
            raise ValueError(f"a site's WAN path leads to rank {rank}, whose endpoints have no address")
        return e.addr

    def _site_wan(self, s: SiteLinkPlan) -> tuple[tuple[str, float, float, float], ...]:
        """The WAN paths' delay and loss by destination address (jitter: none on a WAN path)."""
        return tuple((self._addr(r), p.delay_s, 0.0, p.loss) for p in s.paths if p.delay_s or p.loss for r in p.ranks)

    def site_egress_tc(self, s: SiteLinkPlan, direction: str) -> QdiscPlan:
        """What tc does on one egress of a site's uplink: the direction's plan; upwards, an htb class per
        destination site (its WAN rate as ceil) with a leaf per node of the site (an even share each), and (no delay
        line: the tc engine) the WAN path's delay and loss in each leaf's netem; downwards, a class per node of the
        site."""
        tc = s.direction(direction).tc
        if direction != "up":  # towards the site: a class per node of it, so they share the downlink evenly too
            return replace(tc, dest_paths=tuple((self._addr(r), f"rank {r}", None) for r in s.ranks))
        dest = tuple((self._addr(r), p.site, p.rate_bps) for p in s.paths for r in p.ranks)
        return replace(tc, dest_paths=dest, fair_srcs=tuple(self._addr(r) for r in s.ranks),
                       per_dest=() if s.up.delay_line is not None else self._site_wan(s))

    def _start_site_lines(self) -> None:
        for s in self.plan.sites:
            if not s.needs_delay_line:
                continue
            e = self.site_endpoints[s.index]
            if e.delay_line_ns is None:
                raise ValueError(f"site {s.name}: the plan has a delay line but its endpoints have no namespace for it")
            up = replace(s.up.delay_line or Impairment(), per_dest=self._site_wan(s))
            line = DelayLine(netns=e.delay_line_ns, iface_a=e.delay_line_ifaces[0], iface_b=e.delay_line_ifaces[1],
                             a_to_b=up, b_to_a=s.down.delay_line or Impairment(),
                             log_path=self.log_dir / "net" / f"delayline-site-{s.name}.log" if self.log_dir else None)
            self.site_lines[s.index] = line
            line.start()

    def describe_sites(self) -> list[dict]:
        """What was applied on each site's uplink (environment.json's `network.sites`): its nodes, per direction
        the plan, the tc commands, the qdiscs, classes and filters read back, and its delay line."""
        out = []
        for s in self.plan.sites:
            line = self.site_lines.get(s.index)
            out.append({"site": s.name, "ranks": list(s.ranks), **self.site_applied.get(s.index, {}),
                        "paths": [asdict(p) for p in s.paths],
                        "delay_line": None if line is None else {
                            "namespace": line.netns, "interfaces": [line.iface_a, line.iface_b],
                            "up": asdict(line.a_to_b), "down": asdict(line.b_to_a)}})
        return out

    def _dest_paths(self, p: NodeLinkPlan) -> tuple[tuple[str, float, float, float], ...]:
        missing = [r for r, *_ in p.pair_paths if self.endpoints.get(r) is None or self.endpoints[r].addr is None]
        if missing:
            raise ValueError(f"rank {p.rank}: region delays to ranks {missing}, whose endpoints have no address")
        return tuple((str(self.endpoints[r].addr), delay, jitter, loss) for r, delay, jitter, loss in p.pair_paths)

    def egress_tc(self, p: NodeLinkPlan, direction: str) -> QdiscPlan:
        """What tc does on one egress: the direction's plan, and on an uplink whose region paths have no
        delay line (the tc engine) those paths by destination address (an htb class per path)."""
        tc = p.direction(direction).tc
        if direction != "up" or not p.pair_paths or p.up.delay_line is not None:
            return tc
        return replace(tc, per_dest=self._dest_paths(p))

    def uplink_impairment(self, p) -> Impairment:
        """The uplink delay line's impairment: the access link's, plus the delay to every other region by
        destination address (the plan knows ranks; the backend's endpoints know their addresses)."""
        up = p.up.delay_line or Impairment()
        if not p.pair_paths:
            return up
        return replace(up, per_dest=self._dest_paths(p))

    # ---- changes at run time (issue 18) -----------------------------------------------------------------
    def _node_plan(self, rank: int) -> NodeLinkPlan:
        for p in self.plan.nodes:
            if p.rank == rank:
                return p
        raise ValueError(f"no link plan for rank {rank}")

    def change(self, rank: int, direction: str, spec: Direction) -> dict:
        """Change one direction of one node's link to `spec` (the whole direction: rate and impairment).
        Returns the verified state: `tc` (the qdiscs read back), `delay_line` (the impairment the
        forwarder reports, or None), `applied_at` (epoch seconds once both were read back) and
        `pending` (True while the node is in an outage: the change is recorded and takes effect when
        the link returns). ShapingError / HarnessError when the read-back differs."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        node = self._node_plan(rank)
        old = node.direction(direction)
        new = direction_plan(spec, self.plan.engine, delay_line=old.delay_line)
        self.plan = replace(self.plan, nodes=tuple(
            (replace(p, up=new) if direction == "up" else replace(p, down=new)) if p.rank == rank else p
            for p in self.plan.nodes))
        out: dict = {"tc": None, "delay_line": None, "pending": rank in self.down}
        if rank not in self.down:
            ns, iface = self.endpoints[rank].egress(direction)
            applied = change_plan(ns, iface, self.egress_tc(node, direction),
                                  self.egress_tc(self._node_plan(rank), direction))
            self.applied.setdefault(rank, {})[direction] = applied
            out["tc"] = applied["qdiscs"]
        line = self.delay_lines.get(rank)
        if line is not None and new.delay_line is not None and new.delay_line != old.delay_line:
            key = "a_to_b" if direction == "up" else "b_to_a"
            # An uplink change keeps the node's region delays (they are not part of its access link).
            imp = self.uplink_impairment(replace(node, up=new)) if direction == "up" else new.delay_line
            got = line.set_impairments(a_to_b=imp) if direction == "up" else line.set_impairments(b_to_a=imp)
            out["delay_line"] = got.get(key)
        elif line is not None:
            out["delay_line"] = asdict(line.a_to_b if direction == "up" else line.b_to_a)
        out["applied_at"] = time.time()
        return out

    def outage(self, rank: int, down: bool) -> dict:
        """Take a node's link down (both directions carry nothing: harness/distro_bench/net/shaping.py `blackhole`) or
        bring it back to its current plan (which may have changed meanwhile). Returns the qdiscs read back
        per direction and `applied_at`."""
        node = self._node_plan(rank)
        out: dict = {}
        for d in DIRECTIONS:
            ns, iface = self.endpoints[rank].egress(d)
            if down:
                out[d] = blackhole(ns, iface)["qdiscs"]
            else:
                applied = apply_plan(ns, iface, self.egress_tc(node, d))
                self.applied.setdefault(rank, {})[d] = applied
                out[d] = applied["qdiscs"]
        (self.down.add if down else self.down.discard)(rank)
        out["applied_at"] = time.time()
        return out

    def verify(self) -> list[str]:
        """Read every egress interface back and compare with the plan; check every delay line still
        forwards. The problems (empty when all is as planned)."""
        nodes = {p.rank: p for p in self.plan.nodes}
        problems = []
        for ns, ifaces in self._egress_by_namespace().items():
            state = read_qdiscs(ns)
            for iface, (rank, d) in ifaces.items():
                if rank in self.down:
                    continue  # in an outage: blackholed on purpose
                mine = [q for q in state if q.get("dev") == iface]
                found, _ = check_interface(ns, iface, self.egress_tc(nodes[rank], d), mine)
                problems += [f"[{ns}] {x}" for x in found]
        problems += [f"delay line of rank {r} is not running" for r, line in self.delay_lines.items()
                     if not line.running()]
        for ns, site_ifaces in self._site_egress_by_namespace().items():
            state = read_qdiscs(ns)
            for iface, (s, d) in site_ifaces.items():
                found, _ = check_interface(ns, iface, self.site_egress_tc(s, d), [q for q in state if q.get("dev") == iface])
                problems += [f"[{ns}] site {s.name}: {x}" for x in found]
        problems += [f"delay line of site {k} is not running" for k, line in self.site_lines.items()
                     if not line.running()]
        return problems

    def stop(self) -> list[str]:
        """Stop every delay line (their final stats go beside their logs); the problems, never raised,
        so a teardown always goes on. The qdiscs go with their interfaces."""
        problems = stop_all(self.delay_lines) if self.delay_lines else []
        return problems + [p.replace("of rank", "of site", 1) for p in stop_all(self.site_lines)]

    # ---- describe ------------------------------------------------------------------------------------
    def describe(self) -> dict:
        """The plan's engine and what it could not emulate, for environment.json."""
        return describe_plan(self.plan)

    def describe_node(self, rank: int) -> dict | None:
        """What was applied on one node's link: per direction the plan, the tc commands and the qdiscs
        read back; and its delay line (namespace, interfaces, impairment each way). None before apply."""
        applied = self.applied.get(rank)
        if not applied:
            return None
        line = self.delay_lines.get(rank)
        return {**applied, "delay_line": None if line is None else {
            "namespace": line.netns, "interfaces": [line.iface_a, line.iface_b],
            "up": asdict(line.a_to_b), "down": asdict(line.b_to_a)}}
