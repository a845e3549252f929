"""tc shaping of one interface's egress: a pure plan, the tc commands built from it, applying them,
and verifying by reading the qdisc tree back.

Tool choice: plain `tc` (iproute2), run as argument lists, not tcconfig and not pyroute2's tc layer.
tcconfig (`tcset`) was tried on this host: it always adds a netem child, even for a pure rate limit,
and exits 0 when the kernel lacks netem (as here), leaving only part of the link shaped; it filters
only IP traffic into the shaped class; and one call takes ~3 s, too slow for 16 interfaces. pyroute2's
tc support covers tbf and netem but its option spelling differs between versions. A plan turned into
`tc` argument lists is exact, testable without root, and runs in any namespace harness/distro_bench/net/enter.py enters,
so the Docker backend uses the same code on `/proc/<pid>/ns/net`. Whatever the tool, nothing counts
until `tc -j qdisc show` reads back what the plan asked for.

The tree: `tbf` at the root for the rate (handle 1:), `netem` as its child (handle 10:, parent 1:1)
for delay, jitter and loss; netem alone at the root when there is no rate; nothing when the
direction is unshaped. tbf rather than htb: one class is all a star access link needs, and this
tc (iproute2 6.1) prints tbf's rate as JSON but htb classes only as text.

An uplink with region paths (`per_dest`, the tc engine's regions) is the one place a class per destination
is needed: an htb tree with a netem child per distinct path and u32 filters on the destination address
(harness/distro_bench/net/tcclass.py has its layout and checks); its classes are read back from tc's text output.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields

from distro_bench.errors import HarnessError
from distro_bench.net.link import Direction, Impairment
from distro_bench.net.ns import NetnsRef, run_in
from distro_bench.net.tcclass import (
    LINK_CLASS,
    ROOT_HANDLE,
    InnerClass,
    PathClass,
    check_classes,
    inner_classes,
    json_pairs,
    leaf_ceil_bps,
    parse_htb_classes,
    parse_u32_dst_filters,
    path_classes,
    tree_filters,
    tree_rate_bps,
)

# Ethernet frame of a full 1500-byte MTU packet, as tbf counts it (skb->len includes the MAC header).
FRAME_BYTES = 1514
TBF_HANDLE, NETEM_HANDLE = "1:", "10:"


class ShapingError(HarnessError):
    """What the kernel holds differs from the plan (a missing qdisc, a rate rounded away, ...)."""


@dataclass(frozen=True)
class QdiscPlan(Direction):
    """A `Direction` as tc installs it on the egress of one interface: the rate (tbf), and whatever
    impairment netem does (none where the userspace delay line does it instead). Adds only the sizes
    tc needs, derived from the fields."""

    @classmethod
    def of(cls, d: Direction) -> QdiscPlan:
        return d if isinstance(d, cls) else cls(**{f.name: getattr(d, f.name) for f in fields(Direction) if f.init})

    @property
    def netem(self) -> bool:
        return self.impaired

    @property
    def empty(self) -> bool:
        return not self.rate_bps and not self.netem and not self.dest_paths and not self.fair_srcs

    @property
    def burst_bytes(self) -> int:
        # 5 ms of the rate, at least 4 frames: a sender on a busy CPU refills the queue late, and with
        # 2 ms 200 Mbit uplinks measured 85-92% goodput; 5 ms held 95% (the TCP ceiling) here.
        return max(4 * FRAME_BYTES, math.ceil((self.rate_bps or 0) / 8 * 0.005))

    @property
    def limit_bytes(self) -> int:
        # A 100 ms queue (a home router's buffer; it covers the bandwidth-delay product of RTTs up to
        # 100 ms), at least 16 frames, on top of the burst. Larger floors at low rates only add queueing
        # delay (and skew short goodput tests, whose receivers count the queue draining at the end).
        return max(math.ceil((self.rate_bps or 0) / 8 * 0.1), 16 * FRAME_BYTES) + self.burst_bytes

    @property
    def netem_limit_packets(self) -> int:
        return self.netem_limit_for(self.delay_s + self.jitter_s)

    def netem_limit_for(self, max_delay_s: float) -> int:
        # netem holds every packet in flight during the delay: twice the bandwidth-delay product in frames.
        rate = self.rate_bps or 10**10
        in_flight = rate / 8 * max_delay_s / FRAME_BYTES
        return max(1000, math.ceil(2 * in_flight))

    @property
    def per_destination(self) -> bool:
        return bool(self.per_dest or self.dest_paths or self.fair_srcs)

    def to_dict(self) -> dict:
        # jitter_reorders and seed steer only the delay line's random draws; netem has its own.
        return {k: v for k, v in asdict(self).items() if k not in ("jitter_reorders", "seed")}


def _class_tree_commands(iface: str, plan: QdiscPlan) -> list[list[str]]:
    """The htb tree of an uplink with paths per destination (harness/distro_bench/net/tcclass.py): a class per path
    under the link's, and (a site's uplink) a leaf per source node under each."""
    leaves, inner = path_classes(plan), inner_classes(plan)
    rate = tree_rate_bps(plan)
    burst = str(max(4 * FRAME_BYTES, math.ceil(rate / 8 * 0.005)))  # as the tbf's: 5 ms of the rate
    # A class's guaranteed share; each may borrow up to its ceil. An explicit quantum keeps htb from warning (its
    # r2q default gives a quantum far above a frame at these rates).
    quantum = str(8 * FRAME_BYTES)
    dev = ["dev", iface]
    cmds = [["tc", "qdisc", "replace", *dev, "root", "handle", ROOT_HANDLE, "htb", "default", f"{leaves[0].minor:x}"],
            ["tc", "class", "replace", *dev, "parent", ROOT_HANDLE, "classid", LINK_CLASS, "htb", "rate", f"{rate}bit",
             "ceil", f"{rate}bit", "burst", burst, "cburst", burst, "quantum", quantum]]
    siblings = {leaf.parent: 0 for leaf in leaves}
    for leaf in leaves:
        siblings[leaf.parent] += 1
    siblings[LINK_CLASS] = siblings.get(LINK_CLASS, 0) + len(inner)
    # Siblings get equal assured rates that add up to their parent's (htb lets a class send at its own rate
    # whatever its parent's ceil, so more would overrun the link); each borrows up to its ceil.
    rates = {LINK_CLASS: rate}
    tree: list[InnerClass | PathClass] = [*inner, *leaves]
    for c in tree:
        parent = getattr(c, "parent", LINK_CLASS)
        ceil = leaf_ceil_bps(plan, c)
        rates[c.classid] = max(8, min(rates[parent] // siblings[parent], ceil))
        cmds.append(["tc", "class", "replace", *dev, "parent", parent, "classid", c.classid, "htb",
                     "rate", f"{rates[c.classid]}bit", "ceil", f"{ceil}bit", "burst", burst, "cburst", burst,
                     "quantum", quantum])
    # netem holds the frames in flight plus the access link's queue (the tbf's 100 ms buffer, in frames).
    queue_frames = math.ceil(plan.limit_bytes / FRAME_BYTES)
    for leaf in leaves:
        if leaf.netem is not None:
            limit = plan.netem_limit_for(leaf.netem.delay_s + leaf.netem.jitter_s) + queue_frames
            cmds.append(["tc", "qdisc", "replace", *dev, "parent", leaf.classid, "handle", leaf.handle, "netem",
                         "limit", str(limit), *leaf.netem.netem_args()])
    for src, dst, classid, prio in tree_filters(plan):
        match = [*(["match", "ip", "src", f"{src}/32"] if src else []), *(["match", "ip", "dst", f"{dst}/32"] if dst else [])]
        cmds.append(["tc", "filter", "add", *dev, "parent", ROOT_HANDLE, "protocol", "ip", "prio", str(prio), "u32",
                     *match, "flowid", classid])
    return cmds


def tc_commands(iface: str, plan: Direction) -> list[list[str]]:
    """The tc commands (argument lists) that install `plan` on a fresh interface; [] for an empty plan."""
    plan = QdiscPlan.of(plan)
    if plan.per_destination:
        return _class_tree_commands(iface, plan)
    cmds: list[list[str]] = []
    netem_parent = ["root"]
    if plan.rate_bps:
        cmds.append(["tc", "qdisc", "replace", "dev", iface, "root", "handle", TBF_HANDLE, "tbf",
                     "rate", f"{plan.rate_bps}bit", "burst", str(plan.burst_bytes), "limit", str(plan.limit_bytes)])
        netem_parent = ["parent", "1:1"]
    if plan.netem:
        cmds.append(["tc", "qdisc", "replace", "dev", iface, *netem_parent, "handle", NETEM_HANDLE, "netem",
                     "limit", str(plan.netem_limit_packets), *plan.netem_args()])
    return cmds


def _close(a: float, b: float, rel: float, abs_: float) -> bool:
    return abs(a - b) <= max(abs_, rel * abs(b))


def _check_netem(where: str, plan: Impairment, netem: dict) -> list[str]:
    """Every impairment of the table against netem's options as read back (iproute2 prints percentages as
    fractions: `"loss-random": {"loss": 0.001}` for 0.1%)."""
    problems = []
    opts = netem.get("options", {})
    for row, planned in plan.rows():
        outer, inner = row.read_back
        got = float((opts.get(outer) or {}).get(inner, 0.0))
        if not _close(got, planned, *row.tolerance):
            unit = "s" if row.unit == "duration" else ""
            problems.append(f"{where} netem {row.label} is {got}{unit}, planned {planned}{unit}")
    return problems


def _check_tree_qdiscs(iface: str, plan: QdiscPlan, mine: list[dict]) -> list[str]:
    """The qdiscs of an htb tree per destination: htb at the root, one netem per impaired leaf, nothing else."""
    where = f"{iface}:"
    root = next((q for q in mine if q.get("root")), None)
    if root is None or root.get("kind") != "htb" or root.get("handle") != ROOT_HANDLE:
        return [(f"{where} expected htb {ROOT_HANDLE} at the root (a class per destination), found "
                f"{root.get('kind') if root else 'no root qdisc'}")]
    leaves = path_classes(plan)
    problems = []
    if int(str(root.get("options", {}).get("default", "0")), 0) != leaves[0].minor:
        problems.append(f"{where} htb default class is {root.get('options', {}).get('default')}, "
                        f"planned {leaves[0].classid}")
    netems = {q.get("parent"): q for q in mine if q.get("kind") == "netem"}
    for leaf in leaves:
        got = netems.pop(leaf.classid, None)
        if leaf.netem is None:
            if got is not None:
                problems.append(f"{where} unplanned netem under {leaf.classid}")
        elif got is None:
            problems.append(f"{where} expected netem under {leaf.classid}, found none (does this kernel have netem?)")
        else:
            problems += _check_netem(f"{where} {leaf.classid}", leaf.netem, got)
    problems += [f"{where} unplanned netem under {parent}" for parent in netems]
    problems += [f"{where} unplanned {q.get('kind')} qdisc present" for q in mine if q.get("kind") not in ("htb", "netem")]
    return problems


def check_qdiscs(iface: str, plan: Direction, qdiscs: list[dict]) -> list[str]:
    """Problems (empty when it matches) between `plan` and `tc -j qdisc show` output for the interface.
    Percentages read back as fractions (iproute2 prints `"loss-random": {"loss": 0.001}` for 0.1%).
    For a tree per destination, its qdiscs only (check_tree adds its classes and filters)."""
    plan = QdiscPlan.of(plan)
    mine = [q for q in qdiscs if q.get("dev", iface) == iface]
    if plan.per_destination:
        return _check_tree_qdiscs(iface, plan, mine)
    root = next((q for q in mine if q.get("root")), None)
    tbf = next((q for q in mine if q.get("kind") == "tbf"), None)
    netem = next((q for q in mine if q.get("kind") == "netem"), None)
    where = f"{iface}:"
    problems = []
    if plan.rate_bps:
        if tbf is None or tbf is not root:
            problems.append(f"{where} expected tbf at the root for {plan.rate_bps} bit/s, found "
                            f"{root.get('kind') if root else 'no root qdisc'}")
        else:
            got = int(tbf.get("options", {}).get("rate", 0)) * 8
            if not _close(got, plan.rate_bps, 0.001, 8):
                problems.append(f"{where} tbf rate is {got} bit/s, planned {plan.rate_bps} bit/s")
    elif tbf is not None:
        problems.append(f"{where} unplanned tbf qdisc present")
    if plan.netem:
        want_parent = "1:1" if plan.rate_bps else None
        if netem is None:
            problems.append(f"{where} expected netem ({plan.impairment_text()}), found none (does this kernel have netem?)")
        elif (netem.get("parent") != want_parent) if want_parent else not netem.get("root"):
            problems.append(f"{where} netem is attached at {netem.get('parent') or 'root'}, planned {want_parent or 'root'}")
        else:
            problems += _check_netem(where, plan, netem)
    elif netem is not None:
        problems.append(f"{where} unplanned netem qdisc present")
    return problems


def read_qdiscs(ns: NetnsRef, iface: str | None = None) -> list[dict]:
    """`tc -j qdisc show [dev IFACE]` inside `ns`, each entry with its `dev`."""
    argv = ["tc", "-j", "qdisc", "show"] + (["dev", iface] if iface else [])
    out = run_in(ns, argv).stdout.strip()
    qdiscs = json.loads(out) if out else []
    if iface:
        for q in qdiscs:
            q.setdefault("dev", iface)
    return qdiscs


def read_tree(ns: NetnsRef, iface: str) -> dict:
    """The classes and destination filters of one interface's htb tree: `{"classes": ..., "filters": ...}`
    (harness/distro_bench/net/tcclass.py parses them)."""
    classes = run_in(ns, ["tc", "class", "show", "dev", iface]).stdout
    out = run_in(ns, ["tc", "-j", "filter", "show", "dev", iface, "parent", ROOT_HANDLE], check=False).stdout.strip()
    filters = json.loads(out, object_pairs_hook=json_pairs) if out else []
    return {"classes": parse_htb_classes(classes), "filters": parse_u32_dst_filters(filters)}


def check_interface(ns: NetnsRef, iface: str, plan: Direction, qdiscs: list[dict]) -> tuple[list[str], dict]:
    """check_qdiscs, and for a tree per destination its classes and filters read back too: (problems, the
    tree read back, {} for a plain plan)."""
    plan = QdiscPlan.of(plan)
    problems = check_qdiscs(iface, plan, qdiscs)
    if not plan.per_destination:
        return problems, {}
    tree = read_tree(ns, iface)
    return problems + check_classes(iface, plan, tree["classes"], tree["filters"]), tree


def clear(ns: NetnsRef, ifaces: list[str]) -> None:
    """Remove whatever root qdisc the interfaces have (missing ones are fine)."""
    if ifaces:
        run_in(ns, ["tc", "-force", "-batch", "-"], input="".join(f"qdisc del dev {i} root\n" for i in ifaces),
               check=False)


def apply_plans(ns: NetnsRef, plans: dict[str, QdiscPlan]) -> dict[str, dict]:
    """Install each interface's plan in `ns` (one tc batch), read the tree back and verify it.

    Returns, per interface, what environment.json records: the plan, the commands and the read-back
    qdiscs. Raises ShapingError naming every mismatch."""
    plans = {iface: QdiscPlan.of(plan) for iface, plan in plans.items()}
    clear(ns, list(plans))
    cmds = {iface: tc_commands(iface, plan) for iface, plan in plans.items()}
    batch = "".join(" ".join(c[1:]) + "\n" for cs in cmds.values() for c in cs)
    tc_error = ""
    if batch:
        proc = run_in(ns, ["tc", "-batch", "-"], input=batch, check=False)
        if proc.returncode != 0:
            tc_error = (proc.stderr or proc.stdout).strip().replace("\n", "; ")
    # The read-back is the verdict; tc's own complaint is kept as the explanation.
    state = read_qdiscs(ns)
    applied, problems = {}, []
    for iface, plan in plans.items():
        mine = [q for q in state if q.get("dev") == iface]
        found, tree = check_interface(ns, iface, plan, mine)
        problems += found
        applied[iface] = {"netns": str(ns), "iface": iface, "plan": plan.to_dict(),
                          "tc": [" ".join(c) for c in cmds[iface]], "qdiscs": mine, **tree}
    if problems or tc_error:
        raise ShapingError(f"[{ns}] shaping not applied as planned: " + "; ".join(problems or ["(read-back matches)"])
                           + (f" (tc said: {tc_error})" if tc_error else ""))
    return applied


def apply_plan(ns: NetnsRef, iface: str, plan: QdiscPlan) -> dict:
    """One interface: see apply_plans."""
    return apply_plans(ns, {iface: plan})[iface]


# ---- changes at run time (harness/distro_bench/net/emulation.py: Emulation.change / outage) -----------------------

def _shape(plan: QdiscPlan) -> tuple[bool, bool, bool]:
    return bool(plan.rate_bps), bool(plan.netem), plan.per_destination


def changes_in_place(old: Direction | None, new: Direction) -> bool:
    """Whether `tc qdisc replace` may change the tree from `old` to `new` in place, keeping its queue.
    Not when the shape differs (a rate added or removed), for a tree per destination (its classes are
    not changed in place), nor when the tbf's burst would shrink: a queued packet larger than the new
    burst (a GSO packet the old, larger burst let in whole) never gathers the tokens to leave, and the
    link stalls for good (measured: a 20 -> 10 Mbit change mid-transfer left 22 packets of 6.7 kB
    queued behind a 6250-byte burst; TCP's retransmissions waited behind them until the run's timeout)."""
    if old is None:
        return False
    old, new = QdiscPlan.of(old), QdiscPlan.of(new)
    if _shape(old) != _shape(new) or new.empty or new.per_destination:
        return False
    return not (new.rate_bps and new.burst_bytes < old.burst_bytes)


def change_plan(ns: NetnsRef, iface: str, old: Direction | None, new: Direction) -> dict:
    """Change one interface from `old` to `new` and read it back. Where `changes_in_place` allows (a tbf
    whose rate rises, a netem whose loss changes), `tc qdisc replace` changes it in place and the queue is
    kept, as a line whose speed changes keeps its buffer; otherwise (a rate added, removed or lowered,
    coming back from an outage) the tree is rebuilt and what was queued is dropped (TCP resends it).
    Returns what apply_plans returns for it."""
    new = QdiscPlan.of(new)
    if not changes_in_place(old, new):
        return apply_plan(ns, iface, new)
    cmds = tc_commands(iface, new)
    proc = run_in(ns, ["tc", "-batch", "-"], input="".join(" ".join(c[1:]) + "\n" for c in cmds), check=False)
    mine = read_qdiscs(ns, iface)
    problems = check_qdiscs(iface, new, mine)
    if problems:
        said = (proc.stderr or proc.stdout).strip().replace("\n", "; ")
        raise ShapingError(f"[{ns}] change not applied as planned: " + "; ".join(problems)
                           + (f" (tc said: {said})" if said else ""))
    return {"netns": str(ns), "iface": iface, "plan": new.to_dict(), "tc": [" ".join(c) for c in cmds], "qdiscs": mine}


def blackhole(ns: NetnsRef, iface: str) -> dict:
    """An outage: the `blackhole` qdisc at the root drops every frame the interface would send (and
    tells the sender it was sent, so TCP sees loss and retransmits, as behind a dead line). Chosen
    because it exists where netem does not (this kernel) and works the same for both link engines:
    the delay line sits behind the shaped egress. Read back: the root must be `blackhole`."""
    run_in(ns, ["tc", "qdisc", "replace", "dev", iface, "root", "blackhole"], check=False)
    mine = read_qdiscs(ns, iface)
    root = next((q for q in mine if q.get("root")), None)
    if root is None or root.get("kind") != "blackhole":
        raise ShapingError(f"[{ns}] {iface}: outage not applied: root qdisc is "
                           f"{root.get('kind') if root else 'none'}, expected blackhole (tc qdisc blackhole)")
    return {"netns": str(ns), "iface": iface, "qdiscs": mine}
