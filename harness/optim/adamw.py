"""The baseline: gradients all-reduced in buckets as torch DDP does, then torch.optim.AdamW.

We bucket after backward instead of using DDP's overlapped hooks so the step splits cleanly into
compute / communicate / apply phases; the bytes on the wire are the same as DDP's (one ring
all-reduce per 25 MB bucket of gradients in their own precision, or bf16 when asked).
"""

from __future__ import annotations

import math

import torch

from harness.optim.base import Collective, PhaseTimer, Strategy
from harness.optim.options import AdamWConfig

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}




def _buckets(numels: list[int], element_size: int, bucket_bytes: float) -> list[list[int]]:
    """Group parameter indices into consecutive buckets of at most `bucket_bytes` (at least one each)."""
    out, cur, size = [], [], 0
    for i, n in enumerate(numels):
        if cur and size + n * element_size > bucket_bytes:
            out.append(cur)
            cur, size = [], 0
        cur.append(i)
        size += n * element_size
    if cur:
        out.append(cur)
    return out


class AdamW(Strategy):
    Config = AdamWConfig
    clips_gradients = True  # after the all-reduce (the averaged gradient), so the worker does not

    def __init__(self, cfg: AdamWConfig, params, comm, total_steps):
        super().__init__(cfg, params, comm, total_steps)
        tensors = [p for _, p in params]
        decay = [p for p in tensors if p.ndim >= 2]
        no_decay = [p for p in tensors if p.ndim < 2]  # norms: Llama practice, no weight decay
        self.opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps, foreach=True,
        )
        self.dtype = _DTYPES[cfg.grad_dtype]
        elem = torch.tensor([], dtype=self.dtype).element_size()
        self.buckets = _buckets([p.numel() for p in tensors], elem, cfg.bucket_mb * 2**20)
        self.tensors = tensors

    def step(self, step: int, timer: PhaseTimer) -> None:
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
            if self.cfg.max_grad_norm:
                torch.nn.utils.clip_grad_norm_(self.tensors, self.cfg.max_grad_norm, foreach=True)
            lr = self.cfg.lr_at(step, self.total_steps)
            for group in self.opt.param_groups:
                group["lr"] = lr
            self.opt.step()

    @classmethod
    def predict_collectives(cls, cfg: AdamWConfig, shapes, world_size):
        elem = torch.tensor([], dtype=_DTYPES[cfg.grad_dtype]).element_size()
        numels = [math.prod(s) for s in shapes.values()]
        return [Collective("all_reduce", sum(numels[i] for i in b) * elem)
                for b in _buckets(numels, elem, cfg.bucket_mb * 2**20)]

    @classmethod
    def predict_payload_bytes(cls, cfg: AdamWConfig, shapes, world_size):
        total = sum(c.nbytes for c in cls.predict_collectives(cfg, shapes, world_size))
        return total, (total if world_size > 1 else 0)
