"""What a worker shows the coordinator while it trains, torch-free: the heartbeat file (where the rank is,
and that it still runs), its wire byte counters, and its death with the coordinator that started it.
The coordinator reads heartbeats with `read_heartbeat` and `heartbeat_age` without importing torch.

And how the coordinator judges a worker from outside (issue 38): every wait is bounded by one `Timeouts`
(scenario/timeouts.py, the coordinator's policy), and a worker is dead only on evidence (`LivenessJudge`): its
process is stopped (state T, read with psutil) or has used no CPU time, *and* its
heartbeat is silent, for a bound that grows with the load. A rank whose heartbeat is late but which is
runnable and consuming CPU is slow, not dead: a busy host is not a dead worker."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from distro_bench.results import runfiles
from distro_bench.scenario import environ
from distro_bench.scenario.timeouts import HostLoad, Timeouts


class RecordTail:
    """Reads new complete lines of a worker's JSONL records as the file grows (a line still being written waits
    for its newline). A worker's file is as untrusted as a stored run folder's and is read by the same reader
    (results/runfiles.py): not followed if a link, opened non-blocking (a FIFO put in its place is refused at
    once instead of holding the coordinator in open()), regular files only, held to the cap of rank.jsonl,
    at most CHUNK bytes a call and lines of at most MAX_LINE_BYTES (RunFileError naming the file and limit)."""

    CHUNK = 4 * runfiles.MiB

    def __init__(self, path: Path):
        self.path, self.pos, self.buf = Path(path), 0, b""

    def new_records(self) -> list[dict]:
        try:
            chunk = runfiles.read_bytes(self.path.parent, self.path.name, "rank.jsonl", offset=self.pos,
                                        head=self.CHUNK, capped=True)
        except FileNotFoundError:
            return []
        self.pos += len(chunk)
        *lines, self.buf = (self.buf + chunk).split(b"\n")
        if len(self.buf) > runfiles.MAX_LINE_BYTES or any(len(line) > runfiles.MAX_LINE_BYTES for line in lines):
            raise runfiles.RunFileError(f"{self.path}: a line longer than {runfiles.MAX_LINE_BYTES} bytes, the limit "
                                        "for a line of rank.jsonl; refused")
        records = []
        for line in lines:
            try:  # parsed, and a line that is not a record skipped, as the stored folder's reader does
                # (results/metrics.py: a diverged step's NaN loss is a record)
                rec = json.loads(line) if line.strip() else None
            except (ValueError, RecursionError):
                continue
            if isinstance(rec, dict):
                records.append(rec)
        return records


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
    """Seconds since the rank's heartbeat file was last written (its liveness), None without one (nor for a
    link or anything but a regular file where it should be: the worker's folder is the worker's to forge)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return max(0.0, time.time() - st.st_mtime) if stat.S_ISREG(st.st_mode) else None


def read_heartbeat(path: Path) -> tuple[int, str, float] | None:
    """(step, phase, time) of a heartbeat file (`step phase time`), read as every run-folder file is read
    (results/runfiles.py: no link followed, non-blocking, regular files only, 4 KiB at most); None when
    absent, refused or not in that form."""
    try:
        step, phase, t = runfiles.read_bytes(Path(path).parent, Path(path).name, "rank.hb").decode().split()
        return int(step), phase, float(t)
    except (OSError, ValueError, runfiles.RunFileError):
        return None


def die_with_parent() -> None:
    """Linux: SIGKILL this worker when the coordinator that started it dies (a SIGKILLed CLI has no
    teardown), instead of leaving it training or blocked on its peers forever. Set only where the
    coordinator is the direct parent (DISTRO_BENCH_PARENT_PID: local and netns, not containers or torchrun)."""
    parent = os.environ.get(environ.PARENT_PID)
    if not parent or not sys.platform.startswith("linux"):
        return
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(parent):  # it died before the request took effect
        os._exit(1)


# ---- a worker judged from outside: dead on evidence only ------------------------------------------

# psutil's status names as the kernel's one-letter states (/proc/<pid>/stat), which the messages show.
_STATE_LETTER = {psutil.STATUS_RUNNING: "R", psutil.STATUS_SLEEPING: "S", psutil.STATUS_DISK_SLEEP: "D",
                 psutil.STATUS_STOPPED: "T", psutil.STATUS_TRACING_STOP: "t", psutil.STATUS_ZOMBIE: "Z",
                 psutil.STATUS_DEAD: "X", psutil.STATUS_IDLE: "I", psutil.STATUS_PARKED: "P"}


@dataclass(frozen=True)
class ProcStat:
    state: str  # R, S, D, T (stopped), t (stopped by a tracer), Z, ...
    cpu_s: float  # user + system CPU time, all of the process's threads


