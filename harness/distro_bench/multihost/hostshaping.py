"""A scenario link on a host's real interface: the uplink as egress shaping of the interface, the
downlink as egress shaping of an ifb device that the interface's ingress is redirected to.

    IFACE egress  : tbf (rate up) [+ netem child: delay, jitter, loss]    = the node's uplink
    IFACE ingress : ingress qdisc, u32 match-all filter -> mirred redirect -> ifb `dbench-ifb`
    ifb egress    : tbf (rate down) [+ netem child]                        = the node's downlink

The tc plans and their read-back are harness/distro_bench/net/emulation.py's (the same code as the netns backend,
on this host's own namespace); the ingress redirect is read back here (`tc -j filter show`). u32, not
matchall: kernels without cls_matchall exist (this one). Delay needs netem: a real interface has no
place for the userspace delay line, so a kernel without netem can shape rates only (CapabilityError
otherwise, unless --allow-unemulated). `remove` is idempotent and is also what the janitor runs.
"""

from __future__ import annotations

import json
from dataclasses import replace

from distro_bench.errors import CapabilityError, InputError
from distro_bench.multihost.iface import FOREIGN_ROOT_KINDS, interfaces
from distro_bench.net.emulation import Emulation, Endpoints
from distro_bench.net.engines import NetworkPlan, NodeLinkPlan, plan_links
from distro_bench.net.ns import NetCommandError, NetnsRef, run_in
from distro_bench.net.shaping import apply_plans, check_qdiscs, read_qdiscs
from distro_bench.scenario.model import Node

IFB = "dbench-ifb"
HERE = NetnsRef.current()


def plan_host(nodes: list[Node], caps, *, allow_unemulated: bool, seed: int) -> NetworkPlan:
    """The plan of the one link this host's interface carries. Nodes placed together share the interface,
    so they must share a link spec."""
    specs = {(n.link.model_dump_json() if n.link else None) for n in nodes}
    if len(specs) > 1:
        raise InputError("placement: nodes " + ", ".join(f"{n.name} ({n.link_name or 'inline'})" for n in nodes)
                         + " share this host's interface but have different links; place nodes with the same link "
                         "on one host (workers[].host or --placement)")
    if any(n.region for n in nodes) and not allow_unemulated:
        # A per-destination delay needs the delay line (or per-destination tc classes, not implemented).
        raise CapabilityError("regions: a multi-host run does not emulate the delays between regions (the hosts' "
                              "own network lies between them); run on one host (--backend netns), or "
                              "--allow-unemulated")
    # No delay line on a real interface: plan with tc (netem) only.
    caps = replace(caps, delayline=False)
    full = plan_links(nodes[:1], caps, engine="tc" if caps.netem else "auto", allow_unemulated=allow_unemulated,
                      seed=seed)
    return full


def _ingress_problems(iface: str, ifb: str) -> list[str]:
    qd = read_qdiscs(HERE, iface)
    problems = []
    if not any(q.get("kind") == "ingress" for q in qd):
        problems.append(f"{iface}: no ingress qdisc")
    out = run_in(HERE, ["tc", "-j", "filter", "show", "dev", iface, "ingress"], check=False).stdout.strip()
    filters = json.loads(out) if out else []
    redirects = [a for f in filters for a in (f.get("options") or {}).get("actions", [])
                 if a.get("kind") == "mirred" and a.get("to_dev") == ifb]
    if not redirects:
        problems.append(f"{iface}: no ingress filter redirects to {ifb}")
    return problems


def foreign_qdiscs(iface: str) -> list[str]:
    """Shaping on `iface` that is not ours to replace: a shaping root qdisc or an ingress qdisc."""
    out = []
    for q in read_qdiscs(HERE, iface):
        if q.get("root") and q.get("kind") in FOREIGN_ROOT_KINDS:
            out.append(f"a {q['kind']} root qdisc")
        if q.get("kind") in ("ingress", "clsact"):
            out.append(f"an {q['kind']} qdisc")
    return out


def _link(action: str, **kw) -> None:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        if action == "add":
            ipr.link("add", ifname=kw["ifname"], kind="ifb")
            ipr.link("set", index=ipr.link_lookup(ifname=kw["ifname"])[0], state="up")
        else:
            idx = ipr.link_lookup(ifname=kw["ifname"])
            if idx:
                ipr.link("del", index=idx[0])


def ifb_exists(ifb: str = IFB) -> bool:
    return ifb in interfaces()


