"""Removing namespaces by name: kill what runs inside, then delete. Used by every teardown and by
`distro-bench clean` (NetnsBackend.clean_leftovers: everything named `dbench-*` whose run is over)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable

from distro_bench.net import naming
from distro_bench.net.ns import delete_netns, list_netns, netns_pids


def list_namespaces(run_id: str | None = None) -> list[str]:
    """Named namespaces of ours (of one run, or all `dbench-*`)."""
    return [n for n in list_netns() if naming.is_ours(n, run_id)]


def namespace_pids(name: str) -> list[int]:
    return netns_pids(name)


def kill_namespace_processes(name: str, timeout_s: float = 3.0) -> list[int]:
    """SIGKILL every process in the namespace and wait for them to go; the pids that survived."""
    pids = namespace_pids(name)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout_s
    while pids and time.monotonic() < deadline:
        pids = namespace_pids(name)
        if pids:
            time.sleep(0.05)
    return pids


def delete_namespaces(names: Iterable[str]) -> list[str]:
    """Kill processes in, then delete, each namespace; deleting a namespace destroys its veths (and
    their peers elsewhere), bridges and qdiscs. Returns problems; never raises, so teardown finishes."""
    problems = []
    for name in names:
        survivors = kill_namespace_processes(name)
        if survivors:
            problems.append(f"{name}: processes {survivors} survived SIGKILL")
        problem = delete_netns(name)
        if problem and name in list_namespaces():
            problems.append(problem)
    return problems
