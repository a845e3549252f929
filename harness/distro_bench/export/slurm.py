"""The Slurm recipe of a multi-host run: an sbatch script with one task per node; the first host of the allocation
(`scontrol show hostnames`) serves the rendezvous, and each task's SLURM_NODEID is its --node-rank. The scenario
is named relative to the script's folder, the job's working directory when it is submitted from there (copied
next to the script, with the files it names, when it lies elsewhere). The agent's command line is
train/launch.py's node_args, as the Kubernetes manifest's and the ssh backend's."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from distro_bench.export.hostfiles import shipped_files
from distro_bench.export.recipe_settings import RecipeSettings, dns_name, placement_of
from distro_bench.scenario import environ as E
from distro_bench.scenario.model import Scenario
from distro_bench.scenario.placement import Placement
from distro_bench.train.launch import node_args


def sbatch_script(scenario: Scenario, scenario_path: str, s: RecipeSettings) -> str:
    """An sbatch script: one `distro-bench node` per allocated node, node 0's host the rendezvous.
    `scenario_path` is read from the job's working directory (the folder sbatch is run in)."""
    placement = placement_of(scenario, s)
    # One agent per node: `distro-bench node` as every launcher starts it (train/launch.py), its values the
    # script's variables (double-quoted inside bash -c's single quotes) and SLURM_NODEID its node rank.
    words = [f'"{a}"' if a.startswith("$") else a for a in node_args(
        "$SCENARIO", rdzv="$HEAD:$PORT", node_rank="$SLURM_NODEID", nnodes="$NNODES", placement="$PLACEMENT",
        iface="$IFACE", out="$OUT", secret_file="$SECRET_FILE")]
    cut = words.index("--placement")  # two lines, for the reader
    node = " ".join(words[:cut]) + " \\\n    " + " ".join(words[cut:])
    flags = "".join(f" {shlex.quote(x)}" for x in (*(["--i-know"] if s.i_know else []), *s.extra))
    gpu = f"#SBATCH --gpus-per-node={s.gpus_per_node}\n" if s.gpus_per_node else ""
    cpus = f"#SBATCH --cpus-per-task={s.cpus_per_task}\n" if s.cpus_per_task else ""
    nnodes = Placement.decode(placement).nnodes
    return f"""#!/bin/bash
# distro-bench across {nnodes} Slurm nodes: scenario {scenario.name} ({scenario.world_size} workers).
# Written by `distro-bench export slurm`; docs/scaling-out.md. Submit it from the folder it is in: the
# scenario path below is relative to that folder, the job's working directory. Shaping needs root (or
# CAP_NET_ADMIN) on the compute nodes; without it set {E.SLURM_SHAPING}=--no-shaping to measure the
# network as it is.
#SBATCH --job-name={dns_name(scenario.name)}
#SBATCH --nodes={nnodes}
#SBATCH --ntasks-per-node=1
{cpus}{gpu}#SBATCH --time={s.time_limit}
#SBATCH --output=distro-bench-%j.out
set -euo pipefail

SCENARIO=${{{E.SLURM_SCENARIO}:-{shlex.quote(scenario_path)}}}
IFACE=${{{E.SLURM_IFACE}:-{shlex.quote(s.iface)}}}
OUT=${{{E.SLURM_OUT}:-{shlex.quote(s.out)}}}
PORT=${{{E.SLURM_RDZV_PORT}:-{s.port}}}
{E.SLURM_COMMAND}=${{{E.SLURM_COMMAND}:-distro-bench}}
SHAPING=${{{E.SLURM_SHAPING}:---shaping}}
# Scenario ranks per host, in node-rank order: what the export computed, given to every agent (re-export
# to change it: the node count above follows from it).
PLACEMENT={shlex.quote(placement)}
NNODES={nnodes}

if [ ! -f "$SCENARIO" ]; then
  echo "distro-bench: scenario $SCENARIO not found from $PWD; submit this script from its own folder," \\
       "or set {E.SLURM_SCENARIO}" >&2
  exit 2
fi
if [ "${{SLURM_JOB_NUM_NODES:-$NNODES}}" != "$NNODES" ]; then
  echo "distro-bench: the allocation has $SLURM_JOB_NUM_NODES nodes, the placement $PLACEMENT needs $NNODES" >&2
  exit 2
fi

# The first host of the allocation serves torchrun's c10d rendezvous (PORT) and the agents' store (PORT+1).
# sed reads every line: `head -n 1` would close the pipe early, and pipefail fail the job on scontrol's SIGPIPE.
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)

# The agents' store answers only hosts holding this run's secret: a file only the job's user reads, in the job's
# working directory (which every node reads, as it reads the scenario), made here unless one is given; its path
# goes on the command line, the secret itself never does. Removed when the job ends.
SECRET_FILE=${{{E.SLURM_SECRET_FILE}:-}}
if [ -z "$SECRET_FILE" ]; then
  SECRET_FILE=.distro-bench-${{SLURM_JOB_ID:-$$}}.secret
  (umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$SECRET_FILE")
  trap 'rm -f "$SECRET_FILE"' EXIT
fi
export HEAD PORT SCENARIO IFACE OUT {E.SLURM_COMMAND} SHAPING NNODES PLACEMENT SECRET_FILE

# One agent per node; SLURM_NODEID is its node rank. --kill-on-bad-exit stops the others if one fails
# (each removes its own shaping on SIGTERM).
srun --nodes="$NNODES" --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c '
  exec ${E.SLURM_COMMAND} {node} $SHAPING{flags}'
"""


def slurm_scenario_path(scenario: Scenario, scenario_path: Path, script: Path) -> str:
    """The scenario as the script names it, relative to the script's folder. One outside that folder is
    copied, with the files it names, to <script stem>-scenario/ next to the script: the folder then holds
    everything the job reads, and can be copied to the cluster as it is."""
    folder = script.resolve().parent
    src = scenario_path.resolve()
    if src.is_relative_to(folder):
        return src.relative_to(folder).as_posix()
    files = shipped_files(scenario, scenario_path)
    copy = folder / f"{script.stem}-scenario"
    if copy.exists():
        shutil.rmtree(copy)  # ours, from an earlier export of this script
    for f in files:
        (copy / f.rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f.src, copy / f.rel)
    return f"{copy.name}/{files[0].rel}"
