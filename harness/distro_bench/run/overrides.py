"""A run's inputs besides its scenario, in two types that travel apart (issue 36):

- `Overrides`: what the run changes in the scenario (`apply`: the optimizers subset, the budget, the seeds);
- `RunSettings`: how it runs (backend and its options, the folder that receives the run folder, limits).

`distro-bench run`, `sweep` and `node` build both from their flags; `distro_bench.api.run` from its keyword
arguments (or takes them). The scenario's overrides are applied before the runner, the sweep or the multi-host
agent reads the settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from distro_bench.backends.base import BackendOptions
from distro_bench.errors import InputError
from distro_bench.scenario.assign import apply_assignments, parse_assignments
from distro_bench.scenario.loading import with_overrides
from distro_bench.scenario.model import Scenario

LINK_ENGINES = ("auto", "tc", "userspace")
MAX_REPEAT = 100
MIN_TIMEOUT_S = 5.0

BUDGET_FIELDS = ("steps", "time_budget", "tokens")


def set_pairs(sets: Mapping[str, Any] | Sequence[str] | None) -> tuple[tuple[str, Any], ...] | None:
    """`Overrides.sets` from {path: value} or from `--set` texts ["PATH=VALUE", ...] (parsed, InputError listing
    every malformed one)."""
    if not sets:
        return None
    if isinstance(sets, Mapping):
        return tuple((str(p), v) for p, v in sets.items())
    return tuple(parse_assignments(list(sets)).items())


@dataclass(frozen=True)
class Overrides:
    """What a run changes in its scenario: the optimizers subset, the budget, the seeds (None: the scenario's)."""

    optimizers: tuple[str, ...] | None = None  # run only these (the baseline becomes the first if left out)
    steps: int | None = None  # budget: N steps (replaces the scenario's budget)
    seed: int | None = None  # train.seed
    time_budget: str | float | None = None  # budget: training seconds per optimizer, "300s"
    tokens: str | int | None = None  # budget: tokens per optimizer, "2M"
    target_val_loss: float | None = None  # budget: stop at this val loss (capped by the steps or time budget)
    repeat: int | None = None  # K seeds: seed..seed+K-1
    # `--set PATH=VALUE`: any scenario field by dotted path (scenario/assign.py), applied before the flags above,
    # as (path, value) pairs (`set_pairs` makes them from {path: value} or ["PATH=VALUE", ...])
    sets: tuple[tuple[str, Any], ...] | None = None

    def __post_init__(self) -> None:
        # Frozen: normalise through object.__setattr__ (a list of optimizers).
        if self.optimizers is not None:
            object.__setattr__(self, "optimizers", tuple(self.optimizers) or None)
        if self.sets is not None:
            object.__setattr__(self, "sets", tuple(self.sets) or None)
        problems = []
        if self.steps is not None and self.steps < 1:
            problems.append(f"steps: {self.steps}; give 1 or more")
        if self.seed is not None and self.seed < 0:
            problems.append(f"seed: {self.seed}; give 0 or more")
        if self.repeat is not None and not 1 <= self.repeat <= MAX_REPEAT:
            problems.append(f"repeat: {self.repeat}; give 1..{MAX_REPEAT}")
        if problems:
            raise InputError("run options: " + "; ".join(problems))

    def changes_scenario(self) -> bool:
        return any(getattr(self, f.name) is not None for f in fields(self))

    def budgets(self) -> dict[str, str | int | float]:
        """The budgets given (steps, time_budget, tokens) by name."""
        return {k: v for k in BUDGET_FIELDS if (v := getattr(self, k)) is not None}

    def apply(self, scenario: Scenario) -> Scenario:
        """The scenario with the optimizers subset, budget and seeds applied, re-validated (unchanged when
        none is given)."""
        if not self.changes_scenario():
            return scenario
        if self.sets:
            scenario = apply_assignments(scenario, dict(self.sets))
            if not any(getattr(self, f.name) is not None for f in fields(self) if f.name != "sets"):
                return scenario
        return with_overrides(scenario, steps=self.steps, seed=self.seed, time_budget=self.time_budget,
                              optimizers=list(self.optimizers) if self.optimizers else None,
                              tokens=self.tokens, target_val_loss=self.target_val_loss, repeat=self.repeat)

    def given(self) -> dict[str, object]:
        """The fields that are set (for messages and tests)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def record(self) -> dict[str, Any]:
        """What the run changed in its scenario, for environment.json's `overrides` (JSON-ready: `set` as
        {path: value}, the optimizers as a list)."""
        out: dict[str, Any] = {name: list(v) if isinstance(v, tuple) else v
                               for name, v in self.given().items() if name != "sets"}
        if self.sets:
            out["set"] = dict(self.sets)
        return out


@dataclass(frozen=True)
class RunSettings:
    """How a run runs: the backend and its options, the folder that receives the run folder, the limits. A None
    leaves the scenario's own setting (network.link_engine, .allow_unemulated, .measure_links) in force."""

    backend: str = "auto"
    out: Path = Path("results")  # the folder that receives the run folder
    link_engine: str | None = None  # None: the scenario's network.link_engine
    allow_unemulated: bool | None = None  # None: the scenario's network.allow_unemulated
    image: str | None = None  # docker backend: the worker image
    inventory: Path | None = None  # ssh backend: the hosts (backends/inventory.py)
    measure_links: bool | None = None  # None: the scenario's network.measure_links
    write_report: bool = True
    allow_root_workers: bool = False  # accept workers as uid 0 where no unprivileged uid can run them
    # Limits for tests and impatient users: seconds a collective may block (default derived from the links),
    # and seconds without any worker progress before the coordinator declares a hang.
    collective_timeout_s: float | None = None
    watchdog_s: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        if self.inventory is not None:
            object.__setattr__(self, "inventory", Path(self.inventory))
        problems = []
        if self.link_engine is not None and self.link_engine not in LINK_ENGINES:
            problems.append(f"link_engine: {self.link_engine!r}; one of {', '.join(LINK_ENGINES)}")
        for name in ("collective_timeout_s", "watchdog_s"):
            v = getattr(self, name)
            if v is not None and v < MIN_TIMEOUT_S:
                problems.append(f"{name}: {v:g}; give at least {MIN_TIMEOUT_S:g} seconds")
        if problems:
            raise InputError("run settings: " + "; ".join(problems))

    def backend_options(self, scenario: Scenario) -> BackendOptions:
        """What the backend gets, the scenario's network section filling in what is not given."""
        return BackendOptions(
            link_engine=self.link_engine or scenario.network.link_engine,
            allow_unemulated=scenario.network.allow_unemulated if self.allow_unemulated is None
            else self.allow_unemulated,
            image=self.image, allow_root_workers=self.allow_root_workers)

    def measure(self, scenario: Scenario) -> bool:
        return scenario.network.measure_links if self.measure_links is None else self.measure_links

    def given(self) -> dict[str, object]:
        """The fields that differ from the defaults (for messages and tests)."""
        default = RunSettings()
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(default, f.name)}
