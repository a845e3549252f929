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


def claim(run_id: str, run_dir: Path | None = None) -> None:
    """`run_dir` (a second line) lets `clean` mark the folder of a run whose process was killed."""
    text = f"{os.getpid()} {_start_time(os.getpid())}\n" + (f"{Path(run_dir).resolve()}\n" if run_dir else "")
    (runtime_dir() / f"{run_id}.owner").write_text(text)


def release(run_id: str) -> None:
    (runtime_dir() / f"{run_id}.owner").unlink(missing_ok=True)


def owner_alive(run_id: str) -> bool:
    """True while the process that claimed `run_id` is still running."""
    try:
        pid, start = (runtime_dir() / f"{run_id}.owner").read_text().splitlines()[0].split()
    except (OSError, ValueError, IndexError):
        return False
    return _start_time(int(pid)) == start


def abandoned_runs() -> list[tuple[str, int, Path]]:
    """(run id, pid, run folder) of every claim with a run folder whose owner died without releasing it
    (SIGKILL, out of memory, a power cut of the terminal)."""
    out = []
    for f in sorted(runtime_dir().glob("*.owner")):
        try:
            lines = f.read_text().splitlines()
            pid = int(lines[0].split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if len(lines) > 1 and lines[1] and not owner_alive(f.stem):
            out.append((f.stem, pid, Path(lines[1])))
    return out
