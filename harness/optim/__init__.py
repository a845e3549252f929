"""Optimizer strategies, chosen by name from a registry.

The option models (harness/optim/options.py) import no torch; a strategy's own module is imported the
first time it is asked for, so the scenario schema, `validate` and the CLI start without torch.
Adding a method: its option model in options.py, its module here, one line in each registry.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from harness.errors import InputError
from harness.optim.options import OPTIONS, StrategyConfig

if TYPE_CHECKING:
    from harness.optim.base import Strategy

# name -> "module:Class"
STRATEGY_PATHS: dict[str, str] = {
    "adamw": "harness.optim.adamw:AdamW",
    "distro": "harness.optim.distro:DisTrO",
    "diloco": "harness.optim.diloco:DiLoCo",
    "sparseloco": "harness.optim.sparseloco:SparseLoCo",
    "powersgd": "harness.optim.powersgd:PowerSGD",
    "muloco": "harness.optim.muloco:MuLoCo",
    "sparta": "harness.optim.sparta:SPARTA",
    "desloc": "harness.optim.desloc:DESLOC",
    "streaming-diloco": "harness.optim.streaming_diloco:StreamingDiLoCo",
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
        return getattr(import_module("harness.optim.base"), name)
    raise AttributeError(f"module 'harness.optim' has no attribute {name!r}")


__all__ = ["Collective", "OPTIONS", "Period", "STRATEGIES", "STRATEGY_PATHS", "get_strategy", "PhaseTimer",
           "StepResult", "Strategy", "StrategyConfig"]
