"""Every `DISTRO_BENCH_*` environment variable, named once: written and read through these constants.

Most are the contract between a launcher (run/runner.py, multihost/agent.py, the recipes) and the worker it starts
(train/worker.py): what train/launch.py's WorkerLaunch puts in a worker's environment. The rest are the user's
(a cache folder, a debug switch, opt-ins) and the variables a Slurm script reads (export/slurm.py). Here, in the
scenario layer, because scenario/ reads some of them itself (placement, confinement) and every layer above
imports it.
"""

from __future__ import annotations

# ---- launcher -> worker (train/launch.py writes them, the worker reads them) ---------------------------------
WIRE_IFACE = "DISTRO_BENCH_WIRE_IFACE"  # the interface whose counters are the worker's wire bytes
TIMEOUT_S = "DISTRO_BENCH_TIMEOUT_S"  # the collective timeout, seconds
DIST_BACKEND = "DISTRO_BENCH_DIST_BACKEND"  # gloo | nccl
THREADS = "DISTRO_BENCH_THREADS"  # torch threads of one worker
COMPUTE_SCALE = "DISTRO_BENCH_COMPUTE_SCALE"  # overrides the hardware profile's relative speed
PARENT_PID = "DISTRO_BENCH_PARENT_PID"  # the coordinator a worker dies with (backends/base.py start_process)
PLACEMENT = "DISTRO_BENCH_PLACEMENT"  # multi-host: the scenario ranks per host (scenario/placement.py)
NODE_RANK = "DISTRO_BENCH_NODE_RANK"  # multi-host: this host's --node-rank

# ---- the user's --------------------------------------------------------------------------------------------
TIMEOUT_SCALE = "DISTRO_BENCH_TIMEOUT_SCALE"  # the multiplier of every base timeout (train/liveness.py)
SECRET = "DISTRO_BENCH_SECRET"  # the agents' store secret (multihost/secret.py)
DEBUG = "DISTRO_BENCH_DEBUG"  # tracebacks on the console
CACHE = "DISTRO_BENCH_CACHE"  # where `hf:` corpora are cached (scenario/hfcorpus.py)
HF_MAX_BYTES = "DISTRO_BENCH_HF_MAX_BYTES"  # the most an `hf:` corpus downloads
ALLOW_TRACE_OUTSIDE = "DISTRO_BENCH_ALLOW_TRACE_OUTSIDE"  # --allow-trace-outside (scenario/problems.py)
ALLOW_CORPUS_OUTSIDE = "DISTRO_BENCH_ALLOW_CORPUS_OUTSIDE"  # --allow-corpus-outside

# ---- a Slurm script's (export/slurm.py): what a user sets at submission to change the exported defaults ---------
SLURM_SCENARIO = "DISTRO_BENCH_SCENARIO"
SLURM_IFACE = "DISTRO_BENCH_IFACE"
SLURM_OUT = "DISTRO_BENCH_OUT"
SLURM_RDZV_PORT = "DISTRO_BENCH_RDZV_PORT"
SLURM_SHAPING = "DISTRO_BENCH_SHAPING"
SLURM_SECRET_FILE = "DISTRO_BENCH_SECRET_FILE"
SLURM_COMMAND = "DISTRO_BENCH"  # the `distro-bench` command to run
