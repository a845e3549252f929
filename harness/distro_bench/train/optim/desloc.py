"""DES-LOC, desynced low-communication adaptive optimizers (Iacob et al., arXiv 2505.22549).

Every worker runs AdamW (torch's) on its own gradient. Three quantities are averaged over the workers,
each on its own period: the parameters every Kx steps, Adam's first moment every Ku, its second moment
every Kv (the paper recommends Ku = 3 Kx, Kv = 6 Kx: a moment with a longer half-life drifts apart more
slowly). Averaging happens at the end of each K-th step, i.e. before the next step uses the state, which
is the paper's "replace the local state by the worker average when t mod K = 0". Local Adam is the case
Kx = Ku = Kv; keeping the moments local forever (the DiLoCo family) is Ku, Kv larger than the run.

Replicas hold the same parameters at parameter syncs only (`synced`); `finish` averages the parameters
once more when local steps are pending. Each averaged quantity travels as fp32 ring all-reduces in
AdamW's buckets (parameters, then first moments, then second moments).
"""

from __future__ import annotations

import math

import torch

from distro_bench.scenario.optimizers import DESLOCConfig
from distro_bench.train.optim.adamw import _buckets, adamw_step, average_fp32, average_fp32_collectives, build_adamw
from distro_bench.train.optim.base import Collective, Period, PhaseTimer, StepResult, Strategy

# What is averaged, in issue order, with the index of its period in DESLOCConfig.periods()
_STATES = (("params", 0), ("exp_avg", 1), ("exp_avg_sq", 2))


class DESLOC(Strategy[DESLOCConfig]):
    Config = DESLOCConfig
    clips_gradients = True  # the local AdamW step clips this worker's gradient

    def __init__(self, cfg: DESLOCConfig, params, comm, total_steps):
        super().__init__(cfg, params, comm, total_steps)
        self.tensors = [p for _, p in params]
        self.opt = build_adamw(cfg, self.tensors)
        self.buckets = _buckets([p.numel() for p in self.tensors], 4, cfg.bucket_mb * 2**20)
        self.pending = 0  # local steps since the last parameter average

    def _average(self, which: str, timer: PhaseTimer) -> None:
        tensors = self.tensors if which == "params" else [self.opt.state[p][which] for p in self.tensors]
        average_fp32(tensors, self.buckets, self.comm, timer)

    @torch.no_grad()
    def step(self, step: int, timer: PhaseTimer) -> StepResult:
        with timer.phase("apply"):
            adamw_step(self.opt, self.cfg, self.tensors, step, self.total_steps)
        self.pending += 1
        periods = self.cfg.periods()
        for which, k in _STATES:
            if (step + 1) % periods[k] == 0:
                self._average(which, timer)
        if (step + 1) % periods[0]:
            return StepResult(synced=False)
        done, self.pending = self.pending, 0
        return StepResult(synced=True, extra={"inner_steps": done})

    @torch.no_grad()
    def finish(self, timer: PhaseTimer) -> StepResult | None:
        if not self.pending:
            return None
        self._average("params", timer)
        done, self.pending = self.pending, 0
        return StepResult(synced=True, extra={"inner_steps": done})

    @classmethod
    def _one_average(cls, cfg: DESLOCConfig, shapes) -> list[Collective]:
        return average_fp32_collectives(shapes, cfg.bucket_mb)

    @classmethod
    def predict_step(cls, cfg: DESLOCConfig, shapes, world_size, step, total_steps):
        periods, one = cfg.periods(), cls._one_average(cfg, shapes)
        return [c for _, k in _STATES if (step + 1) % periods[k] == 0 for c in one]

    @classmethod
    def predict_period(cls, cfg: DESLOCConfig, shapes, world_size) -> Period:
        """The steady state repeats every lcm(Kx, Ku, Kv) steps: each quantity averaged lcm / K times."""
        periods = cfg.periods()
        steps = math.lcm(*periods)
        one = cls._one_average(cfg, shapes)
        return Period(steps, [c for _, k in _STATES for _ in range(steps // periods[k]) for c in one])

    @classmethod
    def predict_finish(cls, cfg: DESLOCConfig, shapes, world_size, steps_done):
        return cls._one_average(cfg, shapes) if steps_done % cfg.param_period else []