def remove(iface: str, ifb: str = IFB, *, root: bool = True) -> list[str]:
    """Remove our shaping from `iface` (root qdisc when `root`, the ingress qdisc) and the ifb; read back.
    The problems (empty when nothing of ours is left); never raises."""
    problems = []
    batch = (f"qdisc del dev {iface} root\n" if root else "") + f"qdisc del dev {iface} ingress\n"
    try:
        run_in(HERE, ["tc", "-force", "-batch", "-"], input=batch, check=False)
    except NetCommandError as e:
        problems.append(str(e))
    try:
        _link("del", ifname=ifb)
    except Exception as e:  # pyroute2's own errors: keep going, the read-back below decides
        problems.append(f"deleting {ifb}: {e}")
    try:
        left = [q["kind"] for q in read_qdiscs(HERE, iface)
                if q.get("kind") in ("ingress", "tbf", "netem") and (root or q.get("kind") == "ingress")]
        problems = [f"{iface}: {', '.join(left)} still present after removal"] if left else []
        if ifb_exists(ifb):
            problems.append(f"{ifb} still exists after removal")
    except NetCommandError as e:
        problems.append(str(e))
    return problems


class HostShaping:
    """The link of this host's nodes on `iface`. `apply()` (read back; ShapingError on a mismatch), `remove()`."""

    def __init__(self, plan: NetworkPlan, iface: str, ifb: str = IFB, *, replace_foreign: bool = False):
        self.plan = plan
        self.node: NodeLinkPlan = plan.nodes[0]
        self.iface, self.ifb = iface, ifb
        self.replace_foreign = replace_foreign
        self.emulation: Emulation | None = None
        self.applied: dict | None = None
        self.before: list[dict] = []

    @property
    def shapes_down(self) -> bool:
        return not self.node.down.tc.empty

    @property
    def shapes_up(self) -> bool:
        return not self.node.up.tc.empty

    def apply(self) -> dict:
        self.before = read_qdiscs(HERE, self.iface)
        foreign = foreign_qdiscs(self.iface)
        if foreign and not self.replace_foreign:
            raise CapabilityError(f"--iface {self.iface} already has {' and '.join(foreign)} (shaping of another tool "
                                  "or an earlier run?); remove it (tc qdisc del dev IFACE root / ingress) or pass "
                                  "--i-know to replace it")
        if self.shapes_down:
            if ifb_exists(self.ifb):  # ours by name, left by an agent that could not clean up
                _link("del", ifname=self.ifb)
            try:
                _link("add", ifname=self.ifb)
            except Exception as e:
                raise CapabilityError(f"cannot create the ifb device {self.ifb} for the downlink ({e}); load the "
                                      "ifb module: modprobe ifb") from None
            batch = (f"qdisc del dev {self.iface} ingress\n" if foreign else "") + (
                f"qdisc add dev {self.iface} handle ffff: ingress\n"
                f"filter add dev {self.iface} parent ffff: protocol all u32 match u32 0 0 "
                f"action mirred egress redirect dev {self.ifb}\n")
            proc = run_in(HERE, ["tc", "-force", "-batch", "-"], input=batch, check=False)
            problems = _ingress_problems(self.iface, self.ifb)
            if problems:
                raise CapabilityError(f"{self.iface}: the ingress redirect to {self.ifb} is not in place: "
                                      + "; ".join(problems) + f" (tc said: {(proc.stderr or '').strip()}); the kernel "
                                      "needs sch_ingress, cls_u32 and act_mirred")
        if self.shapes_down:
            self.emulation = Emulation(self.plan, [Endpoints(rank=self.node.rank, up_ns=HERE, up_iface=self.iface,
                                                             down_ns=HERE, down_iface=self.ifb)])
            self.emulation.apply()
            self.applied = dict(self.emulation.applied[self.node.rank])
        elif self.shapes_up:
            self.applied = {"up": apply_plans(HERE, {self.iface: self.node.up.tc})[self.iface], "down": None}
        else:
            self.applied = {"up": None, "down": None}
        self.applied["ingress"] = ({"ifb": self.ifb, "filter": "u32 match u32 0 0 action mirred egress redirect",
                                    "read_back_ok": True} if self.shapes_down else None)
        self.applied["before"] = self.before
        return self.applied

    def verify(self) -> list[str]:
        problems = check_qdiscs(self.iface, self.node.up.tc, read_qdiscs(HERE, self.iface))
        if self.shapes_down:
            problems += _ingress_problems(self.iface, self.ifb)
            problems += check_qdiscs(self.ifb, self.node.down.tc, read_qdiscs(HERE, self.ifb))
        return problems

    def remove(self) -> list[str]:
        return remove(self.iface, self.ifb, root=self.shapes_up or self.shapes_down)
