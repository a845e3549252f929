"""How long the coordinator waits: every wait of a run, in one place (issue 38; moved out of the worker layer in
issue 50). Base values for an idle host, times one scale: DISTRO_BENCH_TIMEOUT_SCALE when set, else the measured
host's load (runnable tasks per CPU, at least 1): a busy host is not a dead worker. The collective timeout's base
comes from the scenario (run/lifecycle.py collective_timeout_s: the baseline's exchange over the slowest link,
and the links' delays) and reaches the workers as DISTRO_BENCH_TIMEOUT_S, which the coordinator always sets.

Here in scenario/ (the lowest room but errors) because the coordinator's every layer waits: net/ (the delay
line, the docker probe), backends/, run/ and multihost/ all read it."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import psutil

from distro_bench.errors import InputError
from distro_bench.scenario import environ

TIMEOUT_SCALE_ENV = environ.TIMEOUT_SCALE
# The collective (and rendezvous) timeout a worker is given, in seconds: set by every launcher, no default.
COLLECTIVE_TIMEOUT_ENV = environ.TIMEOUT_S


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
            l1, l5, l15 = psutil.getloadavg()
        except (OSError, RuntimeError):  # no /proc/loadavg: judge as an idle host
            l1 = l5 = l15 = 0.0
        return cls(l1, l5, l15, psutil.cpu_count() or 1)

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

    The multi-host bounds (peer_lost_s, remote_silent_s, SSH_ALIVE_S) are not scaled: hosts measure their own
    load, and the agents must agree on when a peer is lost (node 0 decides, the others wait for its word a
    fixed margin longer); a scale that differed per host would let a waiting agent give up before node 0 spoke."""

    scale: float  # the multiplier applied (timeout_scale)
    load: HostLoad  # the host when they were derived
    docker_api_s: float  # one request to the Docker engine (the SDK's default is 10 s)
    container_start_s: float  # node containers created and running
    startup_grace_s: float  # a worker's start-up (imports, data, connecting) before its first record
    collective_s: float  # a collective (and the rendezvous) may block this long
    stopped_s: float  # a process stopped (state T) with a silent heartbeat this long is dead
    unresponsive_s: float  # no CPU time used and a silent heartbeat this long (times the live load) is dead
    peer_lost_s: float = 20.0  # multi-host: an agent whose store heartbeat has not changed this long is lost
    remote_silent_s: float = 30.0  # ssh launcher: a host whose stream said nothing this long is named in a note

    # Base values on an idle host (scale 1).
    DOCKER_API_S = 60.0
    CONTAINER_START_S = 120.0
    STARTUP_GRACE_S = 120.0
    STOPPED_S = 5.0
    UNRESPONSIVE_S = 30.0
    # Multi-host, the same on every host (see the class's note). The agents' store heartbeat beats every 5 s
    # (multihost/store.py HEARTBEAT_S): four missed is lost. Their stream to the launcher beats every 5 s too
    # (multihost/stream.py). ssh's keep-alive probes every SSH_ALIVE_S, and gives up after SSH_ALIVE_COUNT
    # unanswered: later than the agents' own verdict, it only ends the launcher's pipe.
    PEER_LOST_S = 20.0
    REMOTE_SILENT_S = 30.0
    SSH_ALIVE_S = 5
    SSH_ALIVE_COUNT = 4

    @classmethod
    def for_host(cls, collective_base_s: float = math.nan, *, scale: float | None = None,
                 load: HostLoad | None = None) -> Timeouts:
        """The waits for this host now: `collective_base_s` from the scenario (run/lifecycle.py
        collective_timeout_s; NaN for a caller that starts no workers, e.g. the docker backend's engine
        waits), every base value times the load's scale (or `scale` where given)."""
        load = load or HostLoad.now()
        k = timeout_scale(load) if scale is None else scale
        return cls(scale=k, load=load, docker_api_s=cls.DOCKER_API_S * k, container_start_s=cls.CONTAINER_START_S * k,
                   startup_grace_s=cls.STARTUP_GRACE_S * k, collective_s=collective_base_s * k,
                   stopped_s=cls.STOPPED_S, unresponsive_s=cls.UNRESPONSIVE_S * k,
                   peer_lost_s=cls.PEER_LOST_S, remote_silent_s=cls.REMOTE_SILENT_S)

    def exceeded(self, what: str, waited_s: float) -> str:
        """The message of a wait that ran out: what was waited for, how long, and the host's load now."""
        return (f"{what}: no answer after {waited_s:.0f}s ({HostLoad.now().describe()}; timeouts were scaled "
                f"x{self.scale:.1f} for the load at the start; set {TIMEOUT_SCALE_ENV} to wait longer)")
