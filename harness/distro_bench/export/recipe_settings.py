"""What a launch recipe (export/slurm.py, export/k8s.py) is made from besides the scenario: its settings, and
the names and placement both recipes derive from them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from distro_bench.scenario.model import Scenario
from distro_bench.scenario.placement import from_scenario

RDZV_PORT = 29400


@dataclass(frozen=True)
class RecipeSettings:
    nnodes: int
    placement: str | None = None  # Placement.encode(); given to every `distro-bench node` as --placement
    iface: str = "eth0"
    port: int = RDZV_PORT
    out: str = "results"  # slurm: --out (relative to the job's working directory); k8s: always /results
    image: str = "distro-bench-node:latest"
    time_limit: str = "01:00:00"
    cpus_per_task: int | None = None
    gpus_per_node: int = 0
    i_know: bool = False  # the interface carries the default route (always so in a pod)
    results_claim: str | None = None  # k8s: an existing claim for /results; None: the manifest declares one
    results_size: str = "10Gi"  # k8s: the storage the declared claim requests
    extra: tuple[str, ...] = ()  # more `distro-bench node` flags, e.g. --optimizer adamw


def dns_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40].strip("-")
    return f"dbench-{name}" if name else "dbench"


def placement_of(scenario: Scenario, s: RecipeSettings) -> str:
    return from_scenario(scenario, s.nnodes, s.placement).encode()
