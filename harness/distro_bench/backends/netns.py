"""netns backend: one Linux network namespace per worker, a star of tc-shaped access links to a
bridge in a switch namespace, wire bytes counted on each node's `eth0`. Needs root, pyroute2 and `tc`.

Lifecycle: the link plan (made at preflight; CapabilityError before anything exists) -> namespaces
and veths (harness/distro_bench/net/topology.py) -> the emulation (harness/distro_bench/net/emulation.py) on every node's eth0
(uplink) and switch port p<i> (downlink), read back, with delay lines in link namespaces where that
engine is used -> a ping from every node to the far end (catches a bridge that drops) -> workers ->
teardown by name, whatever happened.
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path

from distro_bench.backends.base import Backend, BackendOptions, WorkerHandle
from distro_bench.backends.requirements import Needs, Requirement, emulation_requirements
from distro_bench.errors import HarnessError
from distro_bench.net import cleanup, naming, owner
from distro_bench.net import host as net_probe
from distro_bench.net.emulation import Emulation, describe_plan, worker_env
from distro_bench.net.engines import NetworkPlan, plan_links
from distro_bench.net.linktest import LinkTarget, with_sites
from distro_bench.net.ns import NetnsRef
from distro_bench.net.owner import owner_alive
from distro_bench.net.topology import NODE_IFACE, Star, StarSpec
from distro_bench.scenario.model import Scenario, region_matrix, site_layout


class NetnsBackend(Backend):
    name = "netns"

    def __init__(self, scenario: Scenario, run_dir: Path, options: BackendOptions | None = None,
                 plan: NetworkPlan | None = None):
        super().__init__(scenario, run_dir, options, plan)
        self.star: Star | None = None
        self.emulation: Emulation | None = None
        self.teardown_problems: list[str] = []

    # ---- capability ------------------------------------------------------------------
    @classmethod
    def probe(cls, scenario: Scenario | None = None) -> tuple[bool, str]:
        if os.geteuid() != 0:
            return False, "needs root (network namespaces and tc)"
        caps = net_probe.probe(docker=False, gpus=False)
        if not caps.netns:
            return False, f"cannot create network namespaces: {caps.netns_error}"
        if not caps.rate_shaping:
            return False, f"{caps.qdisc_missing('tbf')} (rate shaping)"
        extra = "netem" if caps.netem else ("no netem; userspace delay line" if caps.userspace_engine else "no netem")
        return True, f"root, network namespaces, tbf ({extra})"

    @classmethod
    def requirements(cls, needs: Needs) -> list[Requirement]:
        # Root, pyroute2, namespaces + veth, `tc` (it reads back every qdisc), tbf for rates, a link engine
        # for delay; workers start through harness/distro_bench/net/enter.py (setns, capabilities dropped).
        return emulation_requirements(needs, "the netns backend", namespaces=True)

    @classmethod
    def preflight(cls, scenario: Scenario, options: BackendOptions) -> NetworkPlan:
        """The link plan, or CapabilityError naming what cannot be emulated; creates nothing."""
        caps = net_probe.probe(docker=False, gpus=False)
        return plan_links(scenario.nodes(), caps, engine=options.link_engine,
                          allow_unemulated=options.allow_unemulated, seed=scenario.train.seed,
                          regions=region_matrix(scenario), sites=site_layout(scenario))

    @classmethod
    def clean_leftovers(cls, include_live: bool = False) -> tuple[list[str], list[str]]:
        """Namespaces named dbench-* (harness/distro_bench/net/naming.py) whose run is over, with their veths,
        bridges, qdiscs and delay lines, and delay lines' temporary folders whose coordinator is gone."""
        # through the module, not a name bound at import: a test wraps cleanup.list_namespaces
        names = []
        for n in cleanup.list_namespaces():
            rid = naming.run_id_of(n)
            if not owner_alive(rid):
                names.append(n)
            elif include_live:  # clean --force: the live run is told who ended it (its status says so)
                owner.mark_ended_by_clean(owner.claim_record(rid), f"namespace {n}")
                names.append(n)
        problems = cleanup.delete_namespaces(names)
        # The temporary folders of delay lines (both backends') whose coordinator was killed.
        dirs, dir_problems = cleanup.remove_delayline_dirs()
        return [f"namespace {n}" for n in names] + dirs, problems + dir_problems

    # ---- lifecycle ---------------------------------------------------------------------
    def setup(self) -> None:
        if self.plan is None:
            self.plan = self.preflight(self.scenario, self.options)
        spec = StarSpec.for_plan(self.run_id, self.plan)
        self.star = Star(spec)
        atexit.register(self.teardown)
        self.star.up()
        self.emulation = Emulation(self.plan, self.star.endpoints(), log_dir=self.run_dir,
                                   sites=self.star.site_endpoints())
        self.emulation.apply()
        unreachable = self.star.check_reachable()
        if unreachable:
            raise HarnessError(f"no ping reply from the switch ({spec.switch_addr}) in {', '.join(unreachable)}: "
                               "bridged traffic is dropped (firewall, missing delay line?)")

    def teardown(self) -> None:
        problems = self.emulation.stop() if self.emulation else []
        if self.star is not None:
            problems += self.star.down()
        atexit.unregister(self.teardown)
        self.teardown_problems += problems

    # ---- workers -----------------------------------------------------------------------
    def _node(self, rank: int):
        if self.star is None:
            raise HarnessError("netns backend used before setup")
        return self.star.spec.nodes[rank]

    def master_addr(self) -> str:
        return self._node(0).addr

    def worker_env(self, rank: int) -> dict[str, str]:
        return worker_env(NODE_IFACE)

    def worker_argv(self, rank: int, argv: list[str]) -> list[str]:
        """`argv` as rank's worker runs it, but with the coordinator's uid (start_worker adds nobody's)."""
        return NetnsRef.named(self._node(rank).ns).wrap(argv, no_caps=True)

    def start_worker(self, rank: int, argv: list[str], env: dict[str, str], log_path: Path) -> WorkerHandle:
        # harness/distro_bench/net/enter.py: setns, then no capability at all (it can neither reshape its link,
        # enter another namespace nor ptrace the coordinator), no_new_privs, and nobody's uid where it can be.
        return self.start_unprivileged(rank, argv, env, log_path, netns=NetnsRef.named(self._node(rank).ns))

    # ---- reuse by `links` and environment.json ---------------------------------------------
    def link_targets(self) -> list[LinkTarget]:
        assert self.star and self.plan
        out = []
        for p, node in zip(self.plan.nodes, self.star.spec.nodes):
            emulated = not any("delay" in x for x in p.up.not_emulated + p.down.not_emulated)
            out.append(LinkTarget(name=p.name, ns=self.star.node_ref(node.index), addr=node.addr,
                                  up=p.up.spec, down=p.down.spec, emulated_delay=emulated,
                                  region=p.region, pair_delay_s=tuple((self.star.spec.nodes[r].addr, d)
                                                                      for r, d, _, _ in p.pair_paths),
                                  pair_jitter_s=tuple((self.star.spec.nodes[r].addr, j)
                                                      for r, _, j, _ in p.pair_paths)))
        return with_sites(out, self.plan)

    def far_end(self) -> tuple[NetnsRef, str]:
        assert self.star
        return self.star.switch_ref, self.star.spec.switch_addr

    def link_probe(self) -> tuple[list[LinkTarget], NetnsRef, str] | None:
        return (self.link_targets(), *self.far_end()) if self.star and self.plan else None

    def describe(self) -> dict:
        nodes = []
        spec_nodes = self.star.spec.nodes if self.star else ()
        by_rank = {n.rank: n for n in self.scenario.nodes()}
        for p, sn in zip(self.plan.nodes if self.plan else (), spec_nodes):
            n = by_rank[p.rank]
            applied = self.emulation.describe_node(p.rank) if self.emulation else None
            nodes.append({
                "rank": p.rank, "name": p.name, "address": sn.addr, "namespace": sn.ns, "link": p.link_name,
                "region": p.region,
                "link_spec": n.link.describe() if n.link else "unshaped",
                "applied": applied or {"delay_line": None},
                "not_emulated": p.not_emulated,
            })
        plan = describe_plan(self.plan)
        return {
            "backend": self.name, "network_emulated": True, "run_id": self.run_id,
            "link_engine": plan["link_engine"], "link_engine_reason": plan["link_engine_reason"],
            "topology": None if not self.star else {
                "switch_namespace": self.star.spec.switch_ns, "bridge": "br0", "far_end": self.star.spec.switch_addr,
                "interface": NODE_IFACE, "sites": self.emulation.describe_sites() if self.emulation else []},
            "nodes": nodes,
            "not_emulated": plan["not_emulated"],
        }
