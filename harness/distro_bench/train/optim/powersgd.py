"""PowerSGD (Vogels et al., NeurIPS 2019) through torch's own `powerSGD_hook`, then AdamW.

The algorithm is torch's (`torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook`): per bucket, a
plain averaging all-reduce until `start_powerSGD_iter`; after it, every gradient matrix (a tensor seen as
(shape[0], rest)) worth compressing at `min_compression_rate` is approximated as P Q^T of rank `rank`,
with error feedback and warm-started Qs, and the bucket issues three all-reduces: the uncompressed tensors,
the Ps, the Qs. We do not re-derive any of it. We hand the hook
- buckets as DDP builds them (`_Bucket`: a flat buffer of consecutive gradients in parameter order, at most
  `bucket_mb` each, with the GradBucket methods the hook calls), and
- our counted collectives: while the hook runs, the `dist` it calls is `CountedDist`, whose all_reduce
  goes through harness/distro_bench/train/comm.py (bytes and time counted there) and returns a completed future.
The averaged gradients then feed AdamW (clipping, schedule, weight decay as the `adamw` strategy).
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

from distro_bench.scenario.optimizers import PowerSGDConfig
from distro_bench.train.comm import Comm
from distro_bench.train.optim.adamw import _buckets, adamw_step, build_adamw
from distro_bench.train.optim.base import Collective, Period, PhaseTimer, StepResult, Strategy


class _Group:
    """Stands in for the process group the hook reads its size from (the collectives go through Comm)."""

    def __init__(self, world_size: int):
        self._size = world_size

    def size(self) -> int:
        return self._size


class _Done:
    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor

    def get_future(self) -> torch.futures.Future:
        fut: torch.futures.Future[list[torch.Tensor]] = torch.futures.Future()
        fut.set_result([self.tensor])
        return fut

    def wait(self) -> bool:
        return True


class CountedDist:
    """`torch.distributed` as the hook sees it: all_reduce through our Comm; everything else is torch's."""

    def __init__(self, comm: Comm):
        self.comm = comm
        self.seconds = 0.0  # time inside collectives, so the hook's own compute can be told apart

    def all_reduce(self, tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        start = time.perf_counter()
        self.comm.all_reduce(tensor)
        self.seconds += time.perf_counter() - start
        return _Done(tensor) if async_op else None

    def __getattr__(self, name):
        return getattr(dist, name)


@contextmanager
def counted(comm: Comm):
    """The hook modules call `dist.all_reduce`; for the duration, their `dist` is ours."""
    shim = CountedDist(comm)
    saved = psgd.dist, default_hooks.dist
    psgd.dist = default_hooks.dist = shim  # type: ignore[assignment]  # the counting stand-in for torch.distributed
    try:
        yield shim
    finally:
        psgd.dist, default_hooks.dist = saved


class _Bucket:
    """What powerSGD_hook reads of a dist.GradBucket: a flat buffer and per-tensor views into it."""

    def __init__(self, index: int, count: int, grads: list[torch.Tensor]):
        self._index, self._count = index, count
        self._buffer = torch.cat([g.reshape(-1) for g in grads])
        self._views, pos = [], 0
        for g in grads:
            self._views.append(self._buffer[pos : pos + g.numel()].view_as(g))
            pos += g.numel()

    def index(self) -> int:
        return self._index

    def is_last(self) -> bool:
        return self._index == self._count - 1

    def buffer(self) -> torch.Tensor:
        return self._buffer

    def gradients(self) -> list[torch.Tensor]:
        return self._views


def _compressed(shape: tuple[int, ...], rank: int, min_rate: float) -> tuple[int, int] | None:
    """(P, Q) element counts of a tensor the hook compresses, or None when it sends it as is (its rule)."""
    n = shape[0] if shape else 1
    m = math.prod(shape[1:]) if len(shape) > 1 else 1
    r = min(n, m, rank)
    return (n * r, m * r) if (n + m) * r * min_rate < n * m else None


class PowerSGD(Strategy[PowerSGDConfig]):
    Config = PowerSGDConfig
    clips_gradients = True  # AdamW clips the averaged (decompressed) gradient, as it does for AdamW

    def __init__(self, cfg: PowerSGDConfig, params, comm, total_steps):
        super().__init__(cfg, params, comm, total_steps)
        self.tensors = [p for _, p in params]
        self.opt = build_adamw(cfg, self.tensors)
        self.buckets = _buckets([p.numel() for p in self.tensors], 4, cfg.bucket_mb * 2**20)
        self.start = cfg.start_at(total_steps)
        self.state = psgd.PowerSGDState(
            process_group=_Group(comm.world_size), matrix_approximation_rank=cfg.rank,
            start_powerSGD_iter=self.start, min_compression_rate=cfg.min_compression_rate,
            use_error_feedback=cfg.error_feedback, warm_start=cfg.warm_start, random_seed=cfg.seed,
            compression_stats_logging_frequency=10**9)

    @torch.no_grad()
    def step(self, step: int, timer: PhaseTimer) -> StepResult:
        if self.state.iter < self.state.start_powerSGD_iter:
            # A time budget learns its length as it goes (the worker updates total_steps): follow it until
            # compression has started, then keep it.
            self.state.start_powerSGD_iter = self.start = self.cfg.start_at(self.total_steps)
        compressing = self.state.iter >= self.state.start_powerSGD_iter
        with counted(self.comm) as shim:
            for i, members in enumerate(self.buckets):
                grads = [self.tensors[j].grad if self.tensors[j].grad is not None else torch.zeros_like(self.tensors[j])
                         for j in members]
                start, comm_before = time.perf_counter(), shim.seconds
                bucket = _Bucket(i, len(self.buckets), grads)
                out = psgd.powerSGD_hook(self.state, bucket).wait()  # type: ignore[arg-type]  # a GradBucket look-alike
                pos = 0
                for j in members:
                    p = self.tensors[j]
                    p.grad = out[pos : pos + p.numel()].view_as(p).clone()
                    pos += p.numel()
                # The hook interleaves its compute with its collectives: its time less theirs is compression.
                timer.seconds["compress"] += time.perf_counter() - start - (shim.seconds - comm_before)
        with timer.phase("apply"):
            adamw_step(self.opt, self.cfg, self.tensors, step, self.total_steps)
        return StepResult(extra={"powersgd": compressing})

    @classmethod
    def _collectives(cls, cfg: PowerSGDConfig, shapes, compressing: bool) -> list[Collective]:
        shapes = list(shapes.values())
        numels = [math.prod(s) for s in shapes]
        out = []
        for members in _buckets(numels, 4, cfg.bucket_mb * 2**20):
            if not compressing:
                out.append(Collective("all_reduce", 4 * sum(numels[j] for j in members)))
                continue
            plain = ps = qs = 0
            for j in members:
                pq = _compressed(tuple(shapes[j]), cfg.rank, cfg.min_compression_rate)
                if pq is None:
                    plain += numels[j]
                else:
                    ps, qs = ps + pq[0], qs + pq[1]
            out += [Collective("all_reduce", 4 * plain), Collective("all_reduce", 4 * ps), Collective("all_reduce", 4 * qs)]
        return out

    @classmethod
    def predict_period(cls, cfg: PowerSGDConfig, shapes, world_size) -> Period:
        """The steady state: compressed steps."""
        return Period(1, cls._collectives(cfg, shapes, True))

    @classmethod
    def predict_step(cls, cfg: PowerSGDConfig, shapes, world_size, step, total_steps):
        return cls._collectives(cfg, shapes, step >= cfg.start_at(total_steps))
