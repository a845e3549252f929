"""A fake Slurm for the recipe tests: `srun` and `scontrol` scripts to put first on PATH, so that an sbatch script
of `distro-bench export slurm` runs here as it would on an allocation."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

# The command once per node (SLURM_JOB_NUM_NODES, or srun's --nodes=N), srun's own options dropped.
_SRUN_HEAD = f"""#!{sys.executable}
# Fake srun: runs the command once per node, locally, with the per-task Slurm variables.
import os, subprocess, sys
args = sys.argv[1:]
nodes = int(os.environ["SLURM_JOB_NUM_NODES"])
while args and args[0].startswith("--"):
    if args[0].startswith("--nodes="):
        nodes = int(args[0].split("=", 1)[1])
    args = args[1:]
"""

# One node after the other (SLURM_NODEID only); the highest exit status.
SRUN_IN_TURN = _SRUN_HEAD + """\
sys.exit(max(subprocess.run(args, env={**os.environ, "SLURM_NODEID": str(i)}).returncode for i in range(nodes)))
"""

# Every node at once, each in its own session (nodes that rendezvous); the first nonzero exit status.
SRUN_AT_ONCE = _SRUN_HEAD + """\
procs = [subprocess.Popen(args, env={**os.environ, "SLURM_NODEID": str(i), "SLURM_PROCID": str(i),
                                     "SLURM_LOCALID": "0"}, start_new_session=True) for i in range(nodes)]
codes = [p.wait() for p in procs]
sys.exit(next((c for c in codes if c), 0))
"""

SCONTROL = """#!/bin/sh
# Fake scontrol: `scontrol show hostnames LIST` prints the fake allocation's hosts ($FAKE_SLURM_HOSTS), one a line.
[ "$1 $2" = "show hostnames" ] || exit 2
for h in $FAKE_SLURM_HOSTS; do echo "$h"; done
"""


def install(folder: Path, name: str, text: str) -> Path:
    """Write an executable script `name` into `folder`."""
    p = folder / name
    p.write_text(text)
    p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return p


def install_slurm(folder: Path, srun: str) -> None:
    """This `srun` (SRUN_IN_TURN or SRUN_AT_ONCE) and the fake `scontrol` in `folder`."""
    install(folder, "srun", srun)
    install(folder, "scontrol", SCONTROL)
