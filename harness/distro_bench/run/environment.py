"""What produced a run: versions, host, kernel and git state (pyperf/asv practice: results carry their environment)."""

from __future__ import annotations

import platform
import socket
import subprocess
import sys

import distro_bench
from distro_bench import paths
from distro_bench.net import host


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=paths.PACKAGE_DIR, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def collect() -> dict:
    import torch

    commit = _git("rev-parse", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "harness_version": distro_bench.__version__,
        "git_commit": commit,
        "git_dirty": bool(dirty) if commit else None,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda if torch.cuda.is_available() else None,
        "gpus": list(host.gpus(use_torch=True)),
        "host": socket.gethostname(),
        "kernel": platform.release(),
        "platform": platform.platform(),
        "cpu_count": __import__("os").cpu_count(),
        # 1/5/15-minute load when the run started: other work on the host stretches every step time
        "load_avg": list(__import__("os").getloadavg()),
        # Which of the binaries the harness may run were on the host (harness/distro_bench/net/host.py BINARIES).
        "binaries": {name: path is not None for name, path in host.binaries().items()},
    }
