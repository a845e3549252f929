"""What every optimizer strategy is: a config model validated from the scenario, and a step after backward."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from harness.comm import Comm
from harness.optim.options import StrategyConfig


@dataclass(frozen=True)
class Collective:
    """One collective a strategy issues per step: its kind and this worker's buffer size in bytes
    (all-reduce: the whole buffer; all-gather: this worker's own contribution)."""

    kind: Literal["all_reduce", "all_gather", "all_gather_direct"]
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
