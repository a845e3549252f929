"""A sweep's grid: the axes (`--set PATH=V1,V2,...`), their points, and each point as a validated scenario.

Below the sweep runner (studies/sweep.py) and its report (studies/sweep_report.py), which both build point scenarios.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distro_bench.errors import InputError, ScenarioError
from distro_bench.scenario.assign import base_dict, parse_value, set_path, split_assignment
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.scenario.model import Scenario

RATE_FIELDS = ("up", "down")


@dataclass(frozen=True)
class Axis:
    """One `--set PATH=V1,V2,...`: the values as typed (for labels) and as parsed (for the scenario)."""

    path: str
    texts: tuple[str, ...]
    values: tuple[Any, ...]

    @property
    def optimizer(self) -> str | None:
        """The optimizer this axis tunes (`optimizers.<name>.<field>`), else None."""
        parts = self.path.split(".")
        return parts[1] if parts[0] == "optimizers" and len(parts) >= 3 else None

    @property
    def is_rate(self) -> bool:
        parts = self.path.split(".")
        return parts[0] == "links" and len(parts) == 3 and parts[2] in RATE_FIELDS


def parse_set(text: str) -> Axis:
    """`optimizers.distro.lr=1e-3,3e-3,1e-2` -> Axis; InputError naming the flag when malformed."""
    path, rest = split_assignment(text)  # the same parsing as `run --set` (scenario/assign.py)
    texts = tuple(v.strip() for v in rest.split(","))
    if not rest.strip() or any(not v for v in texts):
        raise InputError(f"--set {path}: empty value in {rest!r}; write values separated by commas")
    if len(set(texts)) != len(texts):
        raise InputError(f"--set {path}: a value is repeated in {rest!r}")
    return Axis(path, texts, tuple(parse_value(v) for v in texts))


def parse_sets(texts: list[str]) -> list[Axis]:
    axes = [parse_set(t) for t in texts]
    paths = [a.path for a in axes]
    dup = sorted({p for p in paths if paths.count(p) > 1})
    if dup:
        raise InputError(f"--set: {', '.join(dup)} given more than once; list all its values in one --set")
    if not axes:
        raise InputError("--set: give at least one PATH=VALUES to sweep")
    return axes


@dataclass(frozen=True)
class Point:
    index: int
    values: dict[str, Any]  # path -> parsed value
    texts: dict[str, str]  # path -> as typed

    @property
    def label(self) -> str:
        return ", ".join(f"{p}={t}" for p, t in self.texts.items())

    @property
    def folder_name(self) -> str:
        short = "_".join(f"{'.'.join(p.split('.')[-2:])}-{t}" for p, t in self.texts.items())
        return f"{self.index:02d}_" + re.sub(r"[^A-Za-z0-9_.+-]", "", short)[:80]


# ---- results (sweep.py runs the points, sweep_report.py reports them) ------------------------------

@dataclass
class PointResult:
    point: Point
    state: str  # complete | incomplete | failed | skipped
    run_dir: Path | None
    optimizers: dict[str, dict] = field(default_factory=dict)  # name -> sweep.POINT_KEYS figures (+ reused_from)
    reason: str | None = None

    def as_dict(self) -> dict:
        return {"index": self.point.index, "label": self.point.label, "values": self.point.values,
                "texts": self.point.texts, "state": self.state, "reason": self.reason,
                "run_dir": self.run_dir.name if self.run_dir else None, "optimizers": self.optimizers}


@dataclass
class SweepResult:
    sweep_dir: Path
    scenario: str
    axes: list[Axis]
    points: list[PointResult]
    state: str
    best: dict | None = None
    target: dict | None = None  # the sweep's common target (see common_target)
    files: list[Path] = field(default_factory=list)
    crossing: dict | None = None


def grid(axes: list[Axis]) -> list[Point]:
    combos = itertools.product(*[list(zip(a.values, a.texts)) for a in axes])
    return [Point(i, {a.path: v for a, (v, _) in zip(axes, c)}, {a.path: t for a, (_, t) in zip(axes, c)})
            for i, c in enumerate(combos)]


def point_scenario(scenario: Scenario, point: Point, fixed: dict[str, Any] | None = None) -> Scenario:
    """The scenario with `fixed` settings (the same at every point: a budget, the seeds) and the point's values,
    validated: ScenarioError naming the --set that broke it."""
    doc = base_dict(scenario)
    for path, value in [*(fixed or {}).items(), *point.values.items()]:
        set_path(doc, path, value, scenario)
    try:
        return scenario_from_dict(doc, source=f"--set {point.label}", base_dir=scenario._base_dir)
    except ScenarioError as e:
        raise ScenarioError(e.source, e.problems) from None


def validate_grid(scenario: Scenario, axes: list[Axis], fixed: dict[str, Any] | None = None) -> list[tuple[Point, Scenario]]:
    """Every point as a validated scenario, or one error that names each bad path/value once."""
    problems: list[str] = []
    out = []
    for p in grid(axes):
        try:
            out.append((p, point_scenario(scenario, p, fixed)))
        except ScenarioError as e:
            problems += [f"{x} (with --set {p.label})" for x in e.problems]
        except InputError as e:
            raise InputError(str(e)) from None
    if problems:
        # one message per distinct problem: the same bad value appears in many points
        seen: dict[str, str] = {}
        for x in problems:
            seen.setdefault(x.split(" (with --set")[0], x)
        raise ScenarioError("sweep", list(seen.values()))
    return out
