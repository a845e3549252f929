"""SPARTA, sparse parameter averaging (Beton et al., EXO Labs; ICLR 2025 workshop, openreview.net/forum?id=stFPf3gzq1).

Every step each worker takes a local AdamW step on its own gradient, then all workers average the same
random subset of the parameters: k = round(fraction x parameters) positions of the flattened model, drawn
from a generator seeded alike on every rank, gathered into one fp32 buffer, all-reduced and divided by
the world size, and written back. The models stay close (the paper: correlation above 0.9 at 0.1%) but
are never identical between steps, so no step reports `synced`; `finish` averages every parameter once,
as the paper does at the end, so the run ends with one model.

Positions are drawn with replacement (torch.randint: no O(parameters) permutation per step); a position
drawn twice is averaged twice to the same value, and the payload is always exactly k values. The paper's
asynchronous variant (averaging parameters some steps old, to overlap communication) is left out.
"""

from __future__ import annotations

import math

import torch

from distro_bench.scenario.optimizers import SPARTAConfig
from distro_bench.train.optim.adamw import _buckets, adamw_step, average_fp32, average_fp32_collectives, build_adamw
from distro_bench.train.optim.base import Collective, PhaseTimer, StepResult, Strategy


class SPARTA(Strategy[SPARTAConfig]):
    Config = SPARTAConfig
    clips_gradients = True  # the local AdamW step clips this worker's gradient

    def __init__(self, cfg: SPARTAConfig, params, comm, total_steps):
        super().__init__(cfg, params, comm, total_steps)
        self.tensors = [p for _, p in params]
        self.opt = build_adamw(cfg, self.tensors)
        numels = [p.numel() for p in self.tensors]
        self.ends = torch.tensor(numels).cumsum(0)
        self.starts = self.ends - torch.tensor(numels)
        self.k = cfg.count(sum(numels))
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.buckets = _buckets(numels, 4, cfg.bucket_mb * 2**20)

    def _where(self) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
        """This step's positions, per tensor: (tensor index, positions in the buffer, offsets in the tensor)."""
        idx = torch.randint(int(self.ends[-1]), (self.k,), generator=self.gen)
        owner = torch.searchsorted(self.ends, idx, right=True)
        out = []
        for i in owner.unique().tolist():
            slots = (owner == i).nonzero().squeeze(1)
            out.append((i, slots, idx[slots] - self.starts[i]))
        return out

    @torch.no_grad()
    def step(self, step: int, timer: PhaseTimer) -> StepResult:
        with timer.phase("apply"):
            adamw_step(self.opt, self.cfg, self.tensors, step, self.total_steps)
        with timer.phase("compress"):
            where = self._where()
            device = self.tensors[0].device
            buf = torch.empty(self.k, device=device)
            for i, slots, offs in where:
                buf[slots.to(device)] = self.tensors[i].view(-1)[offs.to(device)].float()
        self.comm.all_reduce(buf)
        with timer.phase("apply"):
            buf.div_(self.comm.world_size)
            for i, slots, offs in where:
                p = self.tensors[i]
                p.view(-1)[offs.to(device)] = buf[slots.to(device)].to(p.dtype)
        return StepResult(synced=False)

    @torch.no_grad()
    def finish(self, timer: PhaseTimer) -> StepResult:
        """Average every parameter once (fp32 all-reduce per bucket) so every replica ends the same."""
        average_fp32(self.tensors, self.buckets, self.comm, timer)
        return StepResult(synced=True)

    @classmethod
    def predict_collectives(cls, cfg: SPARTAConfig, shapes, world_size):
        return [Collective("all_reduce", 4 * cfg.count(sum(math.prod(s) for s in shapes.values())))]

    @classmethod
    def predict_finish(cls, cfg: SPARTAConfig, shapes, world_size, steps_done):
        return average_fp32_collectives(shapes, cfg.bucket_mb)
