"""The star topology: a description (pure), and `Star`, which creates it and always removes it.

A switch namespace holds a Linux bridge `br0` with the far-end address; every node namespace has
`eth0`, whose veth peer `p<i>` sits in the switch namespace on the bridge. A node whose delay and
loss come from the userspace delay line gets a link namespace between the two:
node `eth0` <-> `a` | delay line | `b` <-> `p<i>` on `br0`. Veths are created directly in their
namespaces, so nothing (not even a name) appears in the root namespace; the bridge living in a
namespace of ours also keeps it away from Docker's iptables FORWARD DROP in the root namespace.
"""

from __future__ import annotations

from dataclasses import dataclass

from distro_bench.net import naming
from distro_bench.net.cleanup import delete_namespaces, list_namespaces
from distro_bench.net.emulation import check_reachable
from distro_bench.net.ns import NetnsRef, add_bridge, add_veth, configure_link, create_netns, offloads_off, sysctl_set

SUBNET = "10.77.0"
PREFIX_LEN = 24
SWITCH_HOST = 254
BRIDGE = "br0"
NODE_IFACE = "eth0"


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
    port: str  # the veth end on the bridge, in the switch namespace
    link_ns: str | None = None  # the delay line's namespace, if any

    @property
    def iface(self) -> str:
        return NODE_IFACE


@dataclass(frozen=True)
class StarSpec:
    run_id: str
    switch_ns: str
    switch_addr: str
    nodes: tuple[NodePort, ...]

    @classmethod
    def build(cls, run_id: str, n_nodes: int, link_ns_for: set[int] | frozenset[int] = frozenset()) -> StarSpec:
        if not 1 <= n_nodes <= 250:
            raise ValueError(f"a star has 1..250 nodes, not {n_nodes}")
        nodes = tuple(
            NodePort(index=i, ns=naming.node_ns(run_id, i), addr=f"{SUBNET}.{i + 1}", port=f"p{i}",
                     link_ns=naming.link_ns(run_id, i) if i in link_ns_for else None)
            for i in range(n_nodes))
        return cls(run_id=run_id, switch_ns=naming.switch_ns(run_id), switch_addr=f"{SUBNET}.{SWITCH_HOST}", nodes=nodes)

    def namespaces(self) -> list[str]:
        """Every namespace, in creation order."""
        out = [self.switch_ns]
        for n in self.nodes:
            out.append(n.ns)
            if n.link_ns:
                out.append(n.link_ns)
        return out

    def veths(self) -> list[Veth]:
        """Every veth pair, each end created directly in its namespace."""
        out = []
        for n in self.nodes:
            if n.link_ns:
                out.append(Veth(NODE_IFACE, n.ns, "a", n.link_ns))
                out.append(Veth("b", n.link_ns, n.port, self.switch_ns))
            else:
                out.append(Veth(NODE_IFACE, n.ns, n.port, self.switch_ns))
        return out

    def iface_configs(self) -> dict[str, list[IfaceConfig]]:
        """Per namespace, in order: each interface's address, bridge and state. Every interface has
        addrgenmode none (no IPv6 link-local address: no router solicitations or MLD reports in the
        wire counters). The bridge comes up last, with its ports attached."""
        sw = [IfaceConfig(n.port, master=BRIDGE) for n in self.nodes]
        sw.append(IfaceConfig(BRIDGE, addr=f"{self.switch_addr}/{PREFIX_LEN}"))
        out = {self.switch_ns: sw}
        for n in self.nodes:
            out[n.ns] = [IfaceConfig(NODE_IFACE, addr=f"{n.addr}/{PREFIX_LEN}")]
            if n.link_ns:
                out[n.link_ns] = [IfaceConfig("a"), IfaceConfig("b")]
        return out

    def offload_targets(self) -> list[tuple[str, str]]:
        """(namespace, interface) pairs on a delay-line path, whose offloads must be off."""
        out = []
        for n in self.nodes:
            if n.link_ns:
                out += [(n.ns, NODE_IFACE), (n.link_ns, "a"), (n.link_ns, "b"), (self.switch_ns, n.port)]
        return out


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
        add_bridge(self.switch_ref, BRIDGE)
        for name, configs in self.spec.iface_configs().items():
            for c in configs:
                configure_link(NetnsRef.named(name), c.iface, addr=c.addr, master=c.master)
        # The per-namespace bridge-netfilter switches (kernel >= 5.3); absent without br_netfilter, which is fine.
        for key in ("bridge-nf-call-iptables", "bridge-nf-call-ip6tables", "bridge-nf-call-arptables"):
            sysctl_set(self.switch_ref, f"net.bridge.{key}", 0, check=False)
        for ns, iface in self.spec.offload_targets():
            offloads_off(NetnsRef.named(ns), iface)

    def down(self) -> list[str]:
        """Remove everything; returns problems (empty on success) rather than raising, so teardown goes on."""
        names = list(dict.fromkeys(self.created + list_namespaces(self.spec.run_id)))
        self.created = []
        return delete_namespaces(reversed(names))

    def node_ref(self, index: int) -> NetnsRef:
        return NetnsRef.named(self.spec.nodes[index].ns)

    @property
    def switch_ref(self) -> NetnsRef:
        return NetnsRef.named(self.spec.switch_ns)

    def check_reachable(self, timeout_s: float = 5.0) -> list[str]:
        """A TCP handshake from every node to the far end, all at once; the nodes that got no answer. Catches
        a bridge whose traffic is silently dropped (the iptables FORWARD trap) before a worker hangs."""
        return check_reachable([(n.ns, NetnsRef.named(n.ns), self.switch_ref, self.spec.switch_addr)
                                for n in self.spec.nodes], timeout_s)
