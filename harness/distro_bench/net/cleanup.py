"""Removing namespaces by name: kill what runs inside, then delete. Used by every teardown and by
`distro-bench clean` (NetnsBackend.clean_leftovers: everything named `dbench-*` whose run is over, and the
temporary folders of delay lines whose coordinator is gone)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from distro_bench.errors import terminal_text as escaped
from distro_bench.net import naming, owner
from distro_bench.net.ns import delete_netns, list_netns, netns_pids
from distro_bench.results.runfiles import RunFileError


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


DELAYLINE_PREFIX = "dbench-delayline-"  # harness/distro_bench/net/delayline/controller.py's temporary folders
# A folder without an owner (an older harness's) and no process naming it: left for this long, in case its
# line is just starting.
UNOWNED_GRACE_S = 60.0


def _referenced(folder: Path) -> bool:
    """Does a running process name `folder` in its command line (a delay line's --stats path)?"""
    needle = str(folder).encode()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if needle in (d / "cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False


def stale_delayline_dirs(base: Path | None = None, skipped: list[str] | None = None) -> list[Path]:
    """Delay-line temporary folders whose coordinator is gone: its owner (owner.json) proven dead, or, for a
    folder with none, no process naming it for UNOWNED_GRACE_S. /tmp is anyone's: a link, a FIFO, a device or
    a huge file where owner.json should be is not followed, waited on nor read past its cap
    (results/runfiles.py); that folder is left alone and named in `skipped` (its name escaped)."""
    base = Path(base or tempfile.gettempdir())
    out = []
    for d in sorted(base.glob(DELAYLINE_PREFIX + "*")):
        if d.is_symlink() or not d.is_dir():
            continue
        try:
            rec = owner.folder_owner(d)
        except RunFileError as e:
            if skipped is not None:
                skipped.append(f"delay-line folder {escaped(d)}: skipped, not ours ({escaped(e)})")
            continue
        if rec:
            alive, _ = owner.judge(rec)
            if alive is False:
                out.append(d)
            continue
        try:
            old = time.time() - d.stat().st_mtime > UNOWNED_GRACE_S
        except OSError:
            continue
        if old and not _referenced(d):
            out.append(d)
    return out


def remove_delayline_dirs(base: Path | None = None) -> tuple[list[str], list[str]]:
    """`clean`: remove stale_delayline_dirs(); (removed, problems)."""
    removed: list[str] = []
    problems: list[str] = []
    for d in stale_delayline_dirs(base, skipped=problems):
        try:
            shutil.rmtree(d)  # removes links inside, never what they point to
            removed.append(f"delay-line folder {escaped(d)}")
        except OSError as e:
            problems.append(f"delay-line folder {escaped(d)}: {e.strerror or e}")
    return removed, problems
