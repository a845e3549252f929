"""Overrides: every option a run takes besides its scenario, in one type.

`distro-bench run`, `sweep` and `node` build one from their flags; `distro_bench.api.run` builds one from
its keyword arguments (or takes one); the runner, the sweep and the multi-host agent read it. Two kinds of
field: those that change the scenario (`apply`: the optimizers subset, the budget, the seeds), and those
that say how it runs (backend, run folder, link emulation, limits). A None leaves the scenario's own
setting (network.link_engine, network.allow_unemulated, network.measure_links) in force.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from distro_bench.backends.base import BackendOptions
from distro_bench.errors import InputError
from distro_bench.scenario.loading import with_overrides
from distro_bench.scenario.model import Scenario

LINK_ENGINES = ("auto", "tc", "userspace")
MAX_REPEAT = 100
MIN_TIMEOUT_S = 5.0

# The fields that change the scenario (scenario/loading.py with_overrides' arguments); the rest say how the run goes.
SCENARIO_FIELDS = ("optimizers", "steps", "seed", "time_budget", "tokens", "target_val_loss", "repeat")
BUDGET_FIELDS = ("steps", "time_budget", "tokens")


@dataclass(frozen=True)
class Overrides:
    # ---- what the scenario is changed to
    optimizers: tuple[str, ...] | None = None  # run only these (the baseline becomes the first if left out)
    steps: int | None = None  # budget: N steps (replaces the scenario's budget)
    seed: int | None = None  # train.seed
    time_budget: str | float | None = None  # budget: training seconds per optimizer, "300s"
    tokens: str | int | None = None  # budget: tokens per optimizer, "2M"
    target_val_loss: float | None = None  # budget: stop at this val loss (capped by the steps or time budget)
    repeat: int | None = None  # K seeds: seed..seed+K-1
    # ---- how it runs
    backend: str = "auto"
    out: Path = Path("results")  # the folder that receives the run folder
    link_engine: str | None = None  # None: the scenario's network.link_engine
    allow_unemulated: bool | None = None  # None: the scenario's network.allow_unemulated
    image: str | None = None  # docker backend: the worker image
    measure_links: bool | None = None  # None: the scenario's network.measure_links
    write_report: bool = True
    # Limits for tests and impatient users: seconds a collective may block (default derived from the links),
    # and seconds without any worker progress before the coordinator declares a hang.
    collective_timeout_s: float | None = None
    watchdog_s: float | None = None

    def __post_init__(self) -> None:
        # Frozen: normalise through object.__setattr__ (a list of optimizers, a str folder).
        if self.optimizers is not None:
            object.__setattr__(self, "optimizers", tuple(self.optimizers) or None)
        object.__setattr__(self, "out", Path(self.out))
        problems = []
        if self.steps is not None and self.steps < 1:
            problems.append(f"steps: {self.steps}; give 1 or more")
        if self.seed is not None and self.seed < 0:
            problems.append(f"seed: {self.seed}; give 0 or more")
        if self.repeat is not None and not 1 <= self.repeat <= MAX_REPEAT:
            problems.append(f"repeat: {self.repeat}; give 1..{MAX_REPEAT}")
        if self.link_engine is not None and self.link_engine not in LINK_ENGINES:
            problems.append(f"link_engine: {self.link_engine!r}; one of {', '.join(LINK_ENGINES)}")
        for name in ("collective_timeout_s", "watchdog_s"):
            v = getattr(self, name)
            if v is not None and v < MIN_TIMEOUT_S:
                problems.append(f"{name}: {v:g}; give at least {MIN_TIMEOUT_S:g} seconds")
        if problems:
            raise InputError("run options: " + "; ".join(problems))

    def changes_scenario(self) -> bool:
        return any(getattr(self, k) is not None for k in SCENARIO_FIELDS)

    def budgets(self) -> dict[str, str | int | float]:
        """The budgets given (steps, time_budget, tokens) by name."""
        return {k: v for k in BUDGET_FIELDS if (v := getattr(self, k)) is not None}

    def apply(self, scenario: Scenario) -> Scenario:
        """The scenario with the optimizers subset, budget and seeds applied, re-validated (unchanged when
        none is given)."""
        if not self.changes_scenario():
            return scenario
        return with_overrides(scenario, steps=self.steps, seed=self.seed, time_budget=self.time_budget,
                              optimizers=list(self.optimizers) if self.optimizers else None,
                              tokens=self.tokens, target_val_loss=self.target_val_loss, repeat=self.repeat)

    def run_only(self, **changes: object) -> Overrides:
        """A copy that leaves the scenario alone (a sweep has already applied the budget to each point)."""
        return replace(self, **dict.fromkeys(SCENARIO_FIELDS), **changes)  # type: ignore[arg-type]

    def backend_options(self, scenario: Scenario) -> BackendOptions:
        """What the backend gets, the scenario's network section filling in what is not given."""
        return BackendOptions(
            link_engine=self.link_engine or scenario.network.link_engine,
            allow_unemulated=scenario.network.allow_unemulated if self.allow_unemulated is None
            else self.allow_unemulated,
            image=self.image)

    def measure(self, scenario: Scenario) -> bool:
        return scenario.network.measure_links if self.measure_links is None else self.measure_links

    def given(self) -> dict[str, object]:
        """The fields that differ from the defaults (for messages and tests)."""
        default = Overrides()
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(default, f.name)}
