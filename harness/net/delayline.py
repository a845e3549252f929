"""A userspace delay line: one-way delay, jitter and loss on kernels without `sch_netem`.

It sits in a link namespace between two veth ends, `a` (towards the node) and `b` (towards the
switch), reads every frame that arrives on one end through an AF_PACKET socket, holds it until its
release time (arrival + delay + jitter sample), drops a seeded fraction, and sends it out of the
other end. Rate shaping stays in the kernel (tbf/htb on the veths' egress); this only delays.

Why hand-written: netem is the tool, and where it exists the tc engine uses it. The alternatives
do not fit a kernel without it: tc/eBPF cannot hold a packet for milliseconds (EDT pacing needs the
`fq` qdisc, also absent here), Mininet/tcconfig/comcast/toxiproxy all drive netem or act on TCP
streams rather than frames, and `ip link` veth/tap pairs have no delay knob. A frame forwarder with
a time-ordered queue is small, and pure Python reaches the targets (see
benchmarks/delayline_cpu.py).

Details that matter:
- `PACKET_VNET_HDR` on both sockets carries each frame's checksum state across (a virtio-net
  header): frames whose TCP/UDP checksum the sender left to offload (CHECKSUM_PARTIAL, the veth
  default) would otherwise be forwarded with a wrong checksum and dropped by the receiver.
- `PACKET_IGNORE_OUTGOING` keeps our own sends out of our receive queue (pkttype is checked as a
  fallback on kernels before 4.20).
- Jitter is uniform in [-jitter, +jitter] around the delay (netem's default without a table),
  clamped at zero. In-order mode (the default) releases no frame before the one ahead of it, as a
  real access line never reorders; under load this skews the delay towards delay + jitter.
- Sleeps are select() timeouts with microsecond resolution, and the process asks for 1 ns timer
  slack, so a hop adds tens of microseconds, not a millisecond.

The forwarder runs as `ip netns exec NS python -m harness.net.delayline ...`; `DelayLine` starts
and stops it and reads the stats file it rewrites twice a second.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import gc
import heapq
import json
import os
import random
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.errors import CapabilityError, HarnessError, InputError

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_VNET_HDR = 15
PACKET_IGNORE_OUTGOING = 23
PACKET_OUTGOING = 4
PACKET_STATISTICS = 6
TPACKET_STATS = struct.Struct("@II")  # tp_packets, tp_drops; reading resets them
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
PR_SET_TIMERSLACK = 29
SO_TIMESTAMPNS = SCM_TIMESTAMPNS = 35
TIMESPEC = struct.Struct("@qq")
ANC_BUF = socket.CMSG_SPACE(TIMESPEC.size)

VNET_HDR_LEN = 10  # struct virtio_net_hdr, prepended to every frame read or written
RCVBUF_BYTES = 16 << 20  # a 100 Mbit burst of ~1 s; the kernel drops what does not fit
SNDBUF_BYTES = 8 << 20
QUEUE_LIMIT_BYTES = 64 << 20  # per direction: 1 Gbit/s held for 0.5 s
MAX_FRAME = 65536 + VNET_HDR_LEN  # a GSO frame if someone left offloads on
DRAIN_BATCH = 256  # frames read per socket per loop pass, so sends are not starved
STATS_EVERY_S = 0.5
IDLE_WAKE_S = 0.25
LEAD_GAIN = 0.05  # integral gain of the send-time correction; a stall of ms moves it by one step
LEAD_STEP_S = 200e-6
LEAD_MAX_S = 500e-6
TRACE = bool(os.environ.get("DBENCH_DELAYLINE_TRACE"))  # one log line per frame, for debugging  # housekeeping (stats, parent check) when no frame is due


@dataclass(frozen=True)
class Impairment:
    """One direction of a link: one-way delay, jitter and loss (a fraction, 0..1)."""

    delay_s: float
    jitter_s: float = 0.0
    loss: float = 0.0
    reorder: bool = False  # False: jitter keeps packet order; True: netem-like, frames may pass
    seed: int = 0

    def __post_init__(self) -> None:
        problems = []
        if not self.delay_s >= 0:
            problems.append(f"delay_s must be >= 0, got {self.delay_s}")
        if not self.jitter_s >= 0:
            problems.append(f"jitter_s must be >= 0, got {self.jitter_s}")
        if not 0 <= self.loss <= 1:
            problems.append(f"loss is a fraction in 0..1, got {self.loss}")
        if problems:
            raise InputError("impairment: " + "; ".join(problems))

    @property
    def is_noop(self) -> bool:
        return self.delay_s == 0 and self.jitter_s == 0 and self.loss == 0


class Schedule:
    """The time-ordered queue of one direction: admits frames, says when each is due.

    Pure logic (no sockets), so it can be tested exactly.
    """

    def __init__(self, imp: Impairment, direction: int = 0, limit_bytes: int = QUEUE_LIMIT_BYTES):
        self.imp = imp
        # Both directions of a link usually share a seed; mixing in the direction keeps their
        # loss patterns independent while staying reproducible.
        self.rng = random.Random(imp.seed * 2 + direction)
        self.limit_bytes = limit_bytes
        self.queued_bytes = 0
        self._last_release = float("-inf")
        self._seq = 0
        self._fifo: deque[tuple[float, bytes]] = deque()
        self._heap: list[tuple[float, int, bytes]] = []
        self.dropped_loss = 0
        self.dropped_overflow = 0

    def admit(self, now: float, frame: bytes) -> float | None:
        """Queue a frame that arrived at `now`; its release time, or None if it was dropped."""
        imp = self.imp
        if imp.loss and self.rng.random() < imp.loss:
            self.dropped_loss += 1
            return None
        if self.queued_bytes + len(frame) > self.limit_bytes:
            self.dropped_overflow += 1
            return None
        release = now + imp.delay_s
        if imp.jitter_s:
            release = max(now, release + self.rng.uniform(-imp.jitter_s, imp.jitter_s))
        self.queued_bytes += len(frame)
        if imp.reorder:
            self._seq += 1
            heapq.heappush(self._heap, (release, self._seq, frame))
        else:
            if release < self._last_release:
                release = self._last_release
            self._last_release = release
            self._fifo.append((release, frame))
        return release

    def next_release(self) -> float | None:
        if self._fifo:
            return self._fifo[0][0]
        if self._heap:
            return self._heap[0][0]
        return None

    def pop_due(self, now: float) -> tuple[float, bytes] | None:
        """The next frame whose release time has come, with that time; None if none is due."""
        if self._fifo:
            if self._fifo[0][0] <= now:
                release, frame = self._fifo.popleft()
                self.queued_bytes -= len(frame)
                return release, frame
            return None
        if self._heap and self._heap[0][0] <= now:
            release, _, frame = heapq.heappop(self._heap)
            self.queued_bytes -= len(frame)
            return release, frame
        return None

    def __len__(self) -> int:
        return len(self._fifo) + len(self._heap)


# ---------------------------------------------------------------------------------------------
# The forwarder process


def _open_socket(iface: str) -> socket.socket:
    """An AF_PACKET socket on `iface` carrying virtio-net headers and receive timestamps."""
    # Protocol 0 until bind: a socket created with ETH_P_ALL would queue frames of every
    # interface in the namespace before it is bound to one.
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    s.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
    try:
        s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    except OSError:
        pass  # before Linux 4.20: the receive loop skips PACKET_OUTGOING itself
    for force, plain, size in (
        (SO_RCVBUFFORCE, socket.SO_RCVBUF, RCVBUF_BYTES),
        (SO_SNDBUFFORCE, socket.SO_SNDBUF, SNDBUF_BYTES),
    ):
        try:
            s.setsockopt(socket.SOL_SOCKET, force, size)
        except OSError:
            s.setsockopt(socket.SOL_SOCKET, plain, size)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind((iface, ETH_P_ALL))
    return s


def _precise_timers(realtime: bool) -> str:
    """Ask for exact wake-ups; returns the scheduling policy obtained."""
    policy = "normal"
    if realtime:
        # netem runs in softirq context, ahead of every task; the nearest a process gets is a
        # low real-time priority. It always blocks in select() when nothing is due, and the
        # kernel's RT throttling bounds it even if it could not keep up.
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            policy = "fifo"
        except (OSError, AttributeError):
            pass
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    return policy


class _Counters:
    __slots__ = ("frames_in", "bytes_in", "frames_out", "bytes_out", "send_errors", "late_s_sum", "late_s_max",
                 "rx_lag_s_sum", "dropped_socket", "link_errors")  # fmt: skip

    def __init__(self) -> None:
        self.frames_in = self.bytes_in = self.frames_out = self.bytes_out = self.send_errors = 0
        self.dropped_socket = self.link_errors = 0
        self.late_s_sum = self.late_s_max = self.rx_lag_s_sum = 0.0


def _direction_stats(c: _Counters, sched: Schedule) -> dict:
    return {
        "frames_in": c.frames_in,
        "bytes_in": c.bytes_in,
        "frames_out": c.frames_out,
        "bytes_out": c.bytes_out,
        "dropped_loss": sched.dropped_loss,
        "dropped_overflow": sched.dropped_overflow,
        "dropped_socket": c.dropped_socket,  # the kernel's, when we did not read fast enough
        "send_errors": c.send_errors,
        "link_errors": c.link_errors,  # the input interface went down or away
        "queued_frames": len(sched),
        "late_s_mean": c.late_s_sum / c.frames_out if c.frames_out else 0.0,
        "late_s_max": c.late_s_max,
        "rx_lag_s_mean": c.rx_lag_s_sum / c.frames_in if c.frames_in else 0.0,
    }


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def forward(
    iface_a: str,
    iface_b: str,
    a_to_b: Impairment,
    b_to_a: Impairment,
    stats_path: Path,
    parent_pid: int | None = None,
    realtime: bool = True,
) -> None:
    """Forward frames between two interfaces until SIGTERM/SIGINT or until the parent dies."""
    policy = _precise_timers(realtime)
    sock_a = _open_socket(iface_a)
    sock_b = _open_socket(iface_b)
    # (input socket, schedule, output socket, counters)
    dirs = [
        (sock_a, Schedule(a_to_b, 0), sock_b, _Counters()),
        (sock_b, Schedule(b_to_a, 1), sock_a, _Counters()),
    ]
    by_fd = {d[0].fileno(): d for d in dirs}
    rlist = [sock_a, sock_b]

    stop = False

    def on_signal(signum, frame):  # noqa: ARG001
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    started = time.time()

    def write_stats(state: str) -> None:
        for sock_in, _, _, c in dirs:
            try:
                c.dropped_socket += TPACKET_STATS.unpack(
                    sock_in.getsockopt(SOL_PACKET, PACKET_STATISTICS, TPACKET_STATS.size)
                )[1]
            except OSError:
                pass
        _write_json(
            stats_path,
            {
                "state": state,
                "pid": os.getpid(),
                "started": started,
                "updated": time.time(),
                # This forwarder's CPU time, for its cost per bit. System time includes the
                # kernel's delivery of what we send (veth peer, bridge, the node's stack).
                "cpu_user_s": (t := os.times()).user,
                "cpu_sys_s": t.system,
                "interfaces": [iface_a, iface_b],
                "scheduling": policy,
                "lead_s": lead,
                "impairments": {"a_to_b": asdict(a_to_b), "b_to_a": asdict(b_to_a)},
                "a_to_b": _direction_stats(dirs[0][3], dirs[0][1]),
                "b_to_a": _direction_stats(dirs[1][3], dirs[1][1]),
            },
        )

    lead = 0.0
    write_stats("forwarding")  # also the readiness signal: both sockets are bound
    # The loop allocates only acyclic tuples; collector pauses of a few ms would show as jitter.
    gc.freeze()
    gc.disable()

    mono = time.monotonic
    dontwait = socket.MSG_DONTWAIT
    next_house = mono() + STATS_EVERY_S
    while not stop:
        now = mono()
        # Send everything that is due, then sleep until the earliest next release or a frame.
        # `lead` is how much earlier than a release we act: it learns this host's wake-up and
        # send latency so that frames leave on time on average instead of always a bit late.
        wake = min(now + IDLE_WAKE_S, next_house)
        for _, sched, out, c in dirs:
            while True:
                item = sched.pop_due(now + lead)
                if item is None:
                    break
                release, frame = item
                try:
                    out.send(frame)
                except OSError:
                    c.send_errors += 1
                    continue
                late = mono() - release
                if TRACE:
                    print(f"{mono():.6f} out {'ab' if out is sock_b else 'ba'} len={len(frame)} late={late:.6f}",
                          flush=True)  # fmt: skip
                c.frames_out += 1
                c.bytes_out += len(frame) - VNET_HDR_LEN
                c.late_s_sum += late
                if late > c.late_s_max:
                    c.late_s_max = late
                step = LEAD_STEP_S if late > LEAD_STEP_S else -LEAD_STEP_S if late < -LEAD_STEP_S else late
                lead = min(LEAD_MAX_S, max(0.0, lead + LEAD_GAIN * step))
            nxt = sched.next_release()
            if nxt is not None and nxt - lead < wake:
                wake = nxt - lead
        timeout = wake - mono()
        try:
            ready, _, _ = select.select(rlist, [], [], timeout if timeout > 0 else 0)
        except InterruptedError:
            continue
        if ready:
            # Kernel receive timestamps are CLOCK_REALTIME; the queue runs on the monotonic clock.
            now = mono()
            offset = time.time() - now
        for s in ready:
            sock_in, sched, _, c = by_fd[s.fileno()]
            for _ in range(DRAIN_BATCH):
                try:
                    frame, anc, _flags, addr = sock_in.recvmsg(MAX_FRAME, ANC_BUF, dontwait)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as e:
                    # The interface went down (reported once) or away: keep forwarding the other
                    # way; frames flow again when it comes back up.
                    if e.errno not in (errno.ENETDOWN, errno.ENXIO, errno.ENODEV):
                        raise
                    c.link_errors += 1
                    break
                if addr[2] == PACKET_OUTGOING:
                    continue  # our own send, on kernels without PACKET_IGNORE_OUTGOING
                arrival = now
                for level, kind, data in anc:
                    if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS:
                        sec, nsec = TIMESPEC.unpack_from(data)
                        stamped = sec + nsec * 1e-9 - offset
                        # A frame's delay runs from when it reached the interface, not from when
                        # this process got to read it. Stamps far off (a sender's delivery
                        # time carried across) are ignored.
                        if now - 1.0 < stamped < now:
                            arrival = stamped
                c.frames_in += 1
                c.bytes_in += len(frame) - VNET_HDR_LEN
                c.rx_lag_s_sum += now - arrival
                rel = sched.admit(arrival, frame)
                if TRACE:
                    print(f"{mono():.6f} in {'ab' if sock_in is sock_a else 'ba'} len={len(frame)} "
                          f"type={frame[22:24].hex()} dst={frame[10:16].hex()} arr={arrival:.6f} rel={rel}", flush=True)
        if now >= next_house:
            next_house = now + STATS_EVERY_S
            write_stats("forwarding")
            if parent_pid is not None and os.getppid() != parent_pid:
                break  # our owner died without stopping us: do not outlive it
    write_stats("stopped")
    sock_a.close()
    sock_b.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.net.delayline", description=__doc__.split("\n")[0])
    p.add_argument("--a", required=True, help="interface towards the node")
    p.add_argument("--b", required=True, help="interface towards the switch")
    p.add_argument("--a-to-b", required=True, help="Impairment as JSON (uplink)")
    p.add_argument("--b-to-a", required=True, help="Impairment as JSON (downlink)")
    p.add_argument("--stats", required=True, type=Path, help="stats JSON, rewritten twice a second")
    p.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")
    p.add_argument("--no-realtime", action="store_true", help="stay at normal scheduling priority")
    args = p.parse_args(argv)
    forward(
        args.a,
        args.b,
        Impairment(**json.loads(args.a_to_b)),
        Impairment(**json.loads(args.b_to_a)),
        args.stats,
        args.parent_pid,
        realtime=not args.no_realtime,
    )
    return 0


# ---------------------------------------------------------------------------------------------
# The controller the backends use


class DelayLine:
    """Owns one forwarder process inside `netns` (a name from `ip netns`, or a path such as
    /proc/<pid>/ns/net), between `iface_a` (node side) and `iface_b` (switch side)."""

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
            return False, "the userspace delay line needs root (AF_PACKET sockets, ip netns exec)"
        if shutil.which("ip") is None:
            return False, "`ip` (iproute2) is not installed"
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
        # A path (a container's /proc/<pid>/ns/net) is entered with nsenter, a name with ip netns.
        enter = ["nsenter", f"--net={self.netns}"] if self.netns.startswith("/") else ["ip", "netns", "exec", self.netns]
        return [
            *enter,
            sys.executable, "-m", "harness.net.delayline",
            "--a", self.iface_a, "--b", self.iface_b,
            "--a-to-b", json.dumps(asdict(self.a_to_b)),
            "--b-to-a", json.dumps(asdict(self.b_to_a)),
            "--stats", str(stats_path),
            "--parent-pid", str(os.getpid()),
            *([] if self.realtime else ["--no-realtime"]),
        ]  # fmt: skip

    def start(self) -> None:
        """Start the forwarder; return once it forwards. HarnessError (with the log) if it dies."""
        if self._proc is not None:
            raise HarnessError(f"{self!r} is already started")
        ok, why = self.available()
        if not ok:
            raise CapabilityError(why)
        self._tmpdir = Path(tempfile.mkdtemp(prefix="dbench-delayline-"))
        self._stats_path = self._tmpdir / "stats.json"
        log_path = self.log_path or self._tmpdir / "delayline.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._final_stats = None
        env = dict(os.environ)
        # `python -m harness...` must find this very package, installed or not.
        pkg_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
        with open(log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self.command(self._stats_path),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a Ctrl-C in the terminal reaches us, and we stop it
            )
        deadline = time.monotonic() + self.START_TIMEOUT_S
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
                    f"delay line in {self.netns} did not start within {self.START_TIMEOUT_S:.0f}s:\n"
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
            if self.log_path is not None and self._final_stats:
                # Beside the log, so a run folder keeps what the line did (drops, lateness).
                _write_json(self.stats_path_beside_log, self._final_stats)
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
            self._stats_path = None

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


if __name__ == "__main__":
    sys.exit(main())


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
