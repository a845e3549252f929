"""Local steps with a periodic sync: the DiLoCo family (DiLoCo, SparseLoCo), and the local steps NoLoCo shares.

Every step is a local AdamW step on this worker's own gradient (no communication). Every `inner_steps`
steps (H) the worker forms the pseudo-gradient, the parameters at the last sync minus the parameters
now, and the method's `sync` exchanges it and moves the shared parameters (`anchor`); every replica then
restarts from them, so the replicas are identical at those steps and only there. The inner AdamW keeps
its state across syncs (as OpenDiLoCo does). `finish` syncs the local steps a run ends with.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import TypeVar

import torch

from distro_bench.scenario.optimizers import DiLoCoConfig, NoLoCoConfig, SparseLoCoConfig
from distro_bench.train.optim.adamw import adamw_step, build_adamw
from distro_bench.train.optim.base import PhaseTimer, StepResult, Strategy, holding

# The options of a method of local steps between rounds: an inner AdamW and `inner_steps`.
InnerConfigT = TypeVar("InnerConfigT", DiLoCoConfig, SparseLoCoConfig, NoLoCoConfig)
# Those of the DiLoCo family, whose rounds sync every replica.
LocalConfigT = TypeVar("LocalConfigT", DiLoCoConfig, SparseLoCoConfig)


class InnerAdamW(Strategy[InnerConfigT]):
    """Local AdamW steps on this worker's own gradient, a round every `inner_steps` of them (the subclass's)."""

    clips_gradients = True  # the inner AdamW step clips the local gradient (adamw_step)

    def __init__(self, cfg, params, comm, total_steps):
        super().__init__(cfg, params, comm, total_steps)
        self.tensors = [p for _, p in params]
        self.opt = build_adamw(cfg, self.tensors)
        self.pending = 0  # local steps since the last round

    def local_step(self, step: int, timer: PhaseTimer) -> bool:
        """One inner AdamW step; True when it is the last of a round's `inner_steps`."""
        with timer.phase("apply"):
            adamw_step(self.opt, self.cfg, self.tensors, step, self.total_steps)
        self.pending += 1
        return (step + 1) % self.cfg.inner_steps == 0

    def end_round(self) -> int:
        """The local steps the round just ended took; counting starts again."""
        done, self.pending = self.pending, 0
        return done


class LocalSteps(InnerAdamW[LocalConfigT]):
    def __init__(self, cfg, params, comm, total_steps):
        super().__init__(cfg, params, comm, total_steps)
        # The shared parameters as of the last sync, in fp32: what every replica restarts from.
        self.anchor = [p.detach().float().clone() for p in self.tensors]

    def shared_state(self) -> list[torch.Tensor]:
        return list(self.anchor)  # the shared parameters of the last round; local ones are this worker's own

    def consensus(self):
        return holding(self.tensors, self.anchor)  # evaluated on the shared model, not this worker's local one

    @torch.no_grad()
    def rejoined(self) -> None:
        for p, a in zip(self.tensors, self.anchor):
            p.copy_(a)
        self.pending = 0  # the steps of the round it left in were lost with it (unsynced_steps)

    def unsynced_steps(self) -> int:
        return self.pending

    @torch.no_grad()
    def step(self, step: int, timer: PhaseTimer) -> StepResult:
        if not self.local_step(step, timer):
            return StepResult(synced=False)
        return self._sync(timer)

    @torch.no_grad()
    def finish(self, timer: PhaseTimer) -> StepResult | None:
        return self._sync(timer) if self.pending else None

    def _sync(self, timer: PhaseTimer) -> StepResult:
        with timer.phase("compress"):
            pseudo = [a - p.detach().float() for a, p in zip(self.anchor, self.tensors)]
        extra = self.sync(pseudo, timer)
        with timer.phase("apply"):
            for p, a in zip(self.tensors, self.anchor):
                p.copy_(a)
        return StepResult(synced=True, extra={"inner_steps": self.end_round(), **extra})

    @abstractmethod
    def sync(self, pseudo: list[torch.Tensor], timer: PhaseTimer) -> dict:
        """Exchange this worker's pseudo-gradients (one per parameter, fp32) through `comm` and update
        `anchor` in place, identically on every rank. Returns fields for the step record."""
