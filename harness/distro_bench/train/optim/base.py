"""What every optimizer strategy is: a config model validated from the scenario, and a step after backward.

A step says what happened (`StepResult`): whether the replicas synchronised (per-step methods: always;
DiLoCo and SparseLoCo: every H steps) and any per-method fields for the step record. Replicas are
compared only at synchronised steps, and at the end after `finish()` (a last sync of what is pending).
Bytes are predicted per period (`predict_period`: H steps and the collectives of one period) and per step
(`predict_step`), from parameter shapes and options alone.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ClassVar, Generic, Literal, TypeVar

import torch

from distro_bench.scenario.optimizers import StrategyConfig
from distro_bench.train.comm import Comm

# The option model a strategy takes: each strategy class names its own (`class DisTrO(Strategy[DisTrOConfig])`).
ConfigT = TypeVar("ConfigT", bound=StrategyConfig)


@dataclass(frozen=True)
class Collective:
    """One collective a strategy issues per step: its kind and this worker's buffer size in bytes
    (all-reduce: the whole buffer; all-gather: this worker's own contribution; exchange, point-to-point with
    its group's peers: everything this worker sends, which is also what it receives)."""

    kind: Literal["all_reduce", "all_gather", "all_gather_direct", "exchange"]
    nbytes: int
    # The information floor of those bytes (issue 37): the fewest bits any encoding of the same content could
    # use. None: a dense buffer, whose floor is its own size (values at their declared bits). A sparse one:
    # log2 C(n, k) bits per chunk's index set (which k of n coordinates; their order carries nothing) plus
    # its values at their declared bits.
    floor_bits: float | None = None

    @property
    def floor(self) -> float:
        return 8.0 * self.nbytes if self.floor_bits is None else self.floor_bits


@dataclass(frozen=True)
class StepResult:
    """What one step (or `finish`) did: `synced` when every replica now holds the same parameters, and
    per-method fields merged into the step record (e.g. `outer_lr`, `inner_steps`)."""

    synced: bool = True
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Period:
    """The collectives of one period of `steps` steps, in issue order: a per-step method's period is one
    step; a periodic method issues them all at the period's last step."""

    steps: int
    collectives: list[Collective]


def scaled(collectives: list[Collective], fraction: float) -> list[Collective]:
    """The collectives at `fraction` of their bytes, at least one byte each: what a replay issues (issue 34: a
    buffer too large for the box, replayed in part and said so) and what its prediction counts, rounded alike."""
    if fraction == 1.0:
        return collectives
    return [Collective(c.kind, max(1, round(c.nbytes * fraction)),
                       None if c.floor_bits is None else c.floor_bits * fraction) for c in collectives]


def payload_of(collectives: list[Collective], world_size: int) -> tuple[int, int]:
    """(tx, rx) payload bytes of these collectives for one worker, as harness/distro_bench/train/comm.py counts them: a direct
    gather hands its buffer to each of the N-1 peers itself, so its tx is (N-1) copies, not the ring's one."""
    tx = sum(c.nbytes * (world_size - 1) if c.kind == "all_gather_direct" else c.nbytes for c in collectives)
    rx = sum(c.nbytes if c.kind in ("all_reduce", "exchange") else c.nbytes * (world_size - 1) for c in collectives)
    return tx, (rx if world_size > 1 else 0)


def floor_tx_bits_of(collectives: list[Collective], world_size: int) -> float:
    """The information floor of this worker's tx payload (payload_of's tx, copy for copy): a direct gather
    sends its buffer N-1 times, so its floor counts N-1 times too, and floor_ratio is a property of the
    encoding, not of the layout."""
    return sum(c.floor * (world_size - 1) if c.kind == "all_gather_direct" else c.floor for c in collectives)


def index_set_bits(n: int, k: int) -> float:
    """log2 C(n, k): the bits that name k of n coordinates, the uniform floor of a top-k index set."""
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)) / math.log(2)


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


@contextmanager
def holding(tensors: list[torch.Tensor], shared: list[torch.Tensor]):
    """Within it, `tensors` hold `shared` (a periodic method's anchor: the model every replica agrees on and a
    user would keep); this worker's local values are put back after."""
    with torch.no_grad():
        local = [t.detach().clone() for t in tensors]
        for t, a in zip(tensors, shared):
            t.copy_(a)
    try:
        yield
    finally:
        with torch.no_grad():
            for t, v in zip(tensors, local):
                t.copy_(v)


