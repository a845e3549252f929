"""DiLoCo (Douillard et al., arXiv 2311.08105), as OpenDiLoCo and INTELLECT-1 run it.

H local AdamW steps (harness/distro_bench/train/optim/local.py), then the pseudo-gradient `anchor - params` is averaged over
the workers and applied to the shared parameters by an outer SGD with Nesterov momentum (torch.optim.SGD,
outer lr 0.7 and momentum 0.9 by default):

    g = mean_r (anchor - params_r);  b = mu * b + g  (b = g the first time);  anchor -= lr * (g + mu * b)

The pseudo-gradient travels as
- fp32 or bf16: a ring all-reduce per bucket (AdamW's buckets), summed in that precision;
- int8: per tensor, an fp32 absmax scale and int8 values, all-gathered in one buffer; every rank decodes
  the buffers in rank order and averages them, so the sum is the same on every rank and cannot overflow.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch

from distro_bench.scenario.optimizers import DiLoCoConfig
from distro_bench.train.optim.adamw import _buckets
from distro_bench.train.optim.base import Collective, Period, PhaseTimer
from distro_bench.train.optim.local import LocalSteps

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def int8_nbytes(numels: list[int]) -> int:
    """One worker's int8 packet: an fp32 scale per tensor, then one byte per element."""
    return 4 * len(numels) + sum(numels)


def encode_int8(tensors: list[torch.Tensor]) -> torch.Tensor:
    """fp32 tensors -> one uint8 buffer: scales (fp32, one per tensor), then int8 values round(x / scale)."""
    flats = [t.reshape(-1) for t in tensors]
    scales = torch.stack([t.abs().max() if t.numel() else t.new_zeros(()) for t in flats]) / 127
    scales = torch.where(scales > 0, scales, torch.ones_like(scales))
    q = torch.cat([(t / s).round_().clamp_(-127, 127) for t, s in zip(flats, scales)]).to(torch.int8)
    return torch.cat([scales.float().view(torch.uint8), q.view(torch.uint8)])


def decode_int8(buf: torch.Tensor, numels: list[int]) -> list[torch.Tensor]:
    scales = buf[: 4 * len(numels)].view(torch.float32)
    q = buf[4 * len(numels):].view(torch.int8).float()
    out, pos = [], 0
    for i, n in enumerate(numels):
        out.append(q[pos : pos + n] * scales[i])
        pos += n
    return out


class DiLoCo(LocalSteps[DiLoCoConfig]):
    Config: ClassVar[type[DiLoCoConfig]] = DiLoCoConfig

    def __init__(self, cfg: DiLoCoConfig, params, comm, total_steps):
        super().__init__(cfg, params, comm, total_steps)
        self.outer = torch.optim.SGD(self.anchor, lr=cfg.outer_lr, momentum=cfg.outer_momentum, nesterov=cfg.nesterov)
        self.numels = [p.numel() for p in self.tensors]
        if cfg.pseudo_grad != "int8":
            self.dtype = _DTYPES[cfg.pseudo_grad]
            elem = torch.tensor([], dtype=self.dtype).element_size()
            self.buckets = _buckets(self.numels, elem, cfg.bucket_mb * 2**20)

    def shared_state(self) -> list[torch.Tensor]:
        # The outer momentum follows the averaged pseudo-gradients: alike on every replica. Made before the first
        # round (zeros: SGD's first step then gives the gradient, as its own initialisation does) so that
        # donor and joiner hand over the same list.
        for a in self.anchor:
            self.outer.state[a].setdefault("momentum_buffer", torch.zeros_like(a))
        return [*self.anchor, *(self.outer.state[a]["momentum_buffer"] for a in self.anchor)]

    def sync(self, pseudo: list[torch.Tensor], timer: PhaseTimer) -> dict:
        world = self.comm.world_size
        if self.cfg.pseudo_grad == "int8":
            with timer.phase("compress"):
                buf = encode_int8(pseudo)
            gathered = self.comm.all_gather(buf)
            with timer.phase("apply"):
                mean = [torch.zeros_like(a) for a in self.anchor]
                for b in gathered:  # rank order: the same sum on every rank
                    for m, d in zip(mean, decode_int8(b, self.numels)):
                        m.view(-1).add_(d)
                for a, m in zip(self.anchor, mean):
                    a.grad = m.div_(world)
        else:
            for bucket in self.buckets:
                with timer.phase("compress"):
                    flat = torch.cat([pseudo[i].reshape(-1) for i in bucket]).to(self.dtype)
                self.comm.all_reduce(flat)
                with timer.phase("apply"):
                    flat = flat.float().div_(world)
                    pos = 0
                    for i in bucket:
                        self.anchor[i].grad = flat[pos : pos + self.numels[i]].view_as(self.anchor[i]).clone()
                        pos += self.numels[i]
        with timer.phase("apply"):
            self.outer.step()
            for a in self.anchor:
                a.grad = None
        return {"outer_lr": self.cfg.outer_lr}

    @classmethod
    def predict_period(cls, cfg: DiLoCoConfig, shapes, world_size) -> Period:
        numels = [math.prod(s) for s in shapes.values()]
        if cfg.pseudo_grad == "int8":
            return Period(cfg.inner_steps, [Collective("all_gather", int8_nbytes(numels))])
        elem = torch.tensor([], dtype=_DTYPES[cfg.pseudo_grad]).element_size()
        return Period(cfg.inner_steps, [Collective("all_reduce", sum(numels[i] for i in b) * elem)
                                        for b in _buckets(numels, elem, cfg.bucket_mb * 2**20)])
