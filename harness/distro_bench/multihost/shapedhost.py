"""This host's shaping for one run: applied with a janitor watching (the shaping never outlives the agent, even
SIGKILLed: janitor.py), read back, and removed on every exit path."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

from distro_bench.multihost.hostshaping import HostShaping
from distro_bench.multihost.workers import pythonpath
from distro_bench.net.engines import NetworkPlan


class ShapedHost:
    def __init__(self, plan: NetworkPlan, iface: str, replace_foreign: bool):
        self.plan, self.iface = plan, iface
        self.shaping: HostShaping | None = HostShaping(plan, iface, replace_foreign=replace_foreign)
        self.janitor: subprocess.Popen | None = None

    def apply(self, link_spec: str) -> dict:
        """Shape the interface; the host's `shaping` record (environment.json `hosts[i].shaping`)."""
        shaping = self.shaping
        assert shaping is not None, "applied once, before remove()"
        # The janitor first: whatever happens from here on, the shaping does not outlive this process.
        self.janitor = subprocess.Popen(
            [sys.executable, "-m", "distro_bench.multihost.janitor", "--pid", str(os.getpid()), "--iface", self.iface,
             "--ifb", shaping.ifb, "--root"], start_new_session=True, stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": pythonpath()})
        applied = shaping.apply()
        return {"iface": self.iface, "link": self.plan.nodes[0].link_name, "link_spec": link_spec,
                "engine": self.plan.engine, "not_emulated": self.plan.not_emulated,
                "applied": applied, "read_back_problems": shaping.verify()}

    def remove(self, host: dict, note: Callable[[str], None], node_rank: int) -> None:
        """The janitor stopped (we clean up ourselves; it must not race a later agent's shaping), then the
        shaping removed; what did not come off is said and recorded in `host`."""
        if self.janitor is not None:
            self.janitor.terminate()
            try:
                self.janitor.wait(5)
            except subprocess.TimeoutExpired:
                self.janitor.kill()
        if self.shaping is not None:
            problems = self.shaping.remove()
            host["shaping_removed"] = not problems
            if problems:
                host["shaping_removal_problems"] = problems
                note(f"host {node_rank}: shaping removal problems: {'; '.join(problems)}")
            self.shaping = None
