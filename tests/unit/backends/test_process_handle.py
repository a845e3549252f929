"""ProcessHandle.stop: a worker that is stopped (SIGSTOP) still ends on the polite stop, not only on SIGKILL."""

from __future__ import annotations

import os
import signal
import sys
import time

from distro_bench.backends.base import start_process


def _wait_exit(handle, seconds: float) -> int | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if (rc := handle.poll()) is not None:
            return rc
        time.sleep(0.05)
    return None


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def test_stop_ends_a_stopped_worker_with_sigterm(tmp_path):
    h = start_process(0, [sys.executable, "-c", "import time; time.sleep(120)"], dict(os.environ), tmp_path / "rank0.log")
    try:
        os.kill(h.proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while not _stopped(h.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _stopped(h.proc.pid)
        h.stop()
        # 60 s: the exit needs only a scheduling slice, however busy the machine; without SIGCONT it never comes
        assert _wait_exit(h, 60) == -signal.SIGTERM
    finally:
        h.stop(kill=True)
        h.proc.wait(timeout=30)
