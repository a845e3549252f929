"""The forwarder process: `python -m distro_bench.net.delayline --a A --b B --a-to-b JSON --b-to-a JSON ...`,
run inside the namespace that holds both interfaces (harness/distro_bench/net/delayline/controller.py starts it).

One loop: send every frame that is due, sleep (select) until the earliest next release or a frame,
read what arrived into its direction's schedule, and every half second rewrite the stats file (also
the readiness signal) and check that the owner still lives.
"""

from __future__ import annotations

import argparse
import errno
import gc
import json
import os
import select
import signal
import socket
import sys
import time
from dataclasses import asdict
from pathlib import Path

from distro_bench.net.delayline import sockets as sk
from distro_bench.net.delayline.schedule import Schedule
from distro_bench.net.link import Impairment

DRAIN_BATCH = 256  # frames read per socket per loop pass, so sends are not starved
STATS_EVERY_S = 0.5  # housekeeping (stats, parent check), also when no frame is due
IDLE_WAKE_S = 0.25
LEAD_GAIN = 0.05  # integral gain of the send-time correction; a stall of ms moves it by one step
LEAD_STEP_S = 200e-6
LEAD_MAX_S = 500e-6
TRACE = bool(os.environ.get("DBENCH_DELAYLINE_TRACE"))  # one log line per frame, for debugging


class _Counters:
    __slots__ = (
        "bytes_in",
        "bytes_out",
        "dropped_socket",
        "frames_in",
        "frames_out",
        "late_s_max",
        "late_s_sum",
        "link_errors",
        "rx_lag_s_sum",
        "send_errors",
    )  # fmt: skip

    def __init__(self) -> None:
        self.frames_in = self.bytes_in = self.frames_out = self.bytes_out = self.send_errors = 0
        self.dropped_socket = self.link_errors = 0
        self.late_s_sum = self.late_s_max = self.rx_lag_s_sum = 0.0


class _Way:
    """One direction: the socket frames come in on, their schedule, the socket they leave by, counters."""

    __slots__ = ("c", "out", "sched", "sock_in", "tag")

    def __init__(self, sock_in: socket.socket, sched: Schedule, out: socket.socket, tag: str):
        self.sock_in, self.sched, self.out, self.c, self.tag = sock_in, sched, out, _Counters(), tag

    def stats(self) -> dict:
        c, sched = self.c, self.sched
        return {
            "frames_in": c.frames_in,
            "bytes_in": c.bytes_in,
            "frames_out": c.frames_out,
            "bytes_out": c.bytes_out,
            **sched.counters(),  # drops by cause, duplicates, ... (what the impairments did)
            "dropped_socket": c.dropped_socket,  # the kernel's, when we did not read fast enough
            "send_errors": c.send_errors,
            "link_errors": c.link_errors,  # the input interface went down or away
            "queued_frames": len(sched),
            "late_s_mean": c.late_s_sum / c.frames_out if c.frames_out else 0.0,
            "late_s_max": c.late_s_max,
            "rx_lag_s_mean": c.rx_lag_s_sum / c.frames_in if c.frames_in else 0.0,
        }


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


