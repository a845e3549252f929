"""Optimizer strategies, chosen by name from the one registry (harness/distro_bench/scenario/methods.py).

A scenario's `type` is a name registered in the entry-point group `distro_bench.optimizers` (the shipped methods
in pyproject.toml; any installed distribution may add its own) or an import path "pkg.module:Class". A shipped
method's options model (harness/distro_bench/scenario/optimizers.py, torch-free) names its strategy module here,
imported the first time it is asked for, so the scenario schema, `validate` and the CLI start without torch.
Adding a method: its options model and strategy, and one entry-point line (docs/extending.md).
"""

from __future__ import annotations

import inspect
from importlib import import_module
from typing import TYPE_CHECKING, Any, cast

from distro_bench.errors import InputError
from distro_bench.scenario import methods
from distro_bench.scenario.optimizers import StrategyConfig

if TYPE_CHECKING:
    from distro_bench.train.optim.base import Strategy


def get_strategy(name: str) -> type[Strategy]:
    """The Strategy class a scenario's `type` names (a registered name or an import path); InputError saying what
    is missing or wrong otherwise."""
    strategy_base: Any = import_module("distro_bench.train.optim.base").Strategy  # torch: only once asked for one
    try:
        obj: Any = methods.strategy_target(name)
        config = methods.options_class(name)
    except methods.MethodError as e:
        raise InputError(str(e)) from None
    if not (inspect.isclass(obj) and issubclass(obj, strategy_base)):
        raise InputError(f"optimizer {name!r}: {obj!r} is not a distro_bench.Strategy subclass")
    own = getattr(obj, "Config", None)
    if not (inspect.isclass(own) and issubclass(config, own)):
        raise InputError(f"optimizer {name!r}: its options model {config.__name__} is not {obj.__name__}.Config")
    return cast("type[Strategy]", obj)


def __getattr__(name: str) -> Any:
    # Torch-backed names resolve on first use only.
    if name == "STRATEGIES":  # every registered method that loads here (a plugin that cannot is left out)
        out = {}
        for n in methods.names():
            try:
                out[n] = get_strategy(n)
            except InputError:
                continue
        return out
    if name in ("Collective", "Period", "PhaseTimer", "Strategy", "StepResult"):
        return getattr(import_module("distro_bench.train.optim.base"), name)
    raise AttributeError(f"module 'distro_bench.train.optim' has no attribute {name!r}")


__all__ = [
    "STRATEGIES",
    "Collective",
    "Period",
    "PhaseTimer",
    "StepResult",
    "Strategy",
    "StrategyConfig",
    "get_strategy",
]
