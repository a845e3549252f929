"""Local backend: N worker processes on 127.0.0.1, no shaping. Works everywhere; measures compute and payload only."""

from __future__ import annotations

from pathlib import Path

from distro_bench.backends.base import Backend, WorkerHandle
from distro_bench.backends.requirements import Needs, Requirement, Unsupported


class LocalBackend(Backend):
    name = "local"

    @classmethod
    def probe(cls, scenario=None):
        return True, "always available (loopback, network not emulated)"

    @classmethod
    def requirements(cls, needs: Needs) -> list[Requirement]:
        if not needs.traces:
            return []
        # A trace is all a trace scenario measures; loopback cannot shape, so the run would measure nothing of it.
        return [Unsupported(what="shaped links (the netns or docker backend)", fix="--backend netns (as root)",
                            needed_for=f"the bandwidth trace of link {', '.join(repr(x) for x in needs.traces)} "
                                       "(the local backend runs on loopback and cannot shape)", emulation=True)]

    def master_addr(self) -> str:
        return "127.0.0.1"

    def worker_env(self, rank: int) -> dict[str, str]:
        return {"GLOO_SOCKET_IFNAME": "lo"}

    def start_worker(self, rank: int, argv: list[str], env: dict[str, str], log_path: Path) -> WorkerHandle:
        # No capability, no_new_privs, and nobody's uid where the coordinator is root (base.choose_worker_user).
        return self.start_unprivileged(rank, argv, env, log_path)

    def describe(self) -> dict:
        shaped = [n.name for n in self.scenario.nodes() if n.link is not None and n.link.shaped]
        return {
            "backend": self.name,
            "network_emulated": False,
            "nodes": [{"rank": n.rank, "name": n.name, "address": "127.0.0.1", "applied": None} for n in self.scenario.nodes()],
            "not_emulated": [f"{name}: link not emulated (local backend runs on loopback)" for name in shaped],
        }
