"""This host's workers of one optimizer and seed: torchrun's command line (c10d rendezvous at node-rank 0's
agent), the workers' command and environment from train/launch.py's WorkerJob (as the single-host runner's),
torchrun started without NET_ADMIN and stopped with its workers, and its failure said in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from distro_bench import paths
from distro_bench.errors import WorkerFailed
from distro_bench.net.emulation import worker_env as wire_env_of
from distro_bench.run.failure import cause, without_cpp_frames
from distro_bench.run.launch import term_with_parent
from distro_bench.scenario import environ
from distro_bench.train.launch import WorkerLaunch

TORCHRUN_MODULE = "distro_bench.multihost.torchrun"


def pythonpath() -> str:
    """This harness first, so the janitor and workers import the agent's own code."""
    return os.pathsep.join([str(paths.IMPORT_ROOT)]
                           + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


def torchrun_args(*, rdzv_id: str, rdzv_endpoint: str, join_timeout_s: float, nnodes: int, node_rank: int,
                  nproc: int, local_addr: str | None) -> list[str]:
    """torchrun (with our bound store, torchrun.py), up to the worker's own module and flags."""
    argv = [sys.executable, "-m", TORCHRUN_MODULE, "--rdzv-backend", "c10d",
            "--rdzv-endpoint", rdzv_endpoint, "--rdzv-id", rdzv_id,
            # keep_alive_interval: each keep-alive rewrites the rendezvous state (~1 KB) over the shaped link,
            # every 5 s by default; with no restarts it only matters for a re-rendezvous that never comes.
            # is_host=false everywhere: node 0's agent serves the rendezvous store itself, on the rendezvous
            # address alone (endpoints.serve_rendezvous); torchrun would listen on every address.
            "--rdzv-conf", f"is_host=false,join_timeout={int(join_timeout_s)},keep_alive_interval=30",
            "--nnodes", str(nnodes), "--node-rank", str(node_rank),
            "--nproc-per-node", str(nproc), "--max-restarts", "0",
            # torchrun asks the rendezvous store whether nodes wait to join at every monitor interval: a
            # round trip over the shaped link (0.1 s by default), counted in the wire bytes. 5 s is plenty.
            "--monitor-interval", "5"]
    if local_addr is not None:
        argv += ["--local-addr", local_addr]  # the hostname may resolve to loopback or another network
    return argv


def wire_env(iface: str | None, workers_here: int) -> dict[str, str]:
    """What the workers need to take this host's interface and count their bytes there (net/emulation.py)."""
    if iface is None:
        return {}
    env = wire_env_of(iface)
    if workers_here > 1:
        # One interface, several workers: its counters are the host's, not a worker's; wire bytes
        # per worker are then not measurable (null), never a guessed share.
        env.pop(environ.WIRE_IFACE)
    return env


def start_torchrun(launch: WorkerLaunch, log_path: Path, base_env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """torchrun in its own session (stopped with its workers as one group), dying with this agent."""
    env = {**(os.environ if base_env is None else base_env), **launch.env}
    with open(log_path, "ab") as log:
        return subprocess.Popen(launch.argv, env=env, cwd=launch.cwd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=term_with_parent)  # noqa: PLW1509 (one prctl call, no locks)


def stop_torchrun(p: subprocess.Popen | None) -> None:
    if p is None or p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGTERM)  # torchrun stops its workers on SIGTERM
        p.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(5)
    except ProcessLookupError:
        pass


def torchrun_failed(what: str, node_rank: int, rc: int, log_path: Path) -> WorkerFailed:
    """The failure of one host's torchrun in one line with its cause; the log tail without C++ frames."""
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        text = ""
    why = cause(text)
    tail = "\n".join(without_cpp_frames(text).splitlines()[-15:])
    return WorkerFailed(f"{what}: torchrun on host {node_rank} exited with code {rc}"
                        + (f" ({why})" if why else "") + f"; log: {log_path}", log_tail="" if why else tail)
