"""The end of a multi-host run: every host's last word in the agents' store (its state, shaping removed), and
node-rank 0 writing the run folder: every host's description, the partial records of the others, environment.json
(hosts, network, placement, which host failed), the prediction, summary and report."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from distro_bench.multihost.handover import shared_of
from distro_bench.multihost.runfolder import TOKEN_FILE
from distro_bench.multihost.store import AgentStore
from distro_bench.run import environment
from distro_bench.run.lifecycle import RunLifecycle
from distro_bench.scenario.model import Scenario
from distro_bench.scenario.placement import Placement

BACKEND = "multihost"


def say_bye(st: AgentStore, me: int, host: dict, state: str) -> None:
    try:
        st.set_json(f"host/{me}", host)
        st.store.set(f"bye/{me}", state)
    except Exception:
        pass  # node 0 (the store) is gone
    st.stop_heartbeat()


def wait_byes(st: AgentStore, nnodes: int, timeout_s: float = 30.0) -> None:
    """Node 0, before writing the folder: the others' last word (their final state, shaping removed)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        down = st.peer_status()
        if all(st.has(f"bye/{i}") or i in down for i in range(1, nnodes)):
            return
        time.sleep(0.2)


class Finalizer:
    """Node 0's writing of the run folder, from what every host said."""

    def __init__(self, scenario: Scenario, placement: Placement, life: RunLifecycle, st: AgentStore, run_dir: Path,
                 note: Callable[[str], None]):
        self.scenario, self.placement, self.life, self.st, self.run_dir, self.note = (
            scenario, placement, life, st, run_dir, note)

    def finalize(self, own_host: dict, failed_host: dict | None, rdzv: str, write_report: bool) -> None:
        """Every host's description, the partial records of the others, summary and report."""
        life, st, n = self.life, self.st, self.placement.nnodes
        hosts = []
        down: dict[int, tuple[str, str]] = {}
        try:
            down = st.peer_status()
        except Exception:
            pass
        for i in range(n):
            if i == 0:
                hosts.append(own_host)
                continue
            try:
                h = self.peer_host(i, st.get_record(f"host/{i}")) if st.has(f"host/{i}") else {
                    "node_rank": i, "state": "unknown"}
                if i in down:
                    h["state"] = down[i][0]
                    h["failure"] = down[i][1]
            except Exception as e:
                h = {"node_rank": i, "state": "unknown", "failure": str(e)}
            hosts.append(h)
        if life.state != "complete":
            # Records the others handed over before the failure.
            for key_tag in (f"{seed}/{name}" for seed, name in life.runs()):
                for i in range(1, n):
                    try:
                        if st.has(f"files/{key_tag}/{i}") and not shared_of(st, i):
                            st.take_files(key_tag, i, self.run_dir)
                    except Exception:
                        pass
        failed = failed_host or next(({"node_rank": h["node_rank"], "kind": h["state"], "message": h.get("failure")}
                                      for h in hosts if h.get("state") in ("lost", "failed")), None)
        env = {**environment.collect(), "backend": BACKEND,
               "backend_reason": f"{n} hosts, torchrun c10d rendezvous at {rdzv}",
               "network": self.network(hosts), "hosts": hosts, "placement": self.placement.encode(),
               "failed_host": failed}
        life.write_environment(env)
        if failed and life.reason and f"host {failed['node_rank']}" not in life.reason:
            life.reason = f"host {failed['node_rank']} {failed['kind']}: {failed.get('message')}; here: {life.reason}"
        try:
            life.write_prediction(env["network"])
        except Exception as e:  # the run's records matter more than the model's figures
            self.note(f"host 0: no prediction for this run: {type(e).__name__}: {e}")
        (self.run_dir / TOKEN_FILE).unlink(missing_ok=True)  # the others are done with the folder
        life.finish(write_report=write_report)

    def peer_host(self, i: int, h: dict) -> dict:
        """Host i's description as it sent it, with what node 0 knows itself (its rank, its scenario ranks and
        nodes: the placement's) put in place, and each part node 0 reads of the type it reads it as."""
        h = {**h, "node_rank": i, "ranks": list(self.placement.ranks_of(i)),
             "nodes": [n.name for n in self.scenario.nodes() if n.rank in self.placement.ranks_of(i)]}
        for key in ("shaping", "iface", "measured"):
            if h.get(key) is not None and not isinstance(h[key], dict):
                h[key] = None
        if isinstance(h.get("shaping"), dict):
            shaping = h["shaping"]
            if not isinstance(shaping.get("not_emulated", []), list) or not all(
                    isinstance(x, str) for x in shaping.get("not_emulated", [])):
                shaping["not_emulated"] = ["(host sent a malformed list)"]
            if shaping.get("applied") is not None and not isinstance(shaping["applied"], dict):
                shaping["applied"] = None
        if not isinstance(h.get("state"), str):
            h["state"] = "unknown"
        return h

    def network(self, hosts: list[dict]) -> dict:
        """environment.json's `network`, shaped like the netns backend's (one entry per scenario node)."""
        nodes, not_emulated, emulated = [], [], bool(hosts)
        by_rank = {n.rank: n for n in self.scenario.nodes()}
        for h in hosts:
            shaping = h.get("shaping")
            if not shaping:
                emulated = False
            for r in h.get("ranks") or self.placement.ranks_of(h["node_rank"]):
                n = by_rank[r]
                nodes.append({"rank": r, "name": n.name, "host": h["node_rank"], "hostname": h.get("hostname"),
                              "address": (h.get("iface") or {}).get("ipv4"), "link": n.link_name,
                              "link_spec": n.link.describe() if n.link else "unshaped",
                              "applied": (shaping or {}).get("applied") or {"delay_line": None},
                              "not_emulated": (shaping or {}).get("not_emulated", [])})
            not_emulated += (shaping or {}).get("not_emulated", [])
            if len(h.get("ranks") or []) > 1:
                not_emulated.append(f"host {h['node_rank']}: nodes {', '.join(h.get('nodes', []))} share one interface: "
                                    "traffic between them stays on the host, and wire bytes per worker are not measured")
        return {"backend": BACKEND, "network_emulated": emulated, "link_engine": "tc",
                "link_engine_reason": "tc on each host's interface (egress tbf, ingress through an ifb)",
                "nodes": nodes, "not_emulated": not_emulated}
