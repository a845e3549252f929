"""distro-bench: network-emulation benchmarks for low-communication distributed training.

The public Python API is `distro_bench.api` (`run`, `sweep`, `links`, `doctor`, `project`, `report`, `check`,
`export`, `node`, ...). `import distro_bench` stays light: it loads no torch and no API.

The contract of a method from outside the project (docs/extending.md), imported from here:
`Strategy` (subclass it: `step` after backward, bytes through `comm`), `StrategyConfig` (its options model),
`Collective` and `Period` (what it predicts it sends), `StepResult`, `PhaseTimer` and `Comm` (the process-group
wrapper that counts the bytes). They load on first use (`Strategy` brings torch; `StrategyConfig` does not).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it; resolved on first use, so `import distro_bench` imports no torch
_CONTRACT = {
    "Strategy": "distro_bench.train.optim.base",
    "Collective": "distro_bench.train.optim.base",
    "Period": "distro_bench.train.optim.base",
    "StepResult": "distro_bench.train.optim.base",
    "PhaseTimer": "distro_bench.train.optim.base",
    "Comm": "distro_bench.train.comm",
    "StrategyConfig": "distro_bench.scenario.optimizers",
}

if TYPE_CHECKING:
    from distro_bench.scenario.optimizers import StrategyConfig
    from distro_bench.train.comm import Comm
    from distro_bench.train.optim.base import Collective, Period, PhaseTimer, StepResult, Strategy


def __getattr__(name: str) -> Any:
    module = _CONTRACT.get(name)
    if module is None:
        raise AttributeError(f"module 'distro_bench' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # once resolved, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_CONTRACT])


__all__ = ["Collective", "Comm", "Period", "PhaseTimer", "StepResult", "Strategy", "StrategyConfig", "__version__"]
