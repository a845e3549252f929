"""A worker cannot signal the process that started it, whatever its uid (issue 39, item 5): enter.py's
`--no-caps` puts it in a Landlock domain scoped for signals. Without it a worker that keeps the
coordinator's uid (root's venv under a 0700 /root, or any non-root run) could kill its coordinator.
Needs no root: Landlock is unprivileged once no_new_privs is set."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest

from distro_bench.backends.base import signal_scope
from distro_bench.net import enter

# kill(2) and (with "attach") PTRACE_ATTACH onto the given pid, let go again at once should it succeed; then
# what it may still do: signal itself and its own child.
PROBE = r"""
import ctypes, json, os, signal, subprocess, sys
target, attach = int(sys.argv[1]), sys.argv[2] == "attach"
out = {}
try:
    os.kill(target, 0)
    out["kill_starter"] = 0
except OSError as e:
    out["kill_starter"] = e.errno
libc = ctypes.CDLL(None, use_errno=True)
if attach:
    out["attach_starter"] = 0 if libc.ptrace(16, target, None, None) == 0 else ctypes.get_errno()
    if out["attach_starter"] == 0:
        os.waitpid(target, 0x40000000)  # __WALL
        libc.ptrace(17, target, None, None)  # PTRACE_DETACH
        os.kill(target, signal.SIGCONT)
os.kill(os.getpid(), 0)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
child.terminate()
out["child_rc"] = child.wait()
print(json.dumps(out))
"""


@pytest.fixture
def scoped():
    if (missing := enter.signal_scope_missing()) is not None:
        pytest.skip(f"signals cannot be scoped here: {missing}")


def _probe(*flags: str, attach: bool) -> dict:
    p = subprocess.run([sys.executable, "-I", enter.__file__, *flags, "--", sys.executable, "-c", PROBE,
                        str(os.getpid()), "attach" if attach else "-"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_worker_started_without_caps_cannot_signal_or_ptrace_its_starter(scoped):
    r = _probe("--no-caps", attach=True)
    assert r["kill_starter"] == errno.EPERM, r  # same uid as this test: only the Landlock scope refuses it
    assert r["attach_starter"] == errno.EPERM, r
    assert r["child_rc"] == -15, r  # its own children it may still stop


def test_without_no_caps_the_same_probe_signals_its_starter():
    # The control: the probe's kill(2) is a real one, refused above only by the scope.
    r = _probe(attach=False)  # (as root an attach would succeed and stop this test's process)
    assert r["kill_starter"] == 0, r


def test_the_scope_is_named_where_workers_are_described():
    text = signal_scope()
    assert ("Landlock domain" in text) if enter.signal_scope_missing() is None else text.startswith("not scoped: "), text


def test_a_kernel_without_landlock_is_named(monkeypatch):
    class NoLandlock:
        @staticmethod
        def syscall(*_args):
            return -1

    assert "no Landlock" in (enter.signal_scope_missing(NoLandlock()) or "")
