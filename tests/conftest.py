"""Shared fixtures (a CLI runner, scenarios written to a temp folder) and the markers each folder implies.

Folders and markers (select with -m, e.g. `-m "not root and not docker"` on a laptop):
  tests/unit/                 none: no root, no Docker
  tests/integration/local/    none: real worker processes on the local backend (loopback)
  tests/integration/netns/    root: network namespaces, tc, the delay line
  tests/integration/docker/   docker: a Docker engine and the worker image
A test that needs more than its folder implies says so itself (`browser`, `root`), and a test
parametrized with backend "netns" needs root wherever it lives.

Tiers (docs/testing.md): `slow` marks each test that took over ~10 s in a full run on the shared
2-core CI host, wherever it lives; `pytest` alone runs the rest (pyproject's addopts `-m "not slow"`),
`pytest -m slow` the slow tier, and .ci/run both.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

TESTS = Path(__file__).resolve().parent
FOLDER_MARKS = {
    ("unit",): (),
    ("integration", "local"): (),
    ("integration", "netns"): ("root",),
    ("integration", "docker"): ("docker",),
}


def folder_marks(path: Path) -> tuple[str, ...]:
    parts = path.resolve().relative_to(TESTS).parts
    for prefix, marks in FOLDER_MARKS.items():
        if parts[:len(prefix)] == prefix:
            return marks
    raise pytest.UsageError(f"{path}: test modules belong under one of "
                            + ", ".join("tests/" + "/".join(p) for p in FOLDER_MARKS))


def pytest_collection_modifyitems(config, items):
    for item in items:
        for mark in folder_marks(Path(str(item.path))):
            item.add_marker(mark)
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend") == "netns":
            item.add_marker("root")


@pytest.fixture
def cli():
    from distro_bench.cli import app

    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args])

    return invoke


@pytest.fixture
def write_scenario(tmp_path):
    def write(data: dict | str, name: str = "scenario.yaml") -> Path:
        p = tmp_path / name
        p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
        return p

    return write
