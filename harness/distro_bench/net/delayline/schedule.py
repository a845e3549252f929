"""The time-ordered queue of one direction of a delay line: admits frames, says when each is due.

Pure logic (no sockets), so it can be tested exactly.
- Jitter is uniform in [-jitter, +jitter] around the delay (netem's default without a table),
  clamped at zero. In-order mode (the default) releases no frame before the one ahead of it, as a
  real access line never reorders; under load this skews the delay towards delay + jitter.
  `jitter_reorders` lets jittered frames pass each other (netem's jitter does).
- Loss drops a seeded fraction of frames; duplication queues a seeded fraction twice (the copy is
  scheduled as a frame of its own, as netem re-enqueues its duplicate). A draw is made only for an
  impairment that is set, so adding one leaves the others' random sequence as it was.
- Reordering (`reorder`, netem's `reorder P` with its default gap 1) sends a seeded fraction of frames at once,
  without the delay (and without any jitter or path delay), ahead of the frames queued; the others keep their
  delay and their order. A frame sent at once joins a queue of its own (`_express`), in arrival order.
- A per-destination path (`Impairment.per_dest`, the path between two regions: delay, jitter, loss) is
  chosen by the frame's destination IPv4 address and added to the access link's; each destination keeps
  its own order (in-order mode), so a frame to a near region never waits behind one to a far region.
"""

from __future__ import annotations

import heapq
import random
import socket
from collections import deque

from distro_bench.net.link import Impairment

QUEUE_LIMIT_BYTES = 64 << 20  # per direction: 1 Gbit/s held for 0.5 s


ETH_P_IP = b"\x08\x00"
ETH_DST_IP = slice(30, 34)  # the destination address of an IPv4 packet behind a 14-byte Ethernet header


def dest_key(frame: bytes, header_len: int = 0) -> bytes | None:
    """The destination IPv4 address (4 bytes) of an Ethernet frame after `header_len` bytes of other headers
    (the virtio-net header), or None for anything but IPv4 (ARP, IPv6)."""
    if frame[header_len + 12:header_len + 14] != ETH_P_IP or len(frame) < header_len + ETH_DST_IP.stop:
        return None
    return frame[header_len + ETH_DST_IP.start:header_len + ETH_DST_IP.stop]


class Schedule:
    def __init__(self, imp: Impairment, direction: int = 0, limit_bytes: int = QUEUE_LIMIT_BYTES,
                 header_len: int = 0):
        self.header_len = header_len  # bytes before the Ethernet header in every frame (virtio-net's)
        self._last_by_dest: dict[bytes | None, float] = {}
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
        self._express: deque[tuple[float, bytes]] = deque()  # frames sent at once by `reorder`, in arrival order
        self.dropped_loss = 0
        self.dropped_overflow = 0
        self.duplicated = 0
        self.reordered = 0

    @property
    def imp(self) -> Impairment:
        return self._imp

    @imp.setter
    def imp(self, imp: Impairment) -> None:
        # A change at run time takes the new table for frames admitted from now on.
        self._imp = imp
        self._dest = {socket.inet_aton(to): (delay, jitter, loss) for to, delay, jitter, loss in imp.per_dest}

    def admit(self, now: float, frame: bytes) -> float | None:
        """Queue a frame that arrived at `now` (and its duplicate, if one is drawn); its release time,
        or None if it was dropped."""
        imp = self.imp
        if imp.loss and self.rng.random() < imp.loss:
            self.dropped_loss += 1
            return None
        key = dest_key(frame, self.header_len) if self._dest else None
        path = self._dest.get(key) if key is not None else None
        if path is not None and path[2] and self.rng.random() < path[2]:
            self.dropped_loss += 1  # lost between the regions
            return None
        release = self._enqueue(now, frame, path)
        if release is not None and imp.duplicate and self.rng.random() < imp.duplicate:
            copy_release = self._enqueue(now, frame, path)
            if copy_release is not None:
                self.duplicated += 1
        return release

    def _enqueue(self, now: float, frame: bytes, path: tuple[float, float, float] | None = None) -> float | None:
        imp = self.imp
        if self.queued_bytes + len(frame) > self.limit_bytes:
            self.dropped_overflow += 1
            return None
        if imp.reorder and self.rng.random() < imp.reorder:
            self.queued_bytes += len(frame)
            self.reordered += 1
            self._express.append((now, frame))
            return now
        release = now + imp.delay_s
        if imp.jitter_s:
            release = max(now, release + self.rng.uniform(-imp.jitter_s, imp.jitter_s))
        self.queued_bytes += len(frame)
        if self._dest:
            # Per destination: one time-ordered heap, each destination's frames kept in their order.
            key = dest_key(frame, self.header_len)
            if path is not None:
                release += path[0]
                if path[1]:
                    release = max(now, release + self.rng.uniform(-path[1], path[1]))
            if not imp.jitter_reorders:
                release = max(release, self._last_by_dest.get(key, float("-inf")))
                self._last_by_dest[key] = release
            self._seq += 1
            heapq.heappush(self._heap, (release, self._seq, frame))
        elif imp.jitter_reorders:
            self._seq += 1
            heapq.heappush(self._heap, (release, self._seq, frame))
        else:
            if release < self._last_release:
                release = self._last_release
            self._last_release = release
            self._fifo.append((release, frame))
        return release

    def counters(self) -> dict[str, int]:
        """What this queue did to frames besides delaying them (the forwarder's stats)."""
        return {"dropped_loss": self.dropped_loss, "dropped_overflow": self.dropped_overflow,
                "duplicated": self.duplicated, "reordered": self.reordered}

    def _heads(self) -> list[float]:
        return [q[0][0] for q in (self._express, self._fifo, self._heap) if q]

    def next_release(self) -> float | None:
        return min(self._heads(), default=None)

    def pop_due(self, now: float) -> tuple[float, bytes] | None:
        """The next frame whose release time has come, with that time; None if none is due. Of the queues'
        heads the earliest leaves first (a frame sent at once before a delayed one due at the same time)."""
        first = self.next_release() if self._express else None  # the common case (no reordering) skips the min
        if self._express and first is not None and first <= now and self._express[0][0] == first:
            release, frame = self._express.popleft()
        elif self._fifo:
            if self._fifo[0][0] > now:
                return None
            release, frame = self._fifo.popleft()
        elif self._heap and self._heap[0][0] <= now:
            release, _, frame = heapq.heappop(self._heap)
        else:
            return None
        self.queued_bytes -= len(frame)
        return release, frame

    def __len__(self) -> int:
        return len(self._express) + len(self._fifo) + len(self._heap)
