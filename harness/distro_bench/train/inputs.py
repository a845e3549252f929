"""The checks of a scenario's model and data beyond its fields, run by `validate` and by every run before its
folder is opened: the model factory imported, built and fed a tiny batch (train/models.py check), the
vocabularies of model and data, and an `hf:` hub dataset found in a cache or on a reachable hub
(scenario/problems.py input_problems). A problem is a ScenarioError line naming the field and what was expected,
never a worker's traceback a minute later."""

from __future__ import annotations

from typing import Any

from distro_bench.errors import InputError, ScenarioError
from distro_bench.scenario.model import Scenario
from distro_bench.scenario.problems import input_problems
from distro_bench.train import models


def model_problems(scenario: Scenario, facts: dict[str, Any] | None = None) -> list[str]:
    """The model built and fed a tiny batch (its parameters and FLOPs into `facts`); [] when it keeps the protocol."""
    try:
        found = models.check(scenario.resolved_model(), scenario.data.seq_len)
    except InputError as e:
        return [str(e)]
    if facts is not None:
        facts.update(found)
    return []


def check_inputs(scenario: Scenario, source: str, *, training: bool = False) -> dict[str, Any]:
    """{"parameters", "flops_per_token", "flops_basis"} of the model; ScenarioError listing every problem.
    `training` (a run): the model's vocabulary must be the data's, also for the built-in model."""
    facts: dict[str, Any] = {}
    problems = input_problems(scenario, training=training) + model_problems(scenario, facts)
    if problems:
        raise ScenarioError(source, problems)
    return facts