class Forwarder:
    def __init__(self, iface_a: str, iface_b: str, a_to_b: Impairment, b_to_a: Impairment, stats_path: Path,
                 parent_pid: int | None = None, realtime: bool = True, control_path: Path | None = None):
        self.control_path = control_path
        self.control_seq = 0  # the last control file applied (DelayLine.set_impairments waits for it)
        self.reload = False
        self.ifaces = (iface_a, iface_b)
        self.impairments = {"a_to_b": a_to_b, "b_to_a": b_to_a}
        self.stats_path = stats_path
        self.parent_pid = parent_pid
        self.policy = sk.precise_timers(realtime)
        sock_a, sock_b = sk.open_socket(iface_a), sk.open_socket(iface_b)
        self.ways = (_Way(sock_a, Schedule(a_to_b, 0, header_len=sk.VNET_HDR_LEN), sock_b, "ab"),
                     _Way(sock_b, Schedule(b_to_a, 1, header_len=sk.VNET_HDR_LEN), sock_a, "ba"))
        self.by_fd = {w.sock_in.fileno(): w for w in self.ways}
        # `lead` is how much earlier than a release we act: it learns this host's wake-up and send
        # latency so that frames leave on time on average instead of always a bit late.
        self.lead = 0.0
        self.started = time.time()
        self.stop = False

    def write_stats(self, state: str) -> None:
        for w in self.ways:
            w.c.dropped_socket += sk.kernel_drops(w.sock_in)
        t = os.times()
        write_json(self.stats_path, {
            "state": state,
            "pid": os.getpid(),
            "started": self.started,
            "updated": time.time(),
            # This forwarder's CPU time, for its cost per bit. System time includes the kernel's
            # delivery of what we send (veth peer, bridge, the node's stack).
            "cpu_user_s": t.user,
            "cpu_sys_s": t.system,
            "interfaces": list(self.ifaces),
            "scheduling": self.policy,
            "lead_s": self.lead,
            "impairments": {k: asdict(v) for k, v in self.impairments.items()},
            "control_seq": self.control_seq,
            "a_to_b": self.ways[0].stats(),
            "b_to_a": self.ways[1].stats(),
        })

    def send_due(self, now: float, wake: float) -> float:
        """Send every frame due by `now` (+ lead) in both directions; the time to wake up next."""
        mono = time.monotonic
        lead = self.lead
        vnet = sk.VNET_HDR_LEN
        for w in self.ways:
            sched, out, c = w.sched, w.out, w.c
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
                    print(f"{mono():.6f} out {w.tag} len={len(frame)} late={late:.6f}", flush=True)
                c.frames_out += 1
                c.bytes_out += len(frame) - vnet
                c.late_s_sum += late
                if late > c.late_s_max:
                    c.late_s_max = late
                step = LEAD_STEP_S if late > LEAD_STEP_S else -LEAD_STEP_S if late < -LEAD_STEP_S else late
                lead = min(LEAD_MAX_S, max(0.0, lead + LEAD_GAIN * step))
            nxt = sched.next_release()
            if nxt is not None and nxt - lead < wake:
                wake = nxt - lead
        self.lead = lead
        return wake

    def receive(self, w: _Way, now: float, offset: float) -> None:
        """Read up to DRAIN_BATCH frames that arrived on `w`'s input into its schedule. `offset` turns
        the kernel's receive timestamps (CLOCK_REALTIME) into the queue's monotonic clock."""
        sock_in, sched, c = w.sock_in, w.sched, w.c
        max_frame, anc_buf, dontwait, vnet = sk.MAX_FRAME, sk.ANC_BUF, socket.MSG_DONTWAIT, sk.VNET_HDR_LEN
        for _ in range(DRAIN_BATCH):
            try:
                frame, anc, _flags, addr = sock_in.recvmsg(max_frame, anc_buf, dontwait)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                # The interface went down (reported once) or away: keep forwarding the other way;
                # frames flow again when it comes back up.
                if e.errno not in (errno.ENETDOWN, errno.ENXIO, errno.ENODEV):
                    raise
                c.link_errors += 1
                break
            if addr[2] == sk.PACKET_OUTGOING:
                continue  # our own send, on kernels without PACKET_IGNORE_OUTGOING
            arrival = now
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == sk.SCM_TIMESTAMPNS:
                    sec, nsec = sk.TIMESPEC.unpack_from(data)
                    stamped = sec + nsec * 1e-9 - offset
                    # A frame's delay runs from when it reached the interface, not from when this
                    # process got to read it. Stamps far off (a sender's delivery time carried
                    # across) are ignored.
                    if now - 1.0 < stamped < now:
                        arrival = stamped
            c.frames_in += 1
            c.bytes_in += len(frame) - vnet
            c.rx_lag_s_sum += now - arrival
            rel = sched.admit(arrival, frame)
            if TRACE:
                print(f"{time.monotonic():.6f} in {w.tag} len={len(frame)} type={frame[22:24].hex()} "
                      f"dst={frame[10:16].hex()} arr={arrival:.6f} rel={rel}", flush=True)

    def load_control(self) -> None:
        """Apply the control file (new impairments at run time, issue 18): each direction's schedule keeps
        its queue and random stream and takes the new impairment for frames admitted from now on."""
        try:
            ctl = json.loads(self.control_path.read_text())  # type: ignore[union-attr]  # None: caught below
        except (OSError, ValueError, AttributeError) as e:
            print(f"control file unreadable: {e}", flush=True)
            return
        for key, way in (("a_to_b", self.ways[0]), ("b_to_a", self.ways[1])):
            if ctl.get(key) is not None:
                imp = Impairment(**ctl[key])
                self.impairments[key] = imp
                way.sched.imp = imp
        self.control_seq = int(ctl.get("seq", self.control_seq))
        self.write_stats("forwarding")  # the read-back the controller waits for

    def run(self) -> None:
        """Forward until SIGTERM/SIGINT or until the parent dies."""
        def on_signal(signum, frame):
            self.stop = True

        def on_control(signum, frame):
            self.reload = True

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        # SIGUSR1: re-read the control file. The wake-up fd makes select() return at once, so a change
        # takes effect within a loop pass rather than after the idle wake-up.
        wake_r, wake_w = socket.socketpair()
        wake_r.setblocking(False)
        wake_w.setblocking(False)
        signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
        signal.signal(signal.SIGUSR1, on_control)
        self.write_stats("forwarding")  # also the readiness signal: both sockets are bound
        # The loop allocates only acyclic tuples; collector pauses of a few ms would show as jitter.
        gc.freeze()
        gc.disable()
        mono = time.monotonic
        rlist = [w.sock_in for w in self.ways] + [wake_r]
        next_house = mono() + STATS_EVERY_S
        while not self.stop:
            now = mono()
            wake = self.send_due(now, min(now + IDLE_WAKE_S, next_house))
            timeout = wake - mono()
            try:
                ready, _, _ = select.select(rlist, [], [], timeout if timeout > 0 else 0)
            except InterruptedError:
                continue
            if self.reload:
                self.reload = False
                self.load_control()
            if ready:
                now = mono()
                offset = time.time() - now
                for s in ready:
                    if s is wake_r:
                        try:
                            wake_r.recv(4096)
                        except BlockingIOError:
                            pass
                        continue
                    self.receive(self.by_fd[s.fileno()], now, offset)
            if now >= next_house:
                next_house = now + STATS_EVERY_S
                self.write_stats("forwarding")
                if self.parent_pid is not None and os.getppid() != self.parent_pid:
                    break  # our owner died without stopping us: do not outlive it
        self.write_stats("stopped")
        for w in self.ways:
            w.sock_in.close()


