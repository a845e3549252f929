"""What a worker shows the coordinator while it trains, torch-free: the heartbeat file (where the rank is,
and that it still runs), its wire byte counters, and its death with the coordinator that started it.
The coordinator reads heartbeats with `read_heartbeat` and `heartbeat_age` without importing torch."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from pathlib import Path


class WireCounter:
    """tx/rx byte counters of one interface, read from /proc/net/dev, which shows the reader's own netns."""

    def __init__(self, iface: str):
        self.iface = iface
        self._last = self.read()

    def read(self) -> tuple[int, int]:
        with open("/proc/net/dev") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == self.iface:
                    fields = rest.split()
                    return int(fields[8]), int(fields[0])  # tx_bytes, rx_bytes
        raise RuntimeError(f"interface {self.iface} not found in /proc/net/dev")

    def delta(self) -> tuple[int, int]:
        now = self.read()
        d = (now[0] - self._last[0], now[1] - self._last[1])
        self._last = now
        return d


# Seconds between a heartbeat's liveness rewrites; the coordinator calls a rank stopped after many missed.
ALIVE_EVERY_S = 1.0


class Heartbeat:
    """Where this rank is (step, phase, time of entering it), overwritten in place so the coordinator can name
    a hung rank. A thread rewrites the same line every ALIVE_EVERY_S, so the file's mtime says the process
    still runs: a rank blocked in a collective keeps beating (the wait releases the GIL), a stopped or
    frozen one does not, and that tells the stuck rank from the peers waiting for it."""

    def __init__(self, path: Path):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._line = b""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        threading.Thread(target=self._alive, name="heartbeat", daemon=True).start()

    def beat(self, step: int, phase: str) -> None:
        with self._lock:
            self._line = f"{step} {phase} {time.time():.3f}".ljust(63).encode() + b"\n"
            os.pwrite(self.fd, self._line, 0)

    def _alive(self) -> None:
        while not self._stop.wait(ALIVE_EVERY_S):
            with self._lock:
                if self._line:
                    try:
                        os.pwrite(self.fd, self._line, 0)
                    except OSError:
                        return

    def close(self) -> None:
        self._stop.set()


def heartbeat_age(path: Path) -> float | None:
    """Seconds since the rank's heartbeat file was last written (its liveness), None without one."""
    try:
        return max(0.0, time.time() - path.stat().st_mtime)
    except OSError:
        return None


def read_heartbeat(path: Path) -> tuple[int, str, float] | None:
    try:
        step, phase, t = path.read_text().split()
        return int(step), phase, float(t)
    except (OSError, ValueError):
        return None


def die_with_parent() -> None:
    """Linux: SIGKILL this worker when the coordinator that started it dies (a SIGKILLed CLI has no
    teardown), instead of leaving it training or blocked on its peers forever. Set only where the
    coordinator is the direct parent (DISTRO_BENCH_PARENT_PID: local and netns, not containers or torchrun)."""
    parent = os.environ.get("DISTRO_BENCH_PARENT_PID")
    if not parent or not sys.platform.startswith("linux"):
        return
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(parent):  # it died before the request took effect
        os._exit(1)
