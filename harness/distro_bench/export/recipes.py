"""Launch recipes for a multi-host run: an sbatch script for Slurm (export/slurm.py) and a Kubernetes manifest
(export/k8s.py: an indexed Job, a headless Service for the rendezvous, the scenario as a ConfigMap, a claim for the
results). Both start `distro-bench node` once per host with the placement the export computed (`--placement`, so
every host and the recipe agree on it), its command line train/launch.py's node_args as every launcher's; text
generation from the scenario and a few settings, so tests can run and validate them offline. This module picks
the recipe and writes the file.
"""

from __future__ import annotations

import os
from pathlib import Path

from distro_bench.errors import InputError
from distro_bench.export.hostfiles import ShippedFile, shipped_files
from distro_bench.export.k8s import k8s_manifest
from distro_bench.export.k8s_checks import validate_manifest
from distro_bench.export.recipe_settings import RDZV_PORT, RecipeSettings
from distro_bench.export.slurm import sbatch_script, slurm_scenario_path
from distro_bench.scenario.model import Scenario
from distro_bench.scenario.placement import from_scenario

__all__ = ["RDZV_PORT", "RecipeSettings", "ShippedFile", "default_nnodes", "k8s_manifest", "sbatch_script",
           "shipped_files", "slurm_scenario_path", "validate_manifest", "write"]


def default_nnodes(scenario: Scenario, nnodes: int | None, placement: str | None = None) -> int:
    return from_scenario(scenario, nnodes, placement).nnodes


def write(kind: str, scenario_path: Path, dest: Path | None, s: RecipeSettings, scenario: Scenario) -> Path:
    if kind == "slurm":
        default = f"{scenario.name}.sbatch"
    elif kind == "k8s":
        default = f"{scenario.name}.k8s.yaml"
    else:
        raise InputError(f"export: unknown recipe {kind!r}; one of slurm, k8s")
    path = dest or Path(default)
    if path.is_dir():
        path = path / default
    if kind == "slurm":
        text = sbatch_script(scenario, slurm_scenario_path(scenario, scenario_path, path), s)
    else:
        text = k8s_manifest(scenario, str(scenario_path), s)
    if kind == "slurm":
        path.write_text(text)
        path.chmod(0o755)
    else:  # it holds the run's secret (its Secret): its owner's alone from the first byte
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        path.chmod(0o600)
    return path
