"""A scenario's problems as records for machines (`validate --json`): {"field", "value", "message"}.

Every problem the loader reports reads "<field>: <message>" with the field a dotted path
("workers[1].link: unknown link 'dls'", scenario/problems.py); the value is what the scenario file holds at that
path (null where the field is absent, or where the problem has no field: "line 3, column 1: not valid YAML").
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

import yaml

from distro_bench.errors import HarnessError
from distro_bench.scenario.loading import UniqueKeyLoader, read_scenario_text

FIELD_RE = re.compile(r"^[A-Za-z_][\w-]*(?:\[\d+\])*(?:\.[\w-]+(?:\[\d+\])*)*$")
_PART_RE = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parsed_file(scenario: Path) -> Any:
    """The scenario file as parsed YAML (read as `validate` reads it), for the problems' values; None when it
    cannot be read or parsed (those problems have no field)."""
    try:
        return yaml.load(read_scenario_text(scenario), Loader=UniqueKeyLoader)
    except (HarnessError, yaml.YAMLError, RecursionError, ValueError, OverflowError):
        return None


def value_at(document: Any, field: str) -> Any:
    """The value at a dotted path ('workers[1].link', 'links.dsl.up') in a parsed scenario document; None
    where there is none."""
    node = document
    for key, index in _PART_RE.findall(field):
        if index:
            if not isinstance(node, list) or int(index) >= len(node):
                return None
            node = node[int(index)]
        elif isinstance(node, dict) and key in node:
            node = node[key]
        else:
            return None
    return node


def _json_ready(v: Any) -> Any:
    """YAML scalars JSON cannot hold (a date, bytes) as text; containers as they are."""
    if isinstance(v, dict):
        return {str(k): _json_ready(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_ready(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (datetime.date, datetime.time)):
        return v.isoformat()
    return str(v)


def problem_record(problem: str, document: Any = None) -> dict[str, Any]:
    """'optimizers.adamw.lr: Input should be a valid number ...' -> {"field": "optimizers.adamw.lr",
    "value": <the file's value there>, "message": "Input should be a valid number ..."}."""
    field, sep, message = problem.partition(": ")
    if not sep or not FIELD_RE.match(field):
        return {"field": None, "value": None, "message": problem}
    return {"field": field, "value": _json_ready(value_at(document, field)), "message": message}
