"""Removing namespaces by name: kill what runs inside, then delete. Used by every teardown and by
`distro-bench clean` (NetnsBackend.clean_leftovers: everything named `dbench-*` whose run is over)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterable

from harness.net import naming
from harness.net.ns import NetCommandError, run


def list_namespaces(run_id: str | None = None) -> list[str]:
    """Named namespaces of ours (of one run, or all `dbench-*`)."""
    try:
        out = run(["ip", "-j", "netns", "list"], check=False).stdout.strip()
    except NetCommandError:
        return []
    names = [e["name"] for e in json.loads(out)] if out else []
    return [n for n in names if naming.is_ours(n, run_id)]


def namespace_pids(name: str) -> list[int]:
    try:
        out = run(["ip", "netns", "pids", name], check=False).stdout
    except NetCommandError:
        return []
    return [int(p) for p in out.split() if p.isdigit()]


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
        proc = run(["ip", "netns", "del", name], check=False)
        if proc.returncode != 0 and name in list_namespaces():
            problems.append(f"{name}: ip netns del failed: {proc.stderr.strip()}")
    return problems
