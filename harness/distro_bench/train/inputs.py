"""The checks of a scenario's model and data that need torch or the network, run by `validate` (where torch is
present) and by every run before its folder is opened: the model factory imported, built and fed a tiny batch
(train/models.py check), and an `hf:` hub dataset found in a cache or on a reachable hub. A problem is a
ScenarioError line naming the field and what was expected, never a worker's traceback a minute later."""

from __future__ import annotations

import importlib.util
from typing import Any

from distro_bench.errors import InputError, ScenarioError
from distro_bench.scenario import hfcorpus
from distro_bench.scenario.model import Scenario


def check_inputs(scenario: Scenario, source: str, *, builtin: bool = False) -> dict[str, Any]:
    """{"parameters", "flops_per_token", "flops_basis"} of a model from outside (and of the built-in one with
    `builtin`; {} otherwise: the built-in model is the suite's to test, and torch stays unloaded for `validate`);
    ScenarioError listing every problem. Without torch installed, the model is left to the run's preflight."""
    problems = []
    facts: dict[str, Any] = {}
    if (builtin or scenario.model.source != "builtin") and importlib.util.find_spec("torch") is not None:
        from distro_bench.train import models

        try:
            facts = models.check(scenario.resolved_model(), scenario.data.seq_len)
        except InputError as e:
            problems.append(str(e))
    corpus = scenario.data.corpus
    if scenario.data.tokens is None and hfcorpus.is_hf(corpus):
        problem = hfcorpus.reachability_problem(corpus)
        if problem:
            problems.append(problem)
    if problems:
        raise ScenarioError(source, problems)
    return facts
