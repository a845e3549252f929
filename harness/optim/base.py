"""What every optimizer strategy is: a config model validated from the scenario, and a step after backward."""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from harness.comm import Comm


class StrategyConfig(BaseModel):
    """Options shared by all strategies; `type` names the strategy in the registry."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    type: str
    lr: float = Field(gt=0, le=10)
    warmup_steps: int = Field(default=0, ge=0)
    schedule: Literal["constant", "cosine"] = "constant"
    min_lr_ratio: float = Field(default=0.1, ge=0, le=1)

    def lr_at(self, step: int, total_steps: int) -> float:
        """Linear warmup, then constant or cosine decay to `min_lr_ratio * lr`. `step` counts from 0."""
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        if self.schedule == "constant":
            return self.lr
        progress = (step - self.warmup_steps) / max(total_steps - self.warmup_steps, 1)
        cos = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
        return self.lr * (self.min_lr_ratio + (1 - self.min_lr_ratio) * cos)


@dataclass(frozen=True)
class Collective:
    """One collective a strategy issues per step: its kind and this worker's buffer size in bytes
    (all-reduce: the whole buffer; all-gather: this worker's own contribution)."""

    kind: Literal["all_reduce", "all_gather"]
    nbytes: int


class PhaseTimer:
    """Accumulates wall time per named phase; on CUDA it synchronises so a phase ends when its kernels do."""

    def __init__(self, device: torch.device):
        self.device = device
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def phase(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.seconds[name] += time.perf_counter() - start

    def take(self) -> dict[str, float]:
        out, self.seconds = dict(self.seconds), defaultdict(float)
        return out


class Strategy(ABC):
    """One optimizer strategy. Built once per worker; `step` runs after backward and before the next batch.

    A strategy moves gradients only through `comm` (so bytes and time are counted there), times its own
    work as the phases `compress` (encode, pack) and `apply` (decode, parameter update), and leaves the
    model's parameters identical on every rank.
    """

    Config: ClassVar[type[StrategyConfig]]

    def __init__(self, cfg: StrategyConfig, params: list[tuple[str, torch.nn.Parameter]], comm: Comm, total_steps: int):
        self.cfg = cfg
        self.params = params
        self.comm = comm
        self.total_steps = total_steps

    @abstractmethod
    def step(self, step: int, timer: PhaseTimer) -> None: ...

    @classmethod
    @abstractmethod
    def predict_payload_bytes(cls, cfg: StrategyConfig, shapes: dict[str, tuple[int, ...]], world_size: int) -> tuple[int, int]:
        """(tx, rx) payload bytes per worker per step, from parameter shapes and options alone."""

    @classmethod
    def predict_collectives(cls, cfg: StrategyConfig, shapes: dict[str, tuple[int, ...]], world_size: int) -> list[Collective]:
        """The collectives of one step in issue order, from parameter shapes and options alone (for projections)."""
        raise NotImplementedError(f"{cls.__name__} does not predict its collectives")
