"""The baseline: gradients all-reduced in buckets as torch DDP does, then torch.optim.AdamW.

We bucket after backward instead of using DDP's overlapped hooks so the step splits cleanly into
compute / communicate / apply phases; the bytes on the wire are the same as DDP's (one ring
all-reduce per 25 MB bucket of gradients in their own precision, or bf16 when asked).
"""

from __future__ import annotations

import math

import torch

from distro_bench.scenario.optimizers import AdamWConfig, InnerAdamWOptions
from distro_bench.train.optim.base import Collective, PhaseTimer, StepResult, Strategy

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}




def _buckets(numels: list[int], element_size: int, bucket_bytes: float) -> list[list[int]]:
    """Group parameter indices into consecutive buckets of at most `bucket_bytes` (at least one each)."""
    out: list[list[int]] = []
    cur: list[int] = []
    size = 0
    for i, n in enumerate(numels):
        if cur and size + n * element_size > bucket_bytes:
            out.append(cur)
            cur, size = [], 0
        cur.append(i)
        size += n * element_size
    if cur:
        out.append(cur)
    return out


def average_fp32(tensors: list[torch.Tensor], buckets: list[list[int]], comm, timer) -> None:
    """Replace each tensor by its mean over the workers: one fp32 all-reduce per bucket (SPARTA's final
    average, DES-LOC's parameter and moment averages)."""
    world = comm.world_size
    for bucket in buckets:
        with timer.phase("compress"):
            flat = torch.cat([tensors[i].reshape(-1).float() for i in bucket])
        comm.all_reduce(flat)
        with timer.phase("apply"):
            flat.div_(world)
            pos = 0
            for i in bucket:
                t = tensors[i]
                t.copy_(flat[pos : pos + t.numel()].view_as(t))
                pos += t.numel()


def average_fp32_collectives(shapes: dict[str, tuple[int, ...]], bucket_mb: float) -> list[Collective]:
    """What `average_fp32` issues for tensors of these shapes."""
    numels = [math.prod(s) for s in shapes.values()]
    return [Collective("all_reduce", 4 * sum(numels[i] for i in b)) for b in _buckets(numels, 4, bucket_mb * 2**20)]


def build_adamw(cfg: InnerAdamWOptions, tensors: list[torch.Tensor]) -> torch.optim.AdamW:
    """torch's AdamW with weight decay on matrices only (norms: Llama practice); also the inner optimizer
    of DiLoCo, SparseLoCo and PowerSGD."""
    decay = [p for p in tensors if p.ndim >= 2]
    no_decay = [p for p in tensors if p.ndim < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps, foreach=True,
    )


def adamw_step(opt: torch.optim.AdamW, cfg: InnerAdamWOptions, tensors: list[torch.Tensor], step: int, total_steps: int) -> None:
    """Clip (when asked), set the scheduled lr, step."""
    if cfg.max_grad_norm:
        torch.nn.utils.clip_grad_norm_(tensors, cfg.max_grad_norm, foreach=True)
    lr = cfg.lr_at(step, total_steps)
    for group in opt.param_groups:
        group["lr"] = lr
    opt.step()


class AdamW(Strategy[AdamWConfig]):
    Config = AdamWConfig
    clips_gradients = True  # after the all-reduce (the averaged gradient), so the worker does not
    sends_dense_gradients = True

    def __init__(self, cfg: AdamWConfig, params, comm, total_steps):
        super().__init__(cfg, params, comm, total_steps)
        tensors = [p for _, p in params]
        self.opt = build_adamw(cfg, tensors)
        self.dtype = _DTYPES[cfg.grad_dtype]
        elem = torch.tensor([], dtype=self.dtype).element_size()
        self.buckets = _buckets([p.numel() for p in tensors], elem, cfg.bucket_mb * 2**20)
        self.tensors = tensors

    def step(self, step: int, timer: PhaseTimer) -> StepResult:
        world = self.comm.world_size
        for bucket in self.buckets:
            grads = [self.tensors[i].grad for i in bucket]
            with timer.phase("compress"):
                flat = torch.cat([g.reshape(-1) for g in grads]).to(self.dtype)
            self.comm.all_reduce(flat)
            with timer.phase("apply"):
                flat = flat.float().div_(world)
                offset = 0
                for g in grads:
                    g.copy_(flat[offset : offset + g.numel()].view_as(g))
                    offset += g.numel()
        with timer.phase("apply"):
            adamw_step(self.opt, self.cfg, self.tensors, step, self.total_steps)
        return StepResult()

    def shared_state(self) -> list[torch.Tensor]:
        # Every replica steps on the same averaged gradient, so the moments (and step counts) are alike too.
        moments = [self.opt.state[p][k] for p in self.tensors if p in self.opt.state
                   for k in ("step", "exp_avg", "exp_avg_sq")]
        return [*self.tensors, *moments]

    @classmethod
    def predict_collectives(cls, cfg: AdamWConfig, shapes, world_size):
        elem = torch.tensor([], dtype=_DTYPES[cfg.grad_dtype]).element_size()
        numels = [math.prod(s) for s in shapes.values()]
        return [Collective("all_reduce", sum(numels[i] for i in b) * elem)
                for b in _buckets(numels, elem, cfg.bucket_mb * 2**20)]