def read_proc_stat(pid: int) -> ProcStat | None:
    """State and CPU time of `pid` (psutil), None when there is no such process or it cannot be read."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            status, times = proc.status(), proc.cpu_times()
    except psutil.Error:
        return None
    return ProcStat(state=_STATE_LETTER.get(status, "?"), cpu_s=times.user + times.system)


@dataclass
class _Watch:
    pid: Callable[[], int | None]  # the worker's pid as this host sees it (None: not known, e.g. no engine answer)
    heartbeat: Path
    started: float  # monotonic
    cpu_s: float | None = None
    cpu_changed: float = 0.0  # monotonic, when its CPU time last grew
    stopped_since: float | None = None
    seen: bool = False  # its /proc entry was read once (else /proc is not this host's view of it)


@dataclass(frozen=True)
class Dead:
    rank: int
    why: str  # "stopped (state T ...)..." - follows "rank N (node) "


class LivenessJudge:
    """Says which rank is dead, on evidence, each time it is asked (the runner asks a few times a second).

    A rank is dead when its process is stopped (state T/t) and its heartbeat has been silent for
    `stopped_s`, or when it has used no CPU time and its heartbeat has been silent for `unresponsive_s` times
    the load factor *now* (a loaded host delays both). Where its /proc entry cannot be read (a container
    whose pid this host does not see), a heartbeat silent that long (plus the start-up grace before the
    first beat) is all the evidence there is. A process that is gone is not judged here: its exit code is."""

    def __init__(self, timeouts: Timeouts, clock: Callable[[], float] = time.monotonic,
                 load: Callable[[], HostLoad] = HostLoad.now):
        self.timeouts, self.clock, self.load = timeouts, clock, load
        self.watches: dict[int, _Watch] = {}

    def watch(self, rank: int, pid: Callable[[], int | None], heartbeat: Path) -> None:
        now = self.clock()
        self.watches[rank] = _Watch(pid=pid, heartbeat=heartbeat, started=now, cpu_changed=now)

    def _silent(self, w: _Watch, now: float) -> float:
        """Seconds the heartbeat has been silent; before its first beat, since the worker started."""
        age = heartbeat_age(w.heartbeat)
        return now - w.started if age is None else age

    def judge(self, rank: int) -> str | None:
        """Why `rank` is dead, or None while it may be alive (or slow)."""
        w, now = self.watches[rank], self.clock()
        pid = w.pid()
        st = read_proc_stat(pid) if pid else None
        silent = self._silent(w, now)
        factor = self.load().factor
        if st is None:
            if w.seen:
                return None  # gone: its exit code says how it ended
            # Not visible from here: the heartbeat is the only evidence; before the first beat, the start-up.
            bound = self.timeouts.unresponsive_s * factor
            if heartbeat_age(w.heartbeat) is None:
                bound += self.timeouts.startup_grace_s
            if silent > bound:
                return (f"heartbeat silent for {silent:.0f}s (its process cannot be seen from here; the bound is "
                        f"{bound:.0f}s at {self.load().describe()})")
            return None
        w.seen = True
        if w.cpu_s != st.cpu_s:
            w.cpu_s, w.cpu_changed = st.cpu_s, now
        if st.state in ("T", "t"):
            w.stopped_since = w.stopped_since if w.stopped_since is not None else now
            stopped_for = now - w.stopped_since
            if stopped_for >= self.timeouts.stopped_s and silent >= self.timeouts.stopped_s:
                return (f"is stopped (process {pid} in state {st.state}, e.g. SIGSTOP: seen for {stopped_for:.0f}s, "
                        f"heartbeat silent for {silent:.0f}s)")
            return None
        w.stopped_since = None
        idle = now - w.cpu_changed
        bound = self.timeouts.unresponsive_s * factor
        if idle > bound and silent > bound:
            return (f"is frozen (process {pid} in state {st.state} used no CPU time for {idle:.0f}s and its "
                    f"heartbeat has been silent for {silent:.0f}s; the bound is {bound:.0f}s at "
                    f"{self.load().describe()})")
        return None

    def dead(self, ranks) -> Dead | None:
        """The first of `ranks` judged dead (the one silent longest when several are), or None."""
        found = [(r, why) for r in ranks if r in self.watches and (why := self.judge(r))]
        if not found:
            return None
        r, why = max(found, key=lambda x: self._silent(self.watches[x[0]], self.clock()))
        return Dead(rank=r, why=why)

    def stopped_now(self, ranks) -> int | None:
        """A rank among `ranks` whose process is stopped (state T/t) at this moment, with the longest-silent
        heartbeat: when a peer has just failed, the likely cause, whatever the bounds say."""
        now = self.clock()
        found = []
        for r in ranks:
            w = self.watches.get(r)
            pid = w.pid() if w else None
            st = read_proc_stat(pid) if pid else None
            if w and st and st.state in ("T", "t"):
                found.append((self._silent(w, now), r))
        return max(found)[1] if found else None
