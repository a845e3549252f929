"""What a run trains for, and when it stops: steps, a token count, a wall-clock budget, or a target loss.

`Budget` is resolved from the scenario's `train` block (torch-free: the schema and `validate` use it).
`StopPolicy` is the decision rank 0 takes inside the worker: pure arithmetic over the step index, the
training seconds spent and the latest validation loss, so it is tested without processes.

With a time or target budget the ranks must stop at the same step, or the ones that go on block in a
collective. Rank 0 decides; its decision reaches the others in a tiny broadcast (three float64 values:
stop, the step of the next decision, the expected total steps for the lr schedule). The broadcast is
not the optimizer's payload: it goes around `Comm`, so payload bytes never count it, its seconds are
left out of the step time and of the budget's clock, and the interface counters are reset after it
(like an evaluation). To keep it cheap it is not held every step: each decision names the next one,
half of the expected remaining steps ahead (at most `MAX_CHECK_INTERVAL`), so a run of N steps holds
about log2(N) + 3 of them, the last ones on consecutive steps as the budget runs out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

BudgetKind = Literal["steps", "time", "tokens", "target"]

# Steps timed before rank 0 first estimates the run's length (step 0 is left out: connection set-up).
FIRST_CHECK_STEP = 3
MAX_CHECK_INTERVAL = 64

COUNT_MAX = 10**15  # tokens: far past any run here; past it is a typo (or 1e400, infinity)
_COUNT_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "b": 10**9}
_COUNT_RE = re.compile(r"(?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*(?P<unit>[kKmMgGbB]?)$")


def parse_count(value: object) -> int:
    """'2M' -> 2_000_000 (k, M, G or B for 10^3, 10^6, 10^9); a plain integer is taken as is."""
    if isinstance(value, bool):
        raise ValueError(f"invalid count {value!r}; write a number like 2000000 or '2M'")
    if isinstance(value, int):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str) and (m := _COUNT_RE.match(value.strip())):
        x = float(m.group("num")) * _COUNT_UNITS[m.group("unit").lower()]
        n = round(x) if x <= COUNT_MAX else COUNT_MAX + 1  # '1e400' reads as infinity
    else:
        raise ValueError(f"invalid count {value!r}; write a number like 2000000 or '2M' (k, M, G)")
    if n > COUNT_MAX:
        raise ValueError(f"count {value!r} is above the largest accepted, 1e15")
    if n < 1:
        raise ValueError(f"count {value!r} must be at least 1")
    return n


def format_count(n: int) -> str:
    for unit, scale in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= scale and n % (scale // 1000 or 1) == 0:
            return f"{n / scale:g}{unit}"
    return str(n)


@dataclass(frozen=True)
class Budget:
    """The resolved budget: its kind and value, plus the limits the worker enforces.

    max_steps: steps never exceeded (the budget for steps/tokens, the cap for a target; None for time);
    time_s: training seconds (the budget for time, or a target's cap); target_val_loss: stop once reached.
    """

    kind: BudgetKind
    value: float
    max_steps: int | None = None
    time_s: float | None = None
    target_val_loss: float | None = None
    tokens_per_step: int | None = None

    @property
    def needs_decision(self) -> bool:
        """Whether the stop step depends on measurements (so rank 0 must decide it for everyone)."""
        return self.time_s is not None or self.target_val_loss is not None

    def expected_steps(self) -> int | None:
        """Steps the lr schedule spans before any measurement: known for steps/tokens (and a target's step cap)."""
        return self.max_steps

    def as_dict(self) -> dict:
        d: dict = {"kind": self.kind, "value": self.value}
        if self.kind == "target":
            d["cap"] = ({"kind": "time", "value": self.time_s} if self.time_s is not None
                        else {"kind": "steps", "value": self.max_steps})
        if self.tokens_per_step:
            d["tokens_per_step"] = self.tokens_per_step
        return d


def resolve_budget(*, steps: int | None, time_budget: float | None, tokens: int | None,
                   target_val_loss: float | None, tokens_per_step: int, default_steps: int = 50) -> Budget:
    """The one budget a train block names (validation has already rejected two at once)."""
    if time_budget is not None:
        return Budget("time", time_budget, max_steps=None, time_s=time_budget, tokens_per_step=tokens_per_step)
    if tokens is not None:
        return Budget("tokens", tokens, max_steps=max(1, math.ceil(tokens / tokens_per_step)),
                      tokens_per_step=tokens_per_step)
    if target_val_loss is not None:
        return Budget("target", target_val_loss, max_steps=steps or default_steps, target_val_loss=target_val_loss,
                      tokens_per_step=tokens_per_step)
    return Budget("steps", steps or default_steps, max_steps=steps or default_steps, tokens_per_step=tokens_per_step)


def resolve_target_cap(budget: Budget, cap_time_s: float | None) -> Budget:
    """A target budget capped by time instead of steps."""
    if budget.kind != "target" or cap_time_s is None:
        return budget
    return Budget("target", budget.value, max_steps=None, time_s=cap_time_s, target_val_loss=budget.target_val_loss,
                  tokens_per_step=budget.tokens_per_step)


@dataclass(frozen=True)
class Decision:
    stop: bool
    next_check: int | None  # step after which the next decision is taken (None: none scheduled)
    total_steps: int | None  # expected steps of the whole run, for the lr schedule (None: unknown yet)

    def encode(self) -> list[float]:
        return [1.0 if self.stop else 0.0, float(-1 if self.next_check is None else self.next_check),
                float(-1 if self.total_steps is None else self.total_steps)]

    @classmethod
    def decode(cls, v) -> Decision:
        stop, nxt, total = (float(x) for x in v)
        return cls(stop >= 0.5, None if nxt < 0 else int(nxt), None if total < 0 else int(total))


class StopPolicy:
    """Rank 0's stop rule. `first_check()` is the first step after which a decision is taken; `decide()`
    is called after each such step (and, with a target, after every evaluation) and names the next.

    A time budget stops after the first step that ends at or beyond the budget, so every optimizer
    trains at least the budget's seconds and at most one step more (`val_loss_at_equal_time` then
    compares all at the shortest one's seconds). The expected total steps is re-estimated at every
    decision from the median of the recent step times, so a cosine schedule ends near the budget.
    """

    def __init__(self, budget: Budget, eval_every: int):
        self.budget = budget
        self.eval_every = eval_every
        self._durations: list[float] = []

    def first_check(self) -> int | None:
        if self.budget.time_s is not None:
            cap = self.budget.max_steps
            return min(FIRST_CHECK_STEP, cap - 1) if cap else FIRST_CHECK_STEP
        return None  # a target with a step cap decides at evaluations only

    def observe(self, step: int, seconds: float) -> None:
        """One step's duration as rank 0 measured it (step 0 is left out: set-up)."""
        if step > 0:
            self._durations.append(seconds)

    def step_time(self) -> float | None:
        recent = sorted(self._durations[-16:])
        return recent[len(recent) // 2] if recent else None

    def decide(self, step: int, elapsed_s: float, val_loss: float | None = None) -> Decision:
        """After `step` (0-based) with `elapsed_s` training seconds spent and the latest validation loss
        (None when this step was not evaluated)."""
        b = self.budget
        done = step + 1
        if b.target_val_loss is not None and val_loss is not None and val_loss <= b.target_val_loss:
            return Decision(True, None, done)
        if b.max_steps is not None and done >= b.max_steps:
            return Decision(True, None, done)
        if b.time_s is None:
            return Decision(False, None, b.max_steps)
        remaining = b.time_s - elapsed_s
        if remaining <= 0:
            return Decision(True, None, done)
        tau = self.step_time() or (elapsed_s / done if done else None)
        if not tau or tau <= 0:
            return Decision(False, step + 1, None)
        left = remaining / tau  # expected steps still to run
        total = done + math.ceil(left)
        jump = max(1, min(MAX_CHECK_INTERVAL, math.floor(left / 2)))
        nxt = step + jump
        if b.max_steps is not None:
            total = min(total, b.max_steps)
            nxt = min(nxt, b.max_steps - 1)
        return Decision(False, nxt, total)
