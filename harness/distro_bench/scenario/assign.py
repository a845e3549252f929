"""Dotted-path settings of a scenario, `--set PATH=VALUE`: one parser and one way to apply them, shared by
`run --set` (one value per path) and `sweep --set` (a list of values per path: studies/sweep_grid.py).

A value is read as a YAML scalar (`3e-3` -> 0.003, `8` -> 8, `true` -> True, `10Mbit` stays text: units are the
scenario's to check); the scenario that results is validated like the file, every problem at once, each
naming its path.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from distro_bench.errors import InputError, ScenarioError
from distro_bench.scenario import presets
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.scenario.model import Scenario

PATH_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_][A-Za-z0-9_.-]*)*$")
BUDGETS = ("steps", "time_budget", "tokens")  # train.<one of these> is the budget: setting one replaces the others


def parse_value(text: str) -> Any:
    """'3e-3' -> 0.003, '8' -> 8, 'true' -> True, '10Mbit' -> '10Mbit' (units are the scenario's to check)."""
    t = text.strip()
    for cast in (int, float):
        try:
            return cast(t)
        except ValueError:
            pass
    try:
        v = yaml.safe_load(t)
    except yaml.YAMLError:
        return t
    return v if isinstance(v, (bool, type(None))) else t


def split_assignment(text: str) -> tuple[str, str]:
    """`optimizers.distro.lr=1e-3` -> ('optimizers.distro.lr', '1e-3'); InputError naming the flag when malformed."""
    path, sep, rest = text.partition("=")
    path = path.strip()
    if not sep or not path:
        raise InputError(f"--set {text!r}: write PATH=VALUE, e.g. optimizers.distro.lr=1e-3")
    if not PATH_RE.match(path) or ".." in path:
        raise InputError(f"--set {text!r}: {path!r} is not a dotted field path like optimizers.distro.lr")
    return path, rest


def parse_assignments(texts: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """`run --set PATH=VALUE ...` -> {path: value}, one value per path; one InputError listing every malformed
    flag (a list of values is a sweep's: `distro-bench sweep`)."""
    out: dict[str, Any] = {}
    problems: list[str] = []
    for text in texts:
        try:
            path, rest = split_assignment(text)
        except InputError as e:
            problems.append(str(e))
            continue
        if not rest.strip():
            problems.append(f"--set {path}: no value after '='")
        elif "," in rest:
            problems.append(f"--set {path}={rest}: one value per path for run (several values make a grid: "
                            "distro-bench sweep SCENARIO --set PATH=V1,V2)")
        elif path in out:
            problems.append(f"--set {path}: given more than once")
        else:
            out[path] = parse_value(rest)
    if problems:
        raise InputError("; ".join(problems))
    return out


def base_dict(scenario: Scenario) -> dict:
    """The scenario as a plain document that re-validates to the same scenario (the corpus path made absolute)."""
    data = scenario.model_dump(mode="json", exclude_none=True)
    data["data"]["corpus"] = scenario.corpus_path()
    return data


def set_path(doc: dict, path: str, value: Any, scenario: Scenario) -> None:
    """Set `path` in the scenario document `doc` (a budget replaces the others; a link or hardware preset the
    scenario names without spelling it out starts from the preset); InputError naming the path when it cannot."""
    parts = path.split(".")
    if parts[0] == "train" and len(parts) == 2 and parts[1] in BUDGETS and isinstance(doc.get("train"), dict):
        for other in BUDGETS:
            if other != parts[1]:
                doc["train"].pop(other, None)
        if parts[1] == "steps" and isinstance(value, int) and isinstance(doc["train"].get("eval_every"), int):
            doc["train"]["eval_every"] = min(doc["train"]["eval_every"], value)  # as `run --steps` does
    if parts[0] == "optimizers" and len(parts) >= 2 and parts[1] not in scenario.optimizers:
        raise InputError(f"--set {path}: {parts[1]!r} is not an optimizer of {scenario.name} "
                         f"({', '.join(scenario.optimizers)})")
    node = doc
    for i, key in enumerate(parts[:-1]):
        nxt = node.get(key)
        if nxt is None:
            nxt = {}
            if i == 1 and parts[0] in ("links", "hardware") and key in (
                    presets.LINKS if parts[0] == "links" else presets.HARDWARE):
                nxt = {"preset": key}
            node[key] = nxt
        elif not isinstance(nxt, dict):
            raise InputError(f"--set {path}: {'.'.join(parts[:i + 1])} is a value ({nxt!r}), not a section with fields")
        node = nxt
    node[parts[-1]] = value


def apply_assignments(scenario: Scenario, values: dict[str, Any], source: str = "--set") -> Scenario:
    """The scenario with every `path: value` set, validated like the file: one ScenarioError listing every
    problem (a path that cannot be set and every field the result fails on), each naming its path."""
    if not values:
        return scenario
    doc = base_dict(scenario)
    problems: list[str] = []
    for path, value in values.items():
        try:
            set_path(doc, path, value, scenario)
        except InputError as e:
            problems.append(str(e))
    try:
        out = scenario_from_dict(doc, source=source, base_dir=scenario._base_dir)
    except ScenarioError as e:
        problems += e.problems
    if problems:
        raise ScenarioError(source, problems)
    return out
