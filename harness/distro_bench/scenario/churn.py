"""Churn: workers that leave and come back, by schedule or at a failure rate (issue 29).

A scenario's `churn:` names when workers are away, on the training clock every optimizer shares (seconds
since the optimizer/seed run's first step, evaluations left out):

    churn:
      events: [{worker: 2, leave: 8s, back: 16s}]   # a planned absence (back: null, it never returns)
      failures_per_minute: 2                        # each worker but rank 0 fails at this Poisson rate
      downtime: 5s                                  # a failed worker is back after this long
      detection: 1s                                 # the others stall this long before they go on without it

While a worker is away the others train on without it: every collective runs over the workers present, so
a leaver sends and receives nothing. A worker that comes back receives the state the replicas share (the
parameters, and what the method keeps in step on every replica) from one that stayed. What a worker had
computed but not yet synchronised when it left is lost (a periodic method's local steps since its last
round): that is what goodput counts against. Rank 0 is the coordinator (it takes the stop decisions and says
who trains when), so it never leaves.

The plan is a pure function of the spec, the world size and the seed, so every optimizer of a seed meets
the same failures at the same training seconds. No torch here: `validate` uses it.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from distro_bench.scenario.units import Duration, no_bool_numbers

MAX_CHURN_EVENTS = 10_000
# A failure rate past this is a typo (one failure a second per worker); it also bounds the plan's length.
MAX_FAILURES_PER_MINUTE = 60.0
# Failures drawn per worker at most: a week at the largest rate is far past any budget this tool runs.
MAX_FAILURES_PER_WORKER = 1_000_000


class ChurnEvent(BaseModel):
    """One planned absence of worker `worker` (its scenario rank, 1 or more: rank 0 coordinates)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    _no_bools = field_validator("*", mode="before")(classmethod(no_bool_numbers))  # `worker: true` is not rank 1
    worker: int = Field(ge=1, le=1023)
    leave: Duration
    back: Duration | None = None  # None: it does not come back in this run

    @model_validator(mode="after")
    def _back_after_leave(self) -> ChurnEvent:
        if self.back is not None and self.back <= self.leave:
            raise ValueError(f"back ({self.back:g}s) must be after leave ({self.leave:g}s)")
        return self


class ChurnSpec(BaseModel):
    """When workers are away: planned `events`, and failures at `failures_per_minute` per worker."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    _no_bools = field_validator("*", mode="before")(classmethod(no_bool_numbers))  # `failures_per_minute: true` is not 1
    events: list[ChurnEvent] = Field(default_factory=list, max_length=MAX_CHURN_EVENTS)
    failures_per_minute: float = Field(default=0.0, ge=0, le=MAX_FAILURES_PER_MINUTE)
    downtime: Duration = 10.0
    detection: Duration = 0.0  # how long the others wait for a failed worker before they go on without it
    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)  # the failures' draw (default: the run's seed)

    @property
    def active(self) -> bool:
        return bool(self.events) or self.failures_per_minute > 0

    def problems(self, world_size: int) -> list[str]:
        """What this spec asks that a run of `world_size` workers cannot do."""
        out = [f"churn.events[{i}].worker is {e.worker}, but the scenario has ranks 0-{world_size - 1}"
               for i, e in enumerate(self.events) if e.worker >= world_size]
        if self.active and world_size < 2:
            out.append("churn needs at least 2 workers (rank 0 coordinates and never leaves)")
        if self.failures_per_minute > 0 and self.downtime <= 0:
            out.append("churn.downtime must be more than 0s when failures_per_minute is set")
        return out


@dataclass(frozen=True)
class Absence:
    rank: int
    start_s: float
    end_s: float | None  # None: away to the end
    kind: Literal["scheduled", "failure"]


@dataclass
class _Failures:
    """One worker's failure process, drawn as far as it has been asked: present for Exp(rate) seconds, then
    away for `downtime`, and again."""

    rng: random.Random
    rate_per_s: float
    downtime_s: float
    starts: list[float] = field(default_factory=list)
    reach_s: float = 0.0  # the time it is drawn to: the end of the latest absence

    def upto(self, t: float) -> None:
        while self.reach_s <= t and len(self.starts) < MAX_FAILURES_PER_WORKER:
            start = self.reach_s + self.rng.expovariate(self.rate_per_s)
            self.starts.append(start)
            self.reach_s = start + self.downtime_s

    def away_at(self, t: float) -> bool:
        self.upto(t)
        i = bisect.bisect_right(self.starts, t) - 1
        return i >= 0 and t < self.starts[i] + self.downtime_s

    def failed_between(self, t0: float, t1: float) -> bool:
        """Whether a failure began in (t0, t1]."""
        self.upto(t1)
        return bisect.bisect_right(self.starts, t1) > bisect.bisect_right(self.starts, t0)


class ChurnPlan:
    """Who is away when, for one run of `world_size` workers and one seed."""

    def __init__(self, spec: ChurnSpec, world_size: int, seed: int):
        self.spec, self.world_size = spec, world_size
        self._events: dict[int, list[ChurnEvent]] = {}  # per rank: asked once per rank and step
        for e in spec.events:
            self._events.setdefault(e.worker, []).append(e)
        draw = spec.seed if spec.seed is not None else seed
        rate = spec.failures_per_minute / 60.0
        # One stream per rank, so a worker's failures do not depend on how many workers there are.
        self._failures = {r: _Failures(random.Random(f"churn-{draw}-{r}"), rate, spec.downtime)
                          for r in range(1, world_size)} if rate > 0 else {}

    def away(self, rank: int, t: float) -> Literal["scheduled", "failure"] | None:
        """Why `rank` is away at training second `t`, or None when it trains."""
        if rank == 0:
            return None
        if any(e.leave <= t and (e.back is None or t < e.back) for e in self._events.get(rank, ())):
            return "scheduled"
        f = self._failures.get(rank)
        return "failure" if f is not None and f.away_at(t) else None

    def members(self, t: float) -> frozenset[int]:
        return frozenset(r for r in range(self.world_size) if self.away(r, t) is None)

    def away_since(self, rank: int, t0: float, t1: float) -> Literal["scheduled", "failure"] | None:
        """Why `rank` must sit out the next step when rank 0 last looked at `t0` and looks again at `t1`: it
        is away at `t1`, or an absence began in (t0, t1]. The second keeps an absence shorter than a step
        from falling between two looks, so a method with long steps meets every failure a fast one meets."""
        now = self.away(rank, t1)
        if now is not None or rank == 0:
            return now
        if any(t0 < e.leave <= t1 for e in self._events.get(rank, ())):
            return "scheduled"
        f = self._failures.get(rank)
        return "failure" if f is not None and f.failed_between(t0, t1) else None

    def members_since(self, t0: float, t1: float) -> frozenset[int]:
        return frozenset(r for r in range(self.world_size) if self.away_since(r, t0, t1) is None)

    def absences(self, horizon_s: float) -> list[Absence]:
        """Every absence that starts before `horizon_s` (for reports and tests)."""
        out = [Absence(e.worker, e.leave, e.back, "scheduled") for e in self.spec.events if e.leave < horizon_s]
        for r, f in self._failures.items():
            f.upto(horizon_s)
            out += [Absence(r, s, s + self.spec.downtime, "failure") for s in f.starts if s < horizon_s]
        return sorted(out, key=lambda a: (a.start_s, a.rank))
