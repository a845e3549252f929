"""`DelayLine`: owns one forwarder process (harness/distro_bench/net/delayline/forwarder.py) inside a namespace,
starts it, returns once it forwards, reads the stats it rewrites twice a second, and stops it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from distro_bench import paths
from distro_bench.errors import CapabilityError, HarnessError
from distro_bench.net import owner
from distro_bench.net.delayline.forwarder import write_json
from distro_bench.net.link import Impairment
from distro_bench.net.ns import NetnsRef
from distro_bench.scenario.timeouts import HostLoad, timeout_scale


class DelayLine:
    """Owns one forwarder process inside `netns` (a name from `ip netns`, or a path such as
    /proc/<pid>/ns/net), between `iface_a` (node side) and `iface_b` (switch side)."""

    # On an idle host; scaled with the host's load when a line starts (scenario/timeouts.py timeout_scale: a hogged
    # CI host took over 10 s to start one of the two forwarders of a docker test).
    START_TIMEOUT_S = 10.0

    def __init__(
        self,
        netns: str,
        iface_a: str,
        iface_b: str,
        a_to_b: Impairment,
        b_to_a: Impairment,
        log_path: Path | None = None,
        *,
        realtime: bool = True,
    ):
        self.netns = netns
        self.iface_a = iface_a
        self.iface_b = iface_b
        self.a_to_b = a_to_b
        self.b_to_a = b_to_a
        self.log_path = Path(log_path) if log_path is not None else None
        self.realtime = realtime  # SCHED_FIFO priority 1 for the forwarder, where permitted
        self._proc: subprocess.Popen | None = None
        self._tmpdir: Path | None = None
        self._stats_path: Path | None = None
        self._final_stats: dict | None = None

    def __repr__(self) -> str:
        return f"DelayLine({self.netns}: {self.iface_a}<->{self.iface_b}, up={self.a_to_b}, down={self.b_to_a})"

    @staticmethod
    def available() -> tuple[bool, str]:
        """Whether this host can run a delay line, and why not."""
        if os.geteuid() != 0:
            return False, "the userspace delay line needs root (AF_PACKET sockets, entering namespaces)"
        try:
            socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0).close()
        except (OSError, AttributeError) as e:
            return False, f"AF_PACKET raw sockets are unavailable: {e}"
        return True, "AF_PACKET raw sockets (userspace delay line)"

    @property
    def stats_path_beside_log(self) -> Path | None:
        """Where stop() leaves the final stats when there is a log: `<log stem>.stats.json`."""
        return self.log_path.with_name(self.log_path.stem + ".stats.json") if self.log_path else None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def command(self, stats_path: Path) -> list[str]:
        # A path (a container's /proc/<pid>/ns/net) or a name of ours, entered by harness/distro_bench/net/enter.py.
        ref = NetnsRef(path=self.netns) if self.netns.startswith("/") else NetnsRef.named(self.netns)
        return ref.wrap([
            sys.executable, "-m", "distro_bench.net.delayline",
            "--a", self.iface_a, "--b", self.iface_b,
            "--a-to-b", json.dumps(asdict(self.a_to_b)),
            "--b-to-a", json.dumps(asdict(self.b_to_a)),
            "--stats", str(stats_path),
            "--control", str(stats_path.with_name("control.json")),
            "--parent-pid", str(os.getpid()),
            *([] if self.realtime else ["--no-realtime"]),
        ])  # fmt: skip

    def start(self) -> None:
        """Start the forwarder; return once it forwards. HarnessError (with the log) if it dies."""
        if self._proc is not None:
            raise HarnessError(f"{self!r} is already started")
        ok, why = self.available()
        if not ok:
            raise CapabilityError(why)
        self._tmpdir = Path(tempfile.mkdtemp(prefix="dbench-delayline-"))
        owner.stamp(self._tmpdir)  # `distro-bench clean` removes it once this process is gone (a killed run)
        self._stats_path = self._tmpdir / "stats.json"
        log_path = self.log_path or self._tmpdir / "delayline.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._final_stats = None
        env = dict(os.environ)
        # `python -m distro_bench...` must find this very package, installed or not.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(paths.IMPORT_ROOT), env.get("PYTHONPATH")) if p)
        with open(log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self.command(self._stats_path),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a Ctrl-C in the terminal reaches us, and we stop it
            )
        limit = self.START_TIMEOUT_S * timeout_scale()
        deadline = time.monotonic() + limit
        while True:
            rc = self._proc.poll()
            if rc is not None:
                self._proc = None
                raise HarnessError(
                    f"delay line in {self.netns} ({self.iface_a}<->{self.iface_b}) exited with {rc}:\n"
                    + _tail(log_path)
                )
            if self._stats_path.exists():
                return
            if time.monotonic() > deadline:
                self.stop()
                raise HarnessError(
                    f"delay line in {self.netns} did not start within {limit:.0f}s ({HostLoad.now().describe()}):\n"
                    + _tail(log_path)
                )
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop the forwarder (SIGTERM, then SIGKILL); safe to call twice."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=3)
            self._final_stats = self._read_stats()
            beside = self.stats_path_beside_log  # None without a log
            if beside is not None and self._final_stats:
                # Beside the log, so a run folder keeps what the line did (drops, lateness).
                write_json(beside, self._final_stats)
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
            self._stats_path = None

    def set_impairments(self, a_to_b: Impairment | None = None, b_to_a: Impairment | None = None,
                        timeout_s: float = 2.0) -> dict:
        """Give the running forwarder new impairments (None: keep that direction's); returns the
        impairments it reports after applying them (the read-back). HarnessError if it does not confirm."""
        if not self.running() or self._stats_path is None or self._proc is None:
            raise HarnessError(f"{self!r} is not running; cannot change its impairment")
        self._control_seq = getattr(self, "_control_seq", 0) + 1
        write_json(self._stats_path.with_name("control.json"), {
            "seq": self._control_seq,
            "a_to_b": asdict(a_to_b) if a_to_b is not None else None,
            "b_to_a": asdict(b_to_a) if b_to_a is not None else None})
        os.kill(self._proc.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            st = self._read_stats() or {}
            if st.get("control_seq", 0) >= self._control_seq:
                if a_to_b is not None:
                    self.a_to_b = a_to_b
                if b_to_a is not None:
                    self.b_to_a = b_to_a
                return st.get("impairments", {})
            time.sleep(0.005)
        raise HarnessError(f"{self!r} did not confirm its new impairment within {timeout_s:.0f}s")

    def _read_stats(self) -> dict | None:
        if self._stats_path is None:
            return None
        try:
            return json.loads(self._stats_path.read_text())
        except (OSError, ValueError):
            return None

    def stats(self) -> dict:
        """Frames and bytes in/out and dropped per direction (`a_to_b`, `b_to_a`), as last written
        (at most 0.5 s old while running; final after stop). Empty before start."""
        if self._proc is None:
            return dict(self._final_stats or {})
        return self._read_stats() or {}

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> DelayLine:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_all(lines: dict[int, DelayLine]) -> list[str]:
    """Stop every rank's delay line (teardown keeps going past a failure) and forget them; the problems."""
    problems = []
    for rank, line in list(lines.items()):
        try:
            line.stop()
        except Exception as e:  # keep tearing down; report at the end
            problems.append(f"delay line of rank {rank}: {e}")
    lines.clear()
    return problems
