"""NoLoCo, no-all-reduce low-communication training (Kolehmainen et al., Gensyn, arXiv 2506.10911).

DiLoCo's two loops without its global average: every worker keeps its own outer weights phi_i (DiLoCo's
anchor, here per worker) and an outer momentum delta_i. Each step is a local AdamW step on the fast weights
theta_i; every H steps the workers split into random groups of `group_size` (2: pairs), and each averages
only with its group G, by point-to-point exchange (no collective over all workers):

    delta_i = alpha delta_i + beta mean_G(theta_j - phi_j) + gamma (mean_G(phi_j) - phi_i)
    phi_i  += delta_i;   theta_i = phi_i

alpha `outer_momentum`, beta `outer_lr`, gamma `gamma` (the paper's modified Nesterov step: the last term
pulls diverging replicas together). This is the update of the authors' code (github.com/jkolehm/noloco,
src/noloco/sparse_optimizer_c.py), which has gamma = beta; with gamma = beta the two means fold into
mean_G(theta_j) - phi_i, so only theta travels (one model's fp32 bytes per peer), else phi and theta - phi
(two). Groups are consecutive slices of a random permutation of the ranks, drawn each round from a
generator seeded `seed` on every rank, so every worker agrees on them without a word; the means add the
group's buffers in rank order, so a group's members compute bit-identical means.

Replicas never hold the same parameters between rounds, so no step reports `synced`; `finish` averages
every parameter once over all workers (fp32 all-reduce, as SPARTA's end does) so the run ends with one
model to evaluate and compare. That final average is the harness's, not the paper's. Left out: the paper's
random routing of activations between pipeline stages (this harness trains data-parallel only).
"""

from __future__ import annotations

import math

import torch

from distro_bench.errors import InputError
from distro_bench.scenario.optimizers import NoLoCoConfig
from distro_bench.train.optim.adamw import _buckets, average_fp32, average_fp32_collectives
from distro_bench.train.optim.base import Collective, Period, PhaseTimer, StepResult
from distro_bench.train.optim.local import InnerAdamW


def gossip_groups(world_size: int, group_size: int, gen: torch.Generator) -> list[list[int]]:
    """This round's groups: consecutive `group_size` slices of a random permutation of the ranks (each sorted).
    The same on every rank whose generator was seeded alike and drawn from as often."""
    perm = torch.randperm(world_size, generator=gen).tolist()
    return [sorted(perm[i : i + group_size]) for i in range(0, world_size, group_size)]


def check_world(cfg: NoLoCoConfig, world_size: int) -> None:
    if world_size > 1 and world_size % cfg.group_size:
        raise InputError(f"noloco: {world_size} workers do not split into groups of group_size {cfg.group_size}; "
                         f"use a world size that is a multiple of it, or another group_size")


class NoLoCo(InnerAdamW[NoLoCoConfig]):
    Config = NoLoCoConfig

    def __init__(self, cfg: NoLoCoConfig, params, comm, total_steps):
        check_world(cfg, comm.world_size)
        super().__init__(cfg, params, comm, total_steps)
        self.phi = [p.detach().float().clone() for p in self.tensors]  # this worker's outer weights
        self.delta = [torch.zeros_like(f) for f in self.phi]  # its outer momentum
        self.numels = [p.numel() for p in self.tensors]
        self.buckets = _buckets(self.numels, 4 * cfg.sent_copies(), cfg.bucket_mb * 2**20)
        self.final_buckets = _buckets(self.numels, 4, cfg.bucket_mb * 2**20)
        self.gen = torch.Generator().manual_seed(cfg.seed)

    def _payload(self, bucket: list[int]) -> torch.Tensor:
        """What this worker sends its peers for these tensors: theta (gamma = beta), else phi then theta - phi."""
        thetas = [self.tensors[i].detach().float().reshape(-1) for i in bucket]
        if self.cfg.gamma is None:
            return torch.cat(thetas)
        phis = [self.phi[i].reshape(-1) for i in bucket]
        return torch.cat(phis + [t - f for t, f in zip(thetas, phis)])

    def _gossip(self, timer: PhaseTimer) -> None:
        cfg, rank = self.cfg, self.comm.rank
        group = next(g for g in gossip_groups(self.comm.world_size, cfg.group_size, self.gen) if rank in g)
        peers = [r for r in group if r != rank]
        beta = cfg.outer_lr
        gamma = beta if cfg.gamma is None else cfg.gamma
        for bucket in self.buckets:
            with timer.phase("compress"):
                mine = self._payload(bucket)
            theirs = dict(zip(peers, self.comm.exchange(mine, peers)))
            with timer.phase("apply"):
                total = torch.zeros_like(mine)
                for r in group:  # rank order: every member of the group adds alike
                    total.add_(mine if r == rank else theirs[r])
                mean = total.div_(len(group))
                n = sum(self.numels[i] for i in bucket)
                pos = 0
                for i in bucket:
                    phi, delta, k = self.phi[i], self.delta[i], self.numels[i]
                    if cfg.gamma is None:  # beta (mean theta - mean phi) + beta (mean phi - phi_i)
                        pull = beta * (mean[pos : pos + k].view_as(phi) - phi)
                    else:
                        mean_phi = mean[pos : pos + k].view_as(phi)
                        mean_step = mean[n + pos : n + pos + k].view_as(phi)
                        pull = beta * mean_step + gamma * (mean_phi - phi)
                    delta.mul_(cfg.outer_momentum).add_(pull)
                    phi.add_(delta)
                    self.tensors[i].copy_(phi)
                    pos += k

    @torch.no_grad()
    def step(self, step: int, timer: PhaseTimer) -> StepResult:
        if not self.local_step(step, timer):
            return StepResult(synced=False)
        if self.comm.world_size > 1:
            self._gossip(timer)
        return StepResult(synced=False, extra={"inner_steps": self.end_round(), "outer_lr": self.cfg.outer_lr})

    @torch.no_grad()
    def finish(self, timer: PhaseTimer) -> StepResult:
        """Average every parameter once over all workers (fp32 all-reduce per bucket): one model at the end."""
        average_fp32(self.tensors, self.final_buckets, self.comm, timer)
        return StepResult(synced=True)

    @classmethod
    def predict_period(cls, cfg: NoLoCoConfig, shapes, world_size) -> Period:
        """One exchange per bucket every H steps: the bucket's payload to each of the group's other members."""
        check_world(cfg, world_size)
        if world_size == 1:
            return Period(cfg.inner_steps, [])
        numels = [math.prod(s) for s in shapes.values()]
        elem = 4 * cfg.sent_copies()
        return Period(cfg.inner_steps, [Collective("exchange", elem * sum(numels[i] for i in b) * (cfg.group_size - 1))
                                        for b in _buckets(numels, elem, cfg.bucket_mb * 2**20)])

    @classmethod
    def predict_finish(cls, cfg: NoLoCoConfig, shapes, world_size, steps_done):
        return average_fp32_collectives(shapes, cfg.bucket_mb)
