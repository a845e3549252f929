"""signSGD with majority vote (Bernstein et al., "signSGD with Majority Vote is Communication Efficient and Fault
Tolerant", arXiv 1810.05291): each worker sends the sign of its momentum, one bit per parameter, gathered from
every worker; each steps by the sign of the majority. Every replica applies the same vote, so they stay equal."""

from __future__ import annotations

import math

import torch
from pydantic import Field

from distro_bench import Collective, StepResult, Strategy, StrategyConfig


class SignVoteConfig(StrategyConfig):
    momentum: float = Field(default=0.9, ge=0, lt=1)  # signum: the sign of the momentum, not of the gradient
    weight_decay: float = Field(default=0.0, ge=0)


class SignVote(Strategy[SignVoteConfig]):
    Config = SignVoteConfig

    def __init__(self, cfg, params, comm, total_steps):
        super().__init__(cfg, params, comm, total_steps)
        self.tensors = [p for _, p in params]
        self.moms = [torch.zeros_like(p) for p in self.tensors]
        self.weights = 2 ** torch.arange(7, -1, -1, dtype=torch.uint8)  # 8 signs -> one byte

    @torch.no_grad()
    def step(self, step, timer):
        lr = self.cfg.lr_at(step, self.total_steps)
        with timer.phase("compress"):
            for m, p in zip(self.moms, self.tensors):
                m.mul_(self.cfg.momentum).add_(p.grad, alpha=1 - self.cfg.momentum)
            bits = torch.cat([(m.flatten() >= 0) for m in self.moms]).to(torch.uint8)
            bits = torch.nn.functional.pad(bits, (0, -len(bits) % 8)).view(-1, 8)
            packed = (bits * self.weights.to(bits.device)).sum(1).to(torch.uint8)
        gathered = self.comm.all_gather(packed)  # counted by Comm: ceil(parameters / 8) bytes from each worker
        with timer.phase("apply"):
            votes = sum(((g.unsqueeze(1) & self.weights.to(g.device)) > 0).flatten().float() * 2 - 1 for g in gathered)
            offset = 0
            for p in self.tensors:
                p.mul_(1 - lr * self.cfg.weight_decay)
                p.add_(torch.sign(votes[offset:offset + p.numel()]).view_as(p).to(p.dtype), alpha=-lr)
                offset += p.numel()
        return StepResult(synced=True)

    @classmethod
    def predict_collectives(cls, cfg, shapes, world_size):
        return [Collective("all_gather", math.ceil(sum(math.prod(s) for s in shapes.values()) / 8))]