class Strategy(ABC, Generic[ConfigT]):
    """One optimizer strategy. Built once per worker; `step` runs after backward and before the next batch.

    A strategy moves gradients only through `comm` (so bytes and time are counted there), times its own
    work as the phases `compress` (encode, pack) and `apply` (decode, parameter update), and leaves the
    model's parameters identical on every rank whenever it reports `synced`.
    """

    Config: ClassVar[type[StrategyConfig]]
    # The projection's "paper style" accounting treats a method that sends its whole gradient every step
    # as the DisTrO report treats its baseline (bf16 gradients received from every peer).
    sends_dense_gradients: ClassVar[bool] = False

    def __init__(self, cfg: ConfigT, params: list[tuple[str, torch.nn.Parameter]], comm: Comm, total_steps: int):
        self.cfg = cfg
        self.params = params
        self.comm = comm
        self.total_steps = total_steps

    @abstractmethod
    def step(self, step: int, timer: PhaseTimer) -> StepResult | None:
        """One optimizer step after backward. None means `StepResult()` (synced, nothing extra)."""

    @contextmanager
    def consensus(self):
        """Within it, the model holds the parameters every replica agrees on (evaluation and checksums run
        there). The same as outside for a method that syncs every step; the shared parameters of the last
        round for a periodic one (DiLoCo, SparseLoCo, MuLoCo, Streaming DiLoCo: `holding` their anchor, not the
        mean of the local models' losses); the agreed parameters for one that steps on a local guess between
        syncs (DisTrO's `overlap: eager`). SPARTA, DES-LOC and NoLoCo keep no agreed copy between syncs: their
        evaluations are of each replica's own parameters, averaged over ranks (docs/optimizers.md)."""
        yield

    def shared_state(self) -> list[torch.Tensor]:
        """What the replicas hold alike, which a worker coming back (scenario churn) takes over from one that
        stayed, in the same order on every rank: the parameters here; a method adds what it keeps in step on
        every replica (AdamW's moments, DiLoCo's shared parameters and outer momentum)."""
        return [p for _, p in self.params]

    def rejoined(self) -> None:
        """After `shared_state` was overwritten with a peer's: restart from it (a periodic method's round)."""

    def unsynced_steps(self) -> int:
        """Steps of this worker not yet in the shared model: lost if it leaves now (a periodic method's local
        steps since its last round; 0 for a method that syncs every step)."""
        return 0

    def sent_statistics(self) -> dict:
        """Figures about what this worker sent over the run, for its end record (issue 37: a top-k method's
        empirical information floor, train/optim/entropy.py); empty where there is nothing to say."""
        return {}

    def drain(self) -> None:
        """Wait until nothing this strategy launched is still in flight, applying nothing (the step that takes
        the result applies it as before, so training is unchanged). The loop calls it at the end of a step the
        clock pauses after (evaluation, stop decision), so the wait counts as that step's communication and
        training time, not as free network time during the pause. Only a method that keeps exchanges in
        flight across steps (DisTrO's `overlap`) has anything to wait for."""

    def finish(self, timer: PhaseTimer) -> StepResult | None:
        """After the last step: a periodic method syncs what its local steps left pending (its collectives
        are counted like a step's); None when nothing was pending."""
        return None

    @classmethod
    def predict_collectives(cls, cfg: ConfigT, shapes: dict[str, tuple[int, ...]], world_size: int) -> list[Collective]:
        """The collectives of one step in issue order (per-step methods; periodic ones define `predict_period`)."""
        raise NotImplementedError(f"{cls.__name__} does not predict its collectives")

    @classmethod
    def predict_period(cls, cfg: ConfigT, shapes: dict[str, tuple[int, ...]], world_size: int) -> Period:
        """The steady state's collectives per period (for projections); a per-step method's period is one step."""
        return Period(1, cls.predict_collectives(cfg, shapes, world_size))

    @classmethod
    def predict_step(cls, cfg: ConfigT, shapes: dict[str, tuple[int, ...]], world_size: int, step: int,
                     total_steps: int) -> list[Collective]:
        """The collectives `step(step)` issues: a period's at its last step (step + 1 a multiple of H), else none."""
        period = cls.predict_period(cfg, shapes, world_size)
        return period.collectives if (step + 1) % period.steps == 0 else []

    @classmethod
    def predict_finish(cls, cfg: ConfigT, shapes: dict[str, tuple[int, ...]], world_size: int,
                       steps_done: int) -> list[Collective]:
        """The collectives `finish()` issues after `steps_done` steps: a period's when local steps are pending."""
        period = cls.predict_period(cfg, shapes, world_size)
        return period.collectives if period.steps > 1 and steps_done % period.steps else []

    @classmethod
    def predict_floor_tx_bits(cls, cfg: ConfigT, shapes: dict[str, tuple[int, ...]], world_size: int) -> float:
        """The information floor of this worker's tx payload per step in the steady state (floor_tx_bits_of),
        averaged over a period: predict_payload_bytes's tx x 8 over it is the encoding's floor_ratio."""
        period = cls.predict_period(cfg, shapes, world_size)
        return floor_tx_bits_of(period.collectives, world_size) / period.steps

    @classmethod
    def predict_payload_bytes(cls, cfg: ConfigT, shapes: dict[str, tuple[int, ...]], world_size: int) -> tuple[float, float]:
        """(tx, rx) payload bytes per worker per step in the steady state, averaged over a period."""
        period = cls.predict_period(cfg, shapes, world_size)
        tx, rx = payload_of(period.collectives, world_size)
        if period.steps == 1:
            return tx, rx
        return tx / period.steps, rx / period.steps
