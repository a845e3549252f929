"""netns backend: one Linux network namespace per worker, a star of tc-shaped access links to a
bridge in a switch namespace, wire bytes counted on each node's `eth0`. Needs root and iproute2.

Lifecycle: plan (pure; CapabilityError before anything exists) -> namespaces and veths -> tc on
every node's eth0 (uplink) and switch port p<i> (downlink), verified by reading back -> userspace
delay lines where that engine is used -> a ping from every node to the far end (catches a bridge
that drops) -> workers -> teardown by name, whatever happened.
"""

from __future__ import annotations

import atexit
import os
from dataclasses import asdict
from pathlib import Path

from harness.backends.base import Backend, BackendOptions, WorkerHandle, start_process
from harness.errors import CapabilityError, HarnessError
from harness.net import probe as net_probe
from harness.net.engines import NetworkPlan, plan_links
from harness.net.linktest import LinkTarget
from harness.net.ns import NetnsRef
from harness.net.shaping import apply_plans
from harness.net.topology import NODE_IFACE, Star, StarSpec
from harness.scenario import Scenario

# Workers run as root inside their namespace; without these capabilities they cannot touch the
# shaping (net_admin) or enter another namespace (sys_admin).
DROPPED_CAPS = "-net_admin,-sys_admin"


class NetnsBackend(Backend):
    name = "netns"

    def __init__(self, scenario: Scenario, run_dir: Path, options: BackendOptions | None = None):
        super().__init__(scenario, run_dir, options)
        self.plan: NetworkPlan | None = None
        self.star: Star | None = None
        self.applied: dict[int, dict] = {}
        self.delay_lines: dict[int, object] = {}
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
            return False, "the kernel has no tbf qdisc for rate shaping"
        extra = "netem" if caps.netem else ("no netem; userspace delay line" if caps.userspace_engine else "no netem")
        return True, f"root, network namespaces, tbf ({extra})"

    @classmethod
    def preflight(cls, scenario: Scenario, options: BackendOptions) -> NetworkPlan:
        """The link plan, or CapabilityError naming what cannot be emulated; creates nothing."""
        caps = net_probe.probe(docker=False, gpus=False)
        return plan_links(scenario, caps, engine=options.link_engine, allow_unemulated=options.allow_unemulated)

    # ---- lifecycle ---------------------------------------------------------------------
    def setup(self) -> None:
        self.plan = self.preflight(self.scenario, self.options)
        spec = StarSpec.build(self.run_id, self.scenario.world_size, self.plan.delay_line_ranks)
        self.star = Star(spec)
        atexit.register(self.teardown)
        self.star.up()
        self._shape()
        self._start_delay_lines()
        unreachable = self.star.check_reachable()
        if unreachable:
            raise HarnessError(f"no ping reply from the switch ({spec.switch_addr}) in {', '.join(unreachable)}: "
                               "bridged traffic is dropped (firewall, missing delay line?)")

    def _shape(self) -> None:
        assert self.star and self.plan
        ports = {}
        for p, node in zip(self.plan.nodes, self.star.spec.nodes):
            up = apply_plans(self.star.node_ref(node.index), {NODE_IFACE: p.up.qdisc})[NODE_IFACE]
            self.applied[p.rank] = {"up": up}
            ports[node.port] = p.down.qdisc
        down = apply_plans(self.star.switch_ref, ports)
        for p, node in zip(self.plan.nodes, self.star.spec.nodes):
            self.applied[p.rank]["down"] = down[node.port]

    def _start_delay_lines(self) -> None:
        assert self.star and self.plan
        if not self.plan.delay_line_ranks:
            return
        try:
            from harness.net.delayline import DelayLine, Impairment
        except ImportError as e:  # planning said it was there; say so plainly if it vanished
            raise CapabilityError(f"userspace link engine: harness.net.delayline cannot be imported ({e})") from None
        seed = self.scenario.train.seed
        for p, node in zip(self.plan.nodes, self.star.spec.nodes):
            if not p.needs_delay_line:
                continue
            up, down = p.up.spec, p.down.spec
            line = DelayLine(
                netns=node.link_ns, iface_a="a", iface_b="b",
                a_to_b=Impairment(up.delay_s, up.jitter_s, up.loss, seed=seed * 1000 + 2 * p.rank),
                b_to_a=Impairment(down.delay_s, down.jitter_s, down.loss, seed=seed * 1000 + 2 * p.rank + 1),
                log_path=self.run_dir / "net" / f"delayline-{p.name}.log")
            self.delay_lines[p.rank] = line
            line.start()

    def teardown(self) -> None:
        from harness.net.delayline import stop_all

        problems = stop_all(self.delay_lines)
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
        return {
            "GLOO_SOCKET_IFNAME": NODE_IFACE, "DISTRO_BENCH_WIRE_IFACE": NODE_IFACE,
            # NCCL would otherwise take shared memory or P2P between GPUs of this host and bypass the link.
            "NCCL_SOCKET_IFNAME": NODE_IFACE, "NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1",
        }

    def worker_argv(self, rank: int, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self._node(rank).ns, "setpriv", f"--bounding-set={DROPPED_CAPS}", *argv]

    def start_worker(self, rank: int, argv: list[str], env: dict[str, str], log_path: Path) -> WorkerHandle:
        return start_process(rank, self.worker_argv(rank, argv), {**os.environ, **env}, log_path)

    # ---- reuse by `links` and environment.json ---------------------------------------------
    def link_targets(self) -> list[LinkTarget]:
        assert self.star and self.plan
        out = []
        for p, node in zip(self.plan.nodes, self.star.spec.nodes):
            emulated = not any("delay" in x for x in p.up.not_emulated + p.down.not_emulated)
            out.append(LinkTarget(name=p.name, ns=self.star.node_ref(node.index), addr=node.addr,
                                  up=p.up.spec, down=p.down.spec, emulated_delay=emulated))
        return out

    def far_end(self) -> tuple[NetnsRef, str]:
        assert self.star
        return self.star.switch_ref, self.star.spec.switch_addr

    def describe(self) -> dict:
        nodes = []
        spec_nodes = self.star.spec.nodes if self.star else ()
        for p, sn in zip(self.plan.nodes if self.plan else (), spec_nodes):
            line = self.delay_lines.get(p.rank)
            n = next(x for x in self.scenario.nodes() if x.rank == p.rank)
            nodes.append({
                "rank": p.rank, "name": p.name, "address": sn.addr, "namespace": sn.ns, "link": p.link_name,
                "link_spec": n.link.describe() if n.link else "unshaped",
                "applied": {**self.applied.get(p.rank, {}),
                            "delay_line": None if line is None else {
                                "namespace": sn.link_ns, "up": asdict(line.a_to_b), "down": asdict(line.b_to_a)}},
                "not_emulated": p.not_emulated,
            })
        return {
            "backend": self.name, "network_emulated": True, "run_id": self.run_id,
            "link_engine": self.plan.engine if self.plan else None,
            "link_engine_reason": self.plan.engine_reason if self.plan else None,
            "topology": None if not self.star else {
                "switch_namespace": self.star.spec.switch_ns, "bridge": "br0", "far_end": self.star.spec.switch_addr,
                "interface": NODE_IFACE},
            "nodes": nodes,
            "not_emulated": self.plan.not_emulated if self.plan else [],
        }
