"""Optimizer strategies, chosen by name from this registry."""

from __future__ import annotations

from harness.errors import InputError
from harness.optim.adamw import AdamW
from harness.optim.base import Collective, PhaseTimer, Strategy, StrategyConfig
from harness.optim.distro import DisTrO

STRATEGIES: dict[str, type[Strategy]] = {
    "adamw": AdamW,
    "distro": DisTrO,
}


def get_strategy(name: str) -> type[Strategy]:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise InputError(f"unknown optimizer {name!r}; known: {', '.join(sorted(STRATEGIES))}") from None


__all__ = ["Collective", "STRATEGIES", "get_strategy", "PhaseTimer", "Strategy", "StrategyConfig"]