def forward(iface_a: str, iface_b: str, a_to_b: Impairment, b_to_a: Impairment, stats_path: Path,
            parent_pid: int | None = None, realtime: bool = True, control_path: Path | None = None) -> None:
    """Forward frames between two interfaces until SIGTERM/SIGINT or until the parent dies."""
    Forwarder(iface_a, iface_b, a_to_b, b_to_a, stats_path, parent_pid, realtime, control_path).run()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m distro_bench.net.delayline",
                                description="A userspace delay line between two interfaces (harness/distro_bench/net/delayline/).")
    p.add_argument("--a", required=True, help="interface towards the node")
    p.add_argument("--b", required=True, help="interface towards the switch")
    p.add_argument("--a-to-b", required=True, help="Impairment as JSON (uplink)")
    p.add_argument("--b-to-a", required=True, help="Impairment as JSON (downlink)")
    p.add_argument("--stats", required=True, type=Path, help="stats JSON, rewritten twice a second")
    p.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")
    p.add_argument("--control", type=Path, default=None,
                   help="JSON with new impairments, read on SIGUSR1 ({seq, a_to_b, b_to_a})")
    p.add_argument("--no-realtime", action="store_true", help="stay at normal scheduling priority")
    args = p.parse_args(argv)
    forward(args.a, args.b, Impairment(**json.loads(args.a_to_b)), Impairment(**json.loads(args.b_to_a)),
            args.stats, args.parent_pid, realtime=not args.no_realtime, control_path=args.control)
    return 0


if __name__ == "__main__":
    sys.exit(main())
