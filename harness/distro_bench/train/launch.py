"""How a worker (train/worker.py) and a host's agent (`distro-bench node`) are started: argv, environment,
working directory, built here alone.

Three launchers start workers: the single-host runner (run/runner.py: one process per scenario node through its
backend), the multi-host agent (multihost/agent.py: torchrun, which starts the host's workers) and the recipes
(export/: a Slurm script and a Kubernetes manifest that start the agents, which start the workers). They all take
the worker's command and environment from `WorkerJob`, and the agent's command line from `node_args` (also what the
ssh backend runs on each host, backends/ssh.py), so what a worker is told cannot differ by how it was started.

Pure: no process is started here, and nothing heavier than the standard library is imported (export/ uses it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from distro_bench.scenario import environ

WORKER_MODULE = "distro_bench.train.worker"


@dataclass(frozen=True)
class WorkerLaunch:
    """One launch: the argv to execute, the environment to add to the launcher's own, the working directory
    (None: the launcher's)."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path | None = None


def threads_env(threads: int | str) -> dict[str, str]:
    """The torch threads of each worker, as the worker reads them."""
    return {environ.THREADS: str(threads)}


def default_threads(workers_here: int, cpu_count: int | None) -> int:
    """The host's CPUs shared among its workers, at least one each."""
    return max(1, (cpu_count or 1) // max(1, workers_here))


@dataclass(frozen=True)
class WorkerJob:
    """One optimizer and seed of a run, as every worker of it is told: the same for every launcher."""

    scenario_file: Path  # the run folder's scenario.yaml
    optimizer: str
    out: Path  # the worker folder of this optimizer and seed
    seed: int
    timeout_s: float  # the collective timeout
    dist_backend: str  # gloo | nccl (run/lifecycle.py choose_dist_backend)

    def args(self) -> list[str]:
        """The worker's module and flags: after a python (the runner) or after torchrun's flags (the agent)."""
        return ["-m", WORKER_MODULE, "--scenario", str(self.scenario_file), "--optimizer", self.optimizer,
                "--out", str(self.out), "--seed", str(self.seed)]

    def env(self, threads: int | str) -> dict[str, str]:
        """What every worker of this job reads, whoever starts it."""
        return {environ.TIMEOUT_S: f"{self.timeout_s:.0f}", environ.DIST_BACKEND: self.dist_backend,
                **threads_env(threads), "PYTHONUNBUFFERED": "1"}

    def for_rank(self, python: str, rank: int, world_size: int, master_addr: str, master_port: int,
                 threads: int | str, backend_env: Mapping[str, str] | None = None) -> WorkerLaunch:
        """A worker started by itself (the single-host runner): torch.distributed's env:// rendezvous in its
        environment, then the backend's own variables (the interface to bind and count, ...)."""
        env = {"WORLD_SIZE": str(world_size), "MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port),
               **self.env(threads), "RANK": str(rank), "LOCAL_RANK": str(rank), **(backend_env or {})}
        return WorkerLaunch([python, *self.args()], env)

    def under_torchrun(self, torchrun_argv: Sequence[str], placement: str, node_rank: int, threads: int | str,
                       pythonpath: str, wire_env: Mapping[str, str] | None = None) -> WorkerLaunch:
        """A host's workers started by torchrun (the multi-host agent): torchrun's argv, then the worker's; each
        worker finds its scenario rank from the placement and this host's node rank (scenario/placement.py)."""
        env = {environ.PLACEMENT: placement, environ.NODE_RANK: str(node_rank), **self.env(threads),
               "PYTHONPATH": pythonpath, **(wire_env or {})}
        return WorkerLaunch([*torchrun_argv, *self.args()], env)


def node_args(scenario: str, *, rdzv: str, node_rank: str, nnodes: str, placement: str, iface: str, out: str,
              secret_file: str | None, flags: Sequence[str] = ()) -> list[str]:
    """`distro-bench node`'s arguments (after the command): one host's agent, as the Slurm script, the Kubernetes
    manifest and the ssh backend start it. Values are taken as given (a shell variable in a script, a literal
    elsewhere); `flags` come last."""
    return ["node", scenario, "--rdzv", rdzv, "--node-rank", node_rank, "--nnodes", nnodes, "--placement",
            placement, "--iface", iface, "--out", out,
            *(["--secret-file", secret_file] if secret_file is not None else []), *flags]
