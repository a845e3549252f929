"""The forwarder's AF_PACKET sockets and timer settings.

- `PACKET_VNET_HDR` on both sockets carries each frame's checksum state across (a virtio-net
  header): frames whose TCP/UDP checksum the sender left to offload (CHECKSUM_PARTIAL, the veth
  default) would otherwise be forwarded with a wrong checksum and dropped by the receiver.
- `PACKET_IGNORE_OUTGOING` keeps our own sends out of our receive queue (pkttype is checked as a
  fallback on kernels before 4.20).
- Receive timestamps (SO_TIMESTAMPNS) let a frame's delay run from when it reached the interface.
- Sleeps are select() timeouts with microsecond resolution, and the process asks for 1 ns timer
  slack, so a hop adds tens of microseconds, not a millisecond.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct

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
MAX_FRAME = 65536 + VNET_HDR_LEN  # a GSO frame if someone left offloads on


def open_socket(iface: str) -> socket.socket:
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


def kernel_drops(sock: socket.socket) -> int:
    """Frames the kernel dropped on this socket since the last call (we did not read fast enough)."""
    try:
        return TPACKET_STATS.unpack(sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, TPACKET_STATS.size))[1]
    except OSError:
        return 0


def precise_timers(realtime: bool) -> str:
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
