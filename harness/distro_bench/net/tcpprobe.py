"""Reachability, RTT and goodput between namespaces, in Python: no ping, no iperf3.

Sockets are made inside a namespace (harness/distro_bench/net/ns.py `entered`) and keep it, so one process can hold
a listener in the switch's namespace and a client in a node's, and traffic between them crosses the
emulated links (veths, tbf, delay line) like a worker's.

- RTT is one TCP handshake: SYN out, SYN-ACK back. The kernel answers a SYN for a listening socket, like
  an ICMP echo, so no userspace scheduling on the far side adds to the figure; and the figure is the
  kernel's own sample of it (tcp_info's rtt: the SYN's send stamp to the SYN-ACK's arrival, both taken in
  the kernel), so neither does this side's. The time `connect()` took in this process also counts the
  wake-up after the SYN-ACK, which on a busy host (every core taken by other work) is late every time,
  so the median does not remove it (measured: 40 ms paths read 42-44 ms, 84 ms read 100 ms). A connect
  slower than the retransmission timeout (a lost SYN or SYN-ACK, with emulated loss) is counted as
  lost, not as a long round trip.
- Goodput is one TCP stream's payload bytes per second seen by the receiver, after `omit_s` (slow
  start and the token bucket's initial burst) left out, as iperf3 -O does.
"""

from __future__ import annotations

import fcntl
import socket
import statistics
import struct
import termios
import threading
import time
from dataclasses import dataclass

from distro_bench.net.ns import NetnsRef, entered

# Linux's initial SYN retransmission timeout is 1 s: a connect that took longer lost a packet.
SYN_RTO_S = 1.0
# struct tcp_info (linux/tcp.h): eight u8 fields, then u32s of which tcpi_rtt (microseconds) is the 16th.
_TCP_INFO = getattr(socket, "TCP_INFO", 11)
_TCPI_RTT = struct.Struct("=68xI")
CHUNK = 64 * 1024


def _socket(ns: NetnsRef, bind_addr: str | None = None) -> socket.socket:
    with entered(ns):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if bind_addr:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((bind_addr, 0))
    return s


def _abort(s: socket.socket) -> None:
    """Close with a RST (SO_LINGER 0): no FIN exchange, no TIME_WAIT left behind."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    s.close()


def _close(s: socket.socket) -> None:
    s.close()


class Listener:
    """A TCP listener at `addr` in `ns` whose connections are accepted and handed to `handler` (by
    default closed at once; the client resets, so no side keeps a TIME_WAIT) in a thread each; `port` is its port. Use as a context manager."""

    def __init__(self, ns: NetnsRef, addr: str, handler=None):
        self.ns, self.addr = ns, addr
        self.handler = handler or _close
        self.sock = _socket(ns, addr)
        self.sock.listen(256)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name=f"listener {ns} {addr}")
        self._workers: list[threading.Thread] = []

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            t = threading.Thread(target=self.handler, args=(conn,), daemon=True)
            t.start()
            self._workers.append(t)

    def __enter__(self) -> Listener:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()
        for t in self._workers:
            t.join(timeout=5)


def _kernel_rtt(s: socket.socket) -> float | None:
    """The kernel's RTT of a just-connected socket (its first sample: the handshake), or None where it
    has none (no TCP_INFO, or no sample: a retransmitted SYN gives none, by Karn's rule)."""
    try:
        (rtt_us,) = _TCPI_RTT.unpack(s.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _TCPI_RTT.size))
    except (OSError, struct.error):
        return None
    return rtt_us / 1e6 if rtt_us else None


def connect_time(client: NetnsRef, addr: str, port: int, *, timeout_s: float = 3.0) -> float | None:
    """Seconds one TCP handshake from `client` to addr:port took, or None when it did not complete:
    the kernel's sample of it where there is one, else the time connect() took here. A handshake that
    needed a retransmission returns its whole duration (at least SYN_RTO_S), so callers see it as lost."""
    s = _socket(client)
    s.settimeout(timeout_s)
    try:
        t0 = time.perf_counter()
        s.connect((addr, port))
        took = time.perf_counter() - t0
        if took >= SYN_RTO_S:
            return took
        kernel = _kernel_rtt(s)
        return kernel if kernel is not None else took
    except OSError:
        return None
    finally:
        _abort(s)


@dataclass(frozen=True)
class RttResult:
    samples: tuple[float, ...]  # seconds, handshakes that needed no retransmission
    sent: int

    @property
    def mean_s(self) -> float | None:
        return statistics.fmean(self.samples) if self.samples else None

    @property
    def median_s(self) -> float | None:
        """The figure the harness reports: a busy host now and then wakes the delay line (or sends a frame)
        late, which inflates single samples (and so the mean) but not the median; a wrong delay moves every
        sample, and so the median."""
        return statistics.median(self.samples) if self.samples else None

    @property
    def lost(self) -> int:
        return self.sent - len(self.samples)


