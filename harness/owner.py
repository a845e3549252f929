"""Which live process owns a run's namespaces and containers, so `distro-bench clean` removes only what
a dead run left behind and never pulls the network out from under a run that is still going.

A backend claims its run id before creating anything and releases it after teardown. The claim is a
file holding the owner's pid and the kernel's start time of that pid (so a recycled pid is not
mistaken for the owner). No library covers this; it is a dozen lines.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def runtime_dir() -> Path:
    for base in (Path("/run"), Path(tempfile.gettempdir())):
        d = base / "distro-bench"
        try:
            d.mkdir(parents=True, exist_ok=True)
            if os.access(d, os.W_OK):
                return d
        except OSError:
            continue
    raise OSError("no writable runtime folder for run ownership")


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def claim(run_id: str) -> None:
    (runtime_dir() / f"{run_id}.owner").write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")


def release(run_id: str) -> None:
    (runtime_dir() / f"{run_id}.owner").unlink(missing_ok=True)


def owner_alive(run_id: str) -> bool:
    """True while the process that claimed `run_id` is still running."""
    try:
        pid, start = (runtime_dir() / f"{run_id}.owner").read_text().split()
    except (OSError, ValueError):
        return False
    return _start_time(int(pid)) == start
