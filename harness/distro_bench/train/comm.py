"""The process-group wrapper every optimizer talks through: it times collectives and counts payload bytes.

Payload accounting (per worker, per call), as DESIGN.md defines it:
- all-reduce of B bytes: tx B (our contribution), rx B (the reduced result counts as received);
- all-gather of s bytes from each of N workers, `exchange="ring"` (gloo's, NCCL's all-gather): tx s (our
  contribution; the ring forwards it hop by hop), rx (N-1)*s;
- the same gather with `exchange="direct"` (this rank sends its buffer to each peer itself, batched
  point-to-point): tx (N-1)*s, what this rank really hands to the network, rx (N-1)*s. Both move the same
  bytes per worker on the wire ((N-1)*s each way); only the ring's tx counts a contribution, not copies.
- a point-to-point exchange of s bytes with k peers (`exchange`, NoLoCo's gossip): tx k*s, rx k*s.
`ring_bytes` is what a ring algorithm (gloo's, NCCL's) moves per worker in each direction for the same
calls: 2(N-1)/N * B for an all-reduce, (N-1)*s for an all-gather (either exchange). Wire counters are
compared with it. Counting happens on the real buffers handed to torch.distributed, never estimated
afterwards.

Time: a collective's seconds are those this rank spends inside torch.distributed for it: the call, and for
an asynchronous one (`all_gather_async`) also the wait on its handle, counted when the wait happens (so an
overlapped exchange costs only what it failed to hide). Bytes and calls are counted at launch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

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


Exchange = Literal["ring", "direct"]


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def host_staged(tensor: torch.Tensor, group: dist.ProcessGroup | None) -> bool:
    """Whether point-to-point sends of `tensor` must go through host memory: a CUDA tensor over gloo. Gloo's
    send and recv hand the tensor's data pointer to its TCP transport unchecked (ProcessGroupGloo::send), so a
    device pointer cannot travel; its collectives (all-reduce, all-gather) stage CUDA tensors themselves. Four
    workers sharing one GPU run over gloo (run/lifecycle.py choose_dist_backend)."""
    return tensor.is_cuda and dist.get_backend(group) == "gloo"


class Comm:
    """Collectives over the default process group (or a single process when world_size is 1)."""

    def __init__(self, group: dist.ProcessGroup | None = None):
        self.group = group
        self.distributed = dist.is_available() and dist.is_initialized()
        self.rank = dist.get_rank(group) if self.distributed else 0
        self.world_size = dist.get_world_size(group) if self.distributed else 1
        self._stats = CommStats()

    def use(self, group: dist.ProcessGroup | None) -> None:
        """Collectives over `group` from now on (None: the default group): the workers present while others are
        away (harness/distro_bench/train/churn.py). Only a member of `group` calls it."""
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)

    def _launched(self) -> float:
        if self._stats.first_call_time is None:
            self._stats.first_call_time = time.time()
        self._stats.calls += 1
        return time.perf_counter()

    def _timed(self, tensor: torch.Tensor, fn) -> None:
        start = self._launched()
        fn()
        if tensor.is_cuda:  # NCCL returns before the kernel ends; the clock must not.
            torch.cuda.synchronize(tensor.device)
        self._stats.seconds += time.perf_counter() - start

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum in place across workers."""
        if self.world_size > 1:
            self._timed(tensor, lambda: dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=self.group))
        n = _nbytes(tensor)
        self._stats.tx_bytes += n
        self._stats.rx_bytes += n if self.world_size > 1 else 0
        self._stats.ring_bytes += 2 * (self.world_size - 1) / self.world_size * n
        return tensor

    def all_gather(self, tensor: torch.Tensor, *, exchange: Exchange = "ring") -> list[torch.Tensor]:
        """Every worker's copy of an equally shaped tensor, in rank order."""
        return self.all_gather_async(tensor, exchange=exchange).wait()

    def all_gather_async(self, tensor: torch.Tensor, *, exchange: Exchange = "ring") -> PendingGather:
        """Start the gather and return at once; `wait()` on the result gives the buffers in rank order."""
        n, world = _nbytes(tensor), self.world_size
        self._stats.tx_bytes += n * (world - 1) if exchange == "direct" else n
        self._stats.rx_bytes += n * (world - 1)
        self._stats.ring_bytes += n * (world - 1)
        if world == 1:
            return PendingGather(self, [tensor], [])
        tensor = tensor.contiguous()
        start = self._launched()
        if exchange == "ring":
            out = [torch.empty_like(tensor) for _ in range(world)]
            works = [dist.all_gather(out, tensor, group=self.group, async_op=True)]
        elif exchange == "direct":
            send = tensor.cpu() if host_staged(tensor, self.group) else tensor
            out, ops = [], []
            for peer in range(world):
                if peer == self.rank:
                    out.append(tensor)
                    continue
                out.append(torch.empty_like(send))
                g_peer = dist.get_global_rank(self.group, peer) if self.group is not None else peer
                ops.append(dist.P2POp(dist.isend, send, g_peer, self.group))
                ops.append(dist.P2POp(dist.irecv, out[-1], g_peer, self.group))
            # Every send and receive posted at once: one round trip instead of the ring's N-1.
            works = dist.batch_isend_irecv(ops)
        else:
            raise ValueError(f"exchange {exchange!r}: valid are 'ring', 'direct'")
        self._stats.seconds += time.perf_counter() - start
        return PendingGather(self, out, works, tensor.device)

    def exchange(self, tensor: torch.Tensor, peers: list[int]) -> list[torch.Tensor]:
        """Point-to-point (gossip): send `tensor` to each of `peers` (ranks of this group) and receive each one's
        equally shaped tensor, in `peers` order; every send and receive posted at once (one round). Counted as
        tx = rx = bytes x len(peers): no all-reduce, only this worker's own links (NoLoCo)."""
        n = _nbytes(tensor) * len(peers)
        self._stats.tx_bytes += n
        self._stats.rx_bytes += n
        self._stats.ring_bytes += n  # what the wire carries each way, as for a direct gather
        if not peers:
            return [torch.empty_like(tensor) for _ in peers]
        device = tensor.device
        tensor = tensor.contiguous()
        if host_staged(tensor, self.group):
            tensor = tensor.cpu()
        out = [torch.empty_like(tensor) for _ in peers]
        ops = []
        for peer, buf in zip(peers, out):
            g_peer = dist.get_global_rank(self.group, peer) if self.group is not None else peer
            ops += [dist.P2POp(dist.isend, tensor, g_peer, self.group), dist.P2POp(dist.irecv, buf, g_peer, self.group)]
        self._timed(tensor, lambda: [w.wait() for w in dist.batch_isend_irecv(ops)])
        return [b.to(device) for b in out]

    def take(self) -> CommStats:
        """Counters since the last call, then reset: one call per training step."""
        stats, self._stats = self._stats, CommStats()
        return stats


class PendingGather:
    """A gather in flight. `wait()` blocks until every buffer has arrived and adds the time it blocked to
    the communication seconds of the step in which it is called."""

    def __init__(self, comm: Comm, out: list[torch.Tensor], works: list, device: torch.device | None = None):
        self._comm, self._out, self._works = comm, out, works
        self._device = device  # where the buffers belong (received in host memory when staged)

    def wait(self) -> list[torch.Tensor]:
        if self._works:
            start = time.perf_counter()
            for w in self._works:
                w.wait()
            if self._device is not None:
                self._out = [t.to(self._device) for t in self._out]
            if self._out[0].is_cuda:
                torch.cuda.synchronize(self._out[0].device)
            self._comm._stats.seconds += time.perf_counter() - start
            self._works = []
        return self._out
