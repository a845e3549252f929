"""Optimizer strategies, chosen by name from a registry.

The option models (harness/distro_bench/scenario/optimizers.py) import no torch; a strategy's own module is imported the
first time it is asked for, so the scenario schema, `validate` and the CLI start without torch.
Adding a method: its option model in harness/distro_bench/scenario/optimizers.py (a class with `type: Literal["name"]`,
added to the OptimizerConfig union and OPTIONS there), its module here, and its line in STRATEGY_PATHS.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from distro_bench.errors import InputError
from distro_bench.scenario.optimizers import OPTIONS, StrategyConfig

if TYPE_CHECKING:
    from distro_bench.train.optim.base import Strategy

# name -> "module:Class"
STRATEGY_PATHS: dict[str, str] = {
    "adamw": "distro_bench.train.optim.adamw:AdamW",
    "distro": "distro_bench.train.optim.distro:DisTrO",
    "diloco": "distro_bench.train.optim.diloco:DiLoCo",
    "sparseloco": "distro_bench.train.optim.sparseloco:SparseLoCo",
    "powersgd": "distro_bench.train.optim.powersgd:PowerSGD",
    "muloco": "distro_bench.train.optim.muloco:MuLoCo",
    "sparta": "distro_bench.train.optim.sparta:SPARTA",
    "desloc": "distro_bench.train.optim.desloc:DESLOC",
    "streaming-diloco": "distro_bench.train.optim.streaming_diloco:StreamingDiLoCo",
    "noloco": "distro_bench.train.optim.noloco:NoLoCo",
}


def get_strategy(name: str) -> type[Strategy]:
    try:
        module, cls = STRATEGY_PATHS[name].split(":")
    except KeyError:
        raise InputError(f"unknown optimizer {name!r}; known: {', '.join(sorted(STRATEGY_PATHS))}") from None
    return getattr(import_module(module), cls)


def __getattr__(name: str) -> Any:
    # Torch-backed names resolve on first use only.
    if name == "STRATEGIES":
        return {n: get_strategy(n) for n in STRATEGY_PATHS}
    if name in ("Collective", "Period", "PhaseTimer", "Strategy", "StepResult"):
        return getattr(import_module("distro_bench.train.optim.base"), name)
    raise AttributeError(f"module 'distro_bench.train.optim' has no attribute {name!r}")


__all__ = [
    "OPTIONS",
    "STRATEGIES",
    "STRATEGY_PATHS",
    "Collective",
    "Period",
    "PhaseTimer",
    "StepResult",
    "Strategy",
    "StrategyConfig",
    "get_strategy",
]
