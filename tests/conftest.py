"""Shared fixtures: small scenarios written to a temp folder, and a CLI runner."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cli():
    from harness.cli import app

    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args])

    return invoke


def tiny_scenario_dict(**overrides) -> dict:
    """A scenario small enough to train in a few seconds on 2 cores."""
    d = {
        "name": "tiny-test",
        "workers": [{"count": 2, "hardware": "host"}],
        "model": {"preset": "tiny"},
        "data": {"corpus": "builtin:pydoc", "seq_len": 32, "batch_size": 4, "val_batches": 2},
        "train": {"steps": 6, "eval_every": 3, "seed": 0},
        "optimizers": {"adamw": {"lr": 3e-3}},
        "baseline": "adamw",
    }
    for k, v in overrides.items():
        d[k] = v
    return d


@pytest.fixture
def write_scenario(tmp_path):
    def write(data: dict | str, name: str = "scenario.yaml") -> Path:
        p = tmp_path / name
        p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
        return p

    return write