def rtt(client: NetnsRef, server: NetnsRef, addr: str, *, count: int = 10, interval_s: float = 0.2,
        timeout_s: float = 3.0) -> RttResult:
    """`count` TCP handshakes from `client` to a listener at `addr` in `server`. One unmeasured first:
    the first packet to a new neighbour waits for ARP, which is not the link's latency."""
    samples = []
    with Listener(server, addr) as lst:
        connect_time(client, addr, lst.port, timeout_s=timeout_s)
        for i in range(count):
            if i:
                time.sleep(interval_s)
            t = connect_time(client, addr, lst.port, timeout_s=timeout_s)
            if t is not None and t < SYN_RTO_S:
                samples.append(t)
    return RttResult(samples=tuple(samples), sent=count)


def unreachable(pairs: dict[str, tuple[NetnsRef, NetnsRef, str]], *, timeout_s: float = 5.0) -> list[str]:
    """Labels of the (client namespace, server namespace, server address) pairs whose TCP handshake did
    not complete within `timeout_s`; all tried at once (SYNs are retransmitted meanwhile)."""
    listeners: dict[tuple[str | None, str], Listener] = {}
    failed: list[str] = []
    try:
        for _client, server, addr in pairs.values():
            if (server.path, addr) not in listeners:
                listeners[(server.path, addr)] = Listener(server, addr).__enter__()
        results: dict[str, float | None] = {}

        def attempt(label: str, client: NetnsRef, port: int, addr: str) -> None:
            results[label] = connect_time(client, addr, port, timeout_s=timeout_s)

        threads = [threading.Thread(target=attempt, args=(label, c, listeners[(s.path, a)].port, a))
                   for label, (c, s, a) in pairs.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=timeout_s + 5)
        failed = [label for label in pairs if results.get(label) is None]
    finally:
        for lst in listeners.values():
            lst.__exit__(None, None, None)
    return failed


# ---- goodput -------------------------------------------------------------------------------------

def _send_until(sock: socket.socket, deadline: float) -> None:
    buf = b"\0" * CHUNK
    try:
        while time.monotonic() < deadline:
            sock.sendall(buf)
    except OSError:
        pass
    finally:
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _queued(sock: socket.socket) -> int:
    """Bytes received and not yet read (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


def _receive(sock: socket.socket, start: float, omit_s: float, out: dict) -> None:
    """Count bytes until EOF; `out` gets the bytes and span after `omit_s` from `start`."""
    buf = bytearray(256 * 1024)
    view = memoryview(buf)
    total, mark_bytes, mark_t, last_t = 0, None, None, None
    try:
        while True:
            n = sock.recv_into(view)
            if not n:
                break
            now = time.monotonic()
            total += n
            if mark_t is None and now - start >= omit_s:
                # What is still queued arrived before the mark too: a receiver the CPU kept waiting finds more
                # than one read's worth there, and counted after the mark it would inflate the rate.
                mark_bytes, mark_t = total + _queued(sock), now
            last_t = now
    except OSError as e:
        out["error"] = str(e)
    if mark_t is not None and mark_bytes is not None and last_t is not None and last_t > mark_t:
        out["bytes"], out["span_s"] = total - mark_bytes, last_t - mark_t


def tcp_goodput(client: NetnsRef, server: NetnsRef, server_addr: str, *, seconds: float, reverse: bool,
                omit_s: float = 1.0) -> float | None:
    """Receiver-side goodput in bit/s of one TCP stream client -> server (server -> client with
    `reverse`), the first `omit_s` seconds left out; None when nothing came through."""
    out: dict = {}
    done = threading.Event()
    start_box: list[float] = []

    def handler(conn: socket.socket) -> None:
        try:
            start = start_box[0] if start_box else time.monotonic()
            if reverse:
                _send_until(conn, start + omit_s + seconds)  # then FIN; close() still delivers what is queued
            else:
                _receive(conn, start, omit_s, out)
        finally:
            conn.close()
            done.set()

    with Listener(server, server_addr, handler) as lst:
        s = _socket(client)
        s.settimeout(10)
        try:
            start_box.append(time.monotonic())
            s.connect((server_addr, lst.port))
            s.settimeout(omit_s + seconds + 30)
            if reverse:
                s.shutdown(socket.SHUT_WR)
                _receive(s, start_box[0], omit_s, out)
            else:
                _send_until(s, start_box[0] + omit_s + seconds)
                s.settimeout(omit_s + seconds + 30)
                try:
                    s.recv(1)  # the server closes once it has read everything
                except OSError:
                    pass
        except OSError as e:
            out.setdefault("error", str(e))
        finally:
            s.close()
        done.wait(timeout=omit_s + seconds + 30)
    if not out.get("span_s"):
        return None
    return out["bytes"] * 8 / out["span_s"]

