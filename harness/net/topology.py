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

from harness.net import naming
from harness.net.cleanup import delete_namespaces, list_namespaces
from harness.net.ns import NetnsRef, run, run_in

SUBNET = "10.77.0"
PREFIX_LEN = 24
SWITCH_HOST = 254
BRIDGE = "br0"
NODE_IFACE = "eth0"
# Offloads that let the kernel hand a delay line 64 KiB super-frames instead of MTU-sized ones.
OFFLOADS_OFF = ("tso", "off", "gso", "off", "gro", "off")


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

    def veth_lines(self) -> list[str]:
        """`ip -batch` lines, run in the root namespace, that create every veth pair in place."""
        lines = []
        for n in self.nodes:
            if n.link_ns:
                lines.append(f"link add name {NODE_IFACE} netns {n.ns} type veth peer name a netns {n.link_ns}")
                lines.append(f"link add name b netns {n.link_ns} type veth peer name {n.port} netns {self.switch_ns}")
            else:
                lines.append(f"link add name {NODE_IFACE} netns {n.ns} type veth peer name {n.port} netns {self.switch_ns}")
        return lines

    def ns_lines(self) -> dict[str, list[str]]:
        """`ip -batch` lines per namespace. No IPv6 link-local addresses (addrgenmode none), so no
        router solicitations or MLD reports add bytes to the wire counters."""
        sw = ["link set dev lo up",
              f"link add name {BRIDGE} type bridge stp_state 0 forward_delay 0 nf_call_iptables 0 nf_call_ip6tables 0 nf_call_arptables 0",
              f"link set dev {BRIDGE} addrgenmode none",
              f"addr add {self.switch_addr}/{PREFIX_LEN} dev {BRIDGE}"]
        for n in self.nodes:
            sw += [f"link set dev {n.port} addrgenmode none", f"link set dev {n.port} master {BRIDGE}", f"link set dev {n.port} up"]
        sw.append(f"link set dev {BRIDGE} up")
        out = {self.switch_ns: sw}
        for n in self.nodes:
            out[n.ns] = ["link set dev lo up", f"link set dev {NODE_IFACE} addrgenmode none",
                         f"addr add {n.addr}/{PREFIX_LEN} dev {NODE_IFACE}", f"link set dev {NODE_IFACE} up"]
            if n.link_ns:
                out[n.link_ns] = ["link set dev lo up", "link set dev a addrgenmode none", "link set dev b addrgenmode none",
                                  "link set dev a up", "link set dev b up"]
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
            run(["ip", "netns", "add", name])
            self.created.append(name)
        run(["ip", "-batch", "-"], input="\n".join(self.spec.veth_lines()) + "\n", what="creating veth pairs")
        for name, lines in self.spec.ns_lines().items():
            run_in(NetnsRef.named(name), ["ip", "-batch", "-"], input="\n".join(lines) + "\n",
                   what=f"[{name}] configuring links")
        # The per-namespace bridge-netfilter switches (kernel >= 5.3); absent without br_netfilter, which is fine.
        sw = NetnsRef.named(self.spec.switch_ns)
        for key in ("bridge-nf-call-iptables", "bridge-nf-call-ip6tables", "bridge-nf-call-arptables"):
            run_in(sw, ["sysctl", "-q", "-w", f"net.bridge.{key}=0"], check=False)
        for ns, iface in self.spec.offload_targets():
            run_in(NetnsRef.named(ns), ["ethtool", "-K", iface, *OFFLOADS_OFF])

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
        """Ping the far end from every node at once; the nodes that got no answer. Catches a bridge
        whose traffic is silently dropped (the iptables FORWARD trap) before a worker hangs on it."""
        from harness.net.emulation import check_reachable

        return check_reachable([(n.ns, NetnsRef.named(n.ns), self.spec.switch_addr) for n in self.spec.nodes], timeout_s)
