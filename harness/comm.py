"""The process-group wrapper every optimizer talks through: it times collectives and counts payload bytes.

Payload accounting (per worker, per call), as DESIGN.md defines it:
- all-reduce of B bytes: tx B (our contribution), rx B (the reduced result counts as received);
- all-gather of s bytes from each of N workers: tx s, rx (N-1)*s.
`ring_bytes` is what a ring algorithm (gloo's, NCCL's) moves per worker in each direction for the same
calls: 2(N-1)/N * B for an all-reduce, (N-1)*s for an all-gather. Wire counters are compared with it.
Counting happens on the real buffers handed to torch.distributed, never estimated afterwards.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class CommStats:
    tx_bytes: int = 0
    rx_bytes: int = 0
    seconds: float = 0.0
    calls: int = 0
    ring_bytes: float = 0.0
    first_call_time: float | None = None  # wall clock when this worker entered its first collective


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Comm:
    """Collectives over the default process group (or a single process when world_size is 1)."""

    def __init__(self, group: dist.ProcessGroup | None = None):
        self.group = group
        self.distributed = dist.is_available() and dist.is_initialized()
        self.rank = dist.get_rank(group) if self.distributed else 0
        self.world_size = dist.get_world_size(group) if self.distributed else 1
        self._stats = CommStats()

    def _timed(self, tensor: torch.Tensor, fn) -> None:
        if self._stats.first_call_time is None:
            self._stats.first_call_time = time.time()
        start = time.perf_counter()
        fn()
        if tensor.is_cuda:  # NCCL returns before the kernel ends; the clock must not.
            torch.cuda.synchronize(tensor.device)
        self._stats.seconds += time.perf_counter() - start
        self._stats.calls += 1

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum in place across workers."""
        if self.world_size > 1:
            self._timed(tensor, lambda: dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=self.group))
        n = _nbytes(tensor)
        self._stats.tx_bytes += n
        self._stats.rx_bytes += n if self.world_size > 1 else 0
        self._stats.ring_bytes += 2 * (self.world_size - 1) / self.world_size * n
        return tensor

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Every worker's copy of an equally shaped tensor, in rank order."""
        if self.world_size == 1:
            out = [tensor]
        else:
            out = [torch.empty_like(tensor) for _ in range(self.world_size)]
            self._timed(tensor, lambda: dist.all_gather(out, tensor.contiguous(), group=self.group))
        n = _nbytes(tensor)
        self._stats.tx_bytes += n
        self._stats.rx_bytes += n * (self.world_size - 1)
        self._stats.ring_bytes += n * (self.world_size - 1)
        return out

    def take(self) -> CommStats:
        """Counters since the last call, then reset: one call per training step."""
        stats, self._stats = self._stats, CommStats()
        return stats
