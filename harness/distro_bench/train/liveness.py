"""What a worker shows the coordinator while it trains, torch-free: the heartbeat file (where the rank is,
and that it still runs), its wire byte counters, and its death with the coordinator that started it.
The coordinator reads heartbeats with `read_heartbeat` and `heartbeat_age` without importing torch.

And how the coordinator judges a worker from outside (issue 38): every wait is bounded by one `Timeouts`,
scaled by the host's load (or DISTRO_BENCH_TIMEOUT_SCALE), and a worker is dead only on evidence
(`LivenessJudge`): its process is stopped (state T in /proc/<pid>/stat) or has used no CPU time, *and* its
heartbeat is silent, for a bound that grows with the load. A rank whose heartbeat is late but which is
runnable and consuming CPU is slow, not dead: a busy host is not a dead worker."""

from __future__ import annotations

import ctypes
import json
import math
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from distro_bench.errors import InputError
from distro_bench.results import runfiles
from distro_bench.scenario import environ


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


# ---- how long the coordinator waits, scaled by the host -------------------------------------------

TIMEOUT_SCALE_ENV = environ.TIMEOUT_SCALE


@dataclass(frozen=True)
class HostLoad:
    """The host's load averages (1, 5, 15 min) and CPU count: what every "waited too long" message names."""

    load1: float
    load5: float
    load15: float
    cpus: int

    @classmethod
    def now(cls) -> HostLoad:
        try:
            l1, l5, l15 = os.getloadavg()
        except OSError:  # no /proc/loadavg: judge as an idle host
            l1 = l5 = l15 = 0.0
        return cls(l1, l5, l15, os.cpu_count() or 1)

    @property
    def factor(self) -> float:
        """How much slower than idle a process may run here: runnable tasks per CPU, at least 1."""
        return max(1.0, self.load1 / self.cpus)

    def describe(self) -> str:
        return f"host load average {self.load1:.1f} {self.load5:.1f} {self.load15:.1f} on {self.cpus} CPUs"


def timeout_scale(load: HostLoad | None = None) -> float:
    """The multiplier of every base timeout: DISTRO_BENCH_TIMEOUT_SCALE when set, else the host's load
    factor (runnable tasks per CPU, at least 1)."""
    raw = os.environ.get(TIMEOUT_SCALE_ENV)
    if raw is not None and raw.strip():
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and 0.1 <= value <= 1000):
            raise InputError(f"{TIMEOUT_SCALE_ENV}: {raw!r} is not valid; give a number from 0.1 to 1000 "
                             "(the multiplier of every timeout), or unset it to scale with the host's load")
        return value
    return (load or HostLoad.now()).factor


@dataclass(frozen=True, kw_only=True)
class Timeouts:
    """Every wait of a run, in seconds, in one place: base values for an idle host times `scale`.

    The collective timeout's base comes from the scenario (harness/distro_bench/run/lifecycle.py
    collective_timeout_s: the baseline's exchange over the slowest link, and the links' delays)."""

    scale: float  # the multiplier applied (timeout_scale)
    load: HostLoad  # the host when they were derived
    docker_api_s: float  # one request to the Docker engine (the SDK's default is 10 s)
    container_start_s: float  # node containers created and running
    startup_grace_s: float  # a worker's start-up (imports, data, connecting) before its first record
    collective_s: float  # a collective (and the rendezvous) may block this long
    stopped_s: float  # a process stopped (state T) with a silent heartbeat this long is dead
    unresponsive_s: float  # no CPU time used and a silent heartbeat this long (times the live load) is dead

    # Base values on an idle host (scale 1).
    DOCKER_API_S = 60.0
    CONTAINER_START_S = 120.0
    STARTUP_GRACE_S = 120.0
    STOPPED_S = 5.0
    UNRESPONSIVE_S = 30.0

    @classmethod
    def for_host(cls, collective_base_s: float = 300.0, *, scale: float | None = None,
                 load: HostLoad | None = None) -> Timeouts:
        load = load or HostLoad.now()
        k = timeout_scale(load) if scale is None else scale
        return cls(scale=k, load=load, docker_api_s=cls.DOCKER_API_S * k, container_start_s=cls.CONTAINER_START_S * k,
                   startup_grace_s=cls.STARTUP_GRACE_S * k, collective_s=collective_base_s * k,
                   stopped_s=cls.STOPPED_S, unresponsive_s=cls.UNRESPONSIVE_S * k)

    def exceeded(self, what: str, waited_s: float) -> str:
        """The message of a wait that ran out: what was waited for, how long, and the host's load now."""
        return (f"{what}: no answer after {waited_s:.0f}s ({HostLoad.now().describe()}; timeouts were scaled "
                f"x{self.scale:.1f} for the load at the start; set {TIMEOUT_SCALE_ENV} to wait longer)")


# ---- a worker judged from outside: dead on evidence only ------------------------------------------

@dataclass(frozen=True)
class ProcStat:
    state: str  # R, S, D, T (stopped), t (stopped by a tracer), Z, ...
    cpu_ticks: int  # utime + stime, all of the process's threads


def read_proc_stat(pid: int) -> ProcStat | None:
    """State and CPU time of `pid` from /proc/<pid>/stat, None when there is no such process (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    try:
        # The command name (field 2) may hold spaces and parentheses: the fields start after the last ')'.
        fields = data[data.rindex(")") + 2:].split()
        return ProcStat(state=fields[0], cpu_ticks=int(fields[11]) + int(fields[12]))
    except (ValueError, IndexError):
        return None


@dataclass
class _Watch:
    pid: Callable[[], int | None]  # the worker's pid as this host sees it (None: not known, e.g. no engine answer)
    heartbeat: Path
    started: float  # monotonic
    ticks: int | None = None
    ticks_changed: float = 0.0  # monotonic, when its CPU time last grew
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
        self.watches[rank] = _Watch(pid=pid, heartbeat=heartbeat, started=now, ticks_changed=now)

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
        if w.ticks != st.cpu_ticks:
            w.ticks, w.ticks_changed = st.cpu_ticks, now
        if st.state in ("T", "t"):
            w.stopped_since = w.stopped_since if w.stopped_since is not None else now
            stopped_for = now - w.stopped_since
            if stopped_for >= self.timeouts.stopped_s and silent >= self.timeouts.stopped_s:
                return (f"is stopped (process {pid} in state {st.state}, e.g. SIGSTOP: seen for {stopped_for:.0f}s, "
                        f"heartbeat silent for {silent:.0f}s)")
            return None
        w.stopped_since = None
        idle = now - w.ticks_changed
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
