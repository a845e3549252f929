"""The star topology: a description (pure), and `Star`, which creates it and always removes it.

A switch namespace holds a Linux bridge `br0` with the far-end address; every node namespace has
`eth0`, whose veth peer `p<i>` sits in the switch namespace on the bridge. A node whose delay and
loss come from the userspace delay line gets a link namespace between the two:
node `eth0` <-> `a` | delay line | `b` <-> `p<i>` on `br0`. Veths are created directly in their
namespaces, so nothing (not even a name) appears in the root namespace; the bridge living in a
namespace of ours also keeps it away from Docker's iptables FORWARD DROP in the root namespace.

Sites (harness/distro_bench/scenario/sites.py): the nodes of a site hang off a bridge `br0` in the site's own
namespace `dbench-<run>-s<k>` (their ports `p<i>` there), and the site reaches the switch through one uplink veth:
`up` on the site's bridge <-> `c<k>` on the switch's (with a delay line: `up` <-> `a` | line | `b` <-> `c<k>`, in
`dbench-<run>-sl<k>`). Frames between two nodes of a site never leave its bridge; every other frame of the site
crosses `up` (egress: the site's shared uplink) or `c<k>` (egress: its shared downlink). One subnet throughout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from distro_bench.net import naming
from distro_bench.net.cleanup import delete_namespaces, list_namespaces
from distro_bench.net.emulation import Endpoints, SiteEndpoints, check_reachable
from distro_bench.net.engines import NetworkPlan
from distro_bench.net.ns import NetnsRef, add_bridge, add_veth, configure_link, create_netns, offloads_off, sysctl_set

SUBNET = "10.77.0"
PREFIX_LEN = 24
SWITCH_HOST = 254
BRIDGE = "br0"
NODE_IFACE = "eth0"
SITE_UPLINK = "up"  # a site's side of its uplink, a port on the site's bridge


@dataclass(frozen=True)
class Veth:
    name: str
    ns: str
    peer: str
    peer_ns: str


@dataclass(frozen=True)
class IfaceConfig:
    iface: str
    addr: str | None = None  # CIDR
    master: str | None = None  # bridge to join


@dataclass(frozen=True)
class NodePort:
    index: int
    ns: str
    addr: str
    port: str  # the veth end on the bridge, in `bridge_ns`
    link_ns: str | None = None  # the delay line's namespace, if any
    site: int | None = None  # the site whose bridge it hangs off (None: the switch's)
    bridge_ns: str = ""  # where `port` is: its site's namespace, else the switch namespace

    @property
    def iface(self) -> str:
        return NODE_IFACE


@dataclass(frozen=True)
class SitePort:
    """A site: its namespace (bridge, its nodes' ports, the uplink's site side `up`), the uplink's core side
    `port` (c<k>) on the switch's bridge, and the namespace of the uplink's delay line, if any."""

    index: int
    name: str
    ns: str
    port: str
    nodes: tuple[int, ...]
    link_ns: str | None = None

    @property
    def uplink(self) -> str:
        return SITE_UPLINK


@dataclass(frozen=True)
class StarSpec:
    run_id: str
    switch_ns: str
    switch_addr: str
    nodes: tuple[NodePort, ...]
    sites: tuple[SitePort, ...] = ()

    @classmethod
    def build(cls, run_id: str, n_nodes: int, link_ns_for: set[int] | frozenset[int] = frozenset(), *,
              sites: Sequence[tuple[str, Sequence[int]]] = (),
              site_lines: set[int] | frozenset[int] = frozenset()) -> StarSpec:
        """`sites`: (name, its node indexes) per site, in order; `site_lines`: the sites whose uplink has a delay line."""
        if not 1 <= n_nodes <= 250:
            raise ValueError(f"a star has 1..250 nodes, not {n_nodes}")
        site_of = {i: k for k, (_, members) in enumerate(sites) for i in members}
        switch = naming.switch_ns(run_id)
        nodes = tuple(
            NodePort(index=i, ns=naming.node_ns(run_id, i), addr=f"{SUBNET}.{i + 1}", port=f"p{i}",
                     link_ns=naming.link_ns(run_id, i) if i in link_ns_for else None, site=site_of.get(i),
                     bridge_ns=naming.site_ns(run_id, site_of[i]) if i in site_of else switch)
            for i in range(n_nodes))
        site_ports = tuple(SitePort(index=k, name=name, ns=naming.site_ns(run_id, k), port=f"c{k}",
                                    nodes=tuple(members),
                                    link_ns=naming.site_link_ns(run_id, k) if k in site_lines else None)
                           for k, (name, members) in enumerate(sites))
        return cls(run_id=run_id, switch_ns=switch, switch_addr=f"{SUBNET}.{SWITCH_HOST}", nodes=nodes,
                   sites=site_ports)

    @classmethod
    def for_plan(cls, run_id: str, plan: NetworkPlan) -> StarSpec:
        """The topology a network plan needs: a link namespace per delay line, a site per site uplink."""
        rank_pos = {p.rank: i for i, p in enumerate(plan.nodes)}
        return cls.build(run_id, len(plan.nodes), {rank_pos[r] for r in plan.delay_line_ranks},
                         sites=[(s.name, [rank_pos[r] for r in s.ranks]) for s in plan.sites],
                         site_lines=plan.delay_line_sites)

    def namespaces(self) -> list[str]:
        """Every namespace, in creation order."""
        out = [self.switch_ns]
        for s in self.sites:
            out += [s.ns, *([s.link_ns] if s.link_ns else [])]
        for n in self.nodes:
            out.append(n.ns)
            if n.link_ns:
                out.append(n.link_ns)
        return out

    def veths(self) -> list[Veth]:
        """Every veth pair, each end created directly in its namespace."""
        out = []
        for s in self.sites:
            if s.link_ns:
                out += [Veth(SITE_UPLINK, s.ns, "a", s.link_ns), Veth("b", s.link_ns, s.port, self.switch_ns)]
            else:
                out.append(Veth(SITE_UPLINK, s.ns, s.port, self.switch_ns))
        for n in self.nodes:
            if n.link_ns:
                out.append(Veth(NODE_IFACE, n.ns, "a", n.link_ns))
                out.append(Veth("b", n.link_ns, n.port, n.bridge_ns))
            else:
                out.append(Veth(NODE_IFACE, n.ns, n.port, n.bridge_ns))
        return out

    def bridge_namespaces(self) -> list[str]:
        """Every namespace with a bridge `br0`: the switch's and each site's."""
        return [self.switch_ns, *(s.ns for s in self.sites)]

    def iface_configs(self) -> dict[str, list[IfaceConfig]]:
        """Per namespace, in order: each interface's address, bridge and state. Every interface has
        addrgenmode none (no IPv6 link-local address: no router solicitations or MLD reports in the
        wire counters). Each bridge comes up last, with its ports attached."""
        sw = [IfaceConfig(n.port, master=BRIDGE) for n in self.nodes if n.site is None]
        sw += [IfaceConfig(s.port, master=BRIDGE) for s in self.sites]
        sw.append(IfaceConfig(BRIDGE, addr=f"{self.switch_addr}/{PREFIX_LEN}"))
        out = {self.switch_ns: sw}
        for s in self.sites:
            out[s.ns] = [*(IfaceConfig(self.nodes[i].port, master=BRIDGE) for i in s.nodes),
                         IfaceConfig(SITE_UPLINK, master=BRIDGE), IfaceConfig(BRIDGE)]
            if s.link_ns:
                out[s.link_ns] = [IfaceConfig("a"), IfaceConfig("b")]
        for n in self.nodes:
            out[n.ns] = [IfaceConfig(NODE_IFACE, addr=f"{n.addr}/{PREFIX_LEN}")]
            if n.link_ns:
                out[n.link_ns] = [IfaceConfig("a"), IfaceConfig("b")]
        return out

    def offload_targets(self) -> list[tuple[str, str]]:
        """(namespace, interface) pairs on a delay-line path, whose offloads must be off: a node's own, and for a
        site's uplink line also its nodes' (their frames reach that line whole)."""
        out = []
        for n in self.nodes:
            if n.link_ns:
                out += [(n.ns, NODE_IFACE), (n.link_ns, "a"), (n.link_ns, "b"), (n.bridge_ns, n.port)]
        for s in self.sites:
            if s.link_ns:
                out += [(s.ns, SITE_UPLINK), (s.link_ns, "a"), (s.link_ns, "b"), (self.switch_ns, s.port)]
                for i in s.nodes:
                    out += [(self.nodes[i].ns, NODE_IFACE), (s.ns, self.nodes[i].port)]
        return list(dict.fromkeys(out))


class Star:
    """Owns the namespaces of one StarSpec: `up()` creates them, `down()` removes every one it
    created (and any other of this run id), also after a partial `up()`."""

    def __init__(self, spec: StarSpec):
        self.spec = spec
        self.created: list[str] = []

    def up(self) -> None:
        for name in self.spec.namespaces():
            self.created.append(name)
            create_netns(name)
        for v in self.spec.veths():
            add_veth(v.name, NetnsRef.named(v.ns), v.peer, NetnsRef.named(v.peer_ns))
        for ns in self.spec.bridge_namespaces():
            add_bridge(NetnsRef.named(ns), BRIDGE)
        for name, configs in self.spec.iface_configs().items():
            for c in configs:
                configure_link(NetnsRef.named(name), c.iface, addr=c.addr, master=c.master)
        # The per-namespace bridge-netfilter switches (kernel >= 5.3); absent without br_netfilter, which is fine.
        for ns in self.spec.bridge_namespaces():
            for key in ("bridge-nf-call-iptables", "bridge-nf-call-ip6tables", "bridge-nf-call-arptables"):
                sysctl_set(NetnsRef.named(ns), f"net.bridge.{key}", 0, check=False)
        for ns, iface in self.spec.offload_targets():
            offloads_off(NetnsRef.named(ns), iface)

    def down(self) -> list[str]:
        """Remove everything; returns problems (empty on success) rather than raising, so teardown goes on."""
        names = list(dict.fromkeys(self.created + list_namespaces(self.spec.run_id)))
        self.created = []
        return delete_namespaces(reversed(names))

    def node_ref(self, index: int) -> NetnsRef:
        return NetnsRef.named(self.spec.nodes[index].ns)

    def endpoints(self) -> list[Endpoints]:
        """Where each node's access link is emulated: `eth0` in its namespace up, its port (on its site's bridge,
        else the switch's) down, its delay line's namespace."""
        return [Endpoints(rank=n.index, up_ns=NetnsRef.named(n.ns), up_iface=NODE_IFACE,
                          down_ns=NetnsRef.named(n.bridge_ns), down_iface=n.port, delay_line_ns=n.link_ns, addr=n.addr)
                for n in self.spec.nodes]

    def site_endpoints(self) -> list[SiteEndpoints]:
        """Where each site's shared uplink is emulated: `up` in the site's namespace up, `c<k>` on the switch down."""
        return [SiteEndpoints(index=s.index, up_ns=NetnsRef.named(s.ns), up_iface=SITE_UPLINK, down_ns=self.switch_ref,
                              down_iface=s.port, delay_line_ns=s.link_ns) for s in self.spec.sites]

    @property
    def switch_ref(self) -> NetnsRef:
        return NetnsRef.named(self.spec.switch_ns)

    def check_reachable(self, timeout_s: float = 5.0) -> list[str]:
        """A TCP handshake from every node to the far end, all at once; the nodes that got no answer. Catches
        a bridge whose traffic is silently dropped (the iptables FORWARD trap) before a worker hangs."""
        return check_reachable([(n.ns, NetnsRef.named(n.ns), self.switch_ref, self.spec.switch_addr)
                                for n in self.spec.nodes], timeout_s)
