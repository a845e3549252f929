"""`distro-bench export RUN --to mlflow|tensorboard`: a run folder into an experiment tracker."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from harness.cli.options import JSON_OPTION
from harness.console import cli_errors, console, print_json


class Tracker(str, Enum):
    mlflow = "mlflow"
    tensorboard = "tensorboard"


def export(
    run_dir: Path = typer.Argument(..., help="run folder"),
    to: Tracker = typer.Option(..., "--to", help="mlflow (a local file store) or tensorboard (event files)"),
    dest: str = typer.Option(None, "--dest", help="folder to write (default: RUN/mlruns or RUN/tensorboard); for "
                                                  "mlflow also a tracking URI such as sqlite:///mlflow.db"),
    as_json: bool = JSON_OPTION,
) -> None:
    """Export RUN to an experiment tracker: one tracker run per optimizer with its parameters, per-step metrics
    and the report attached (optional extras: pip install 'distro-bench[mlflow]' or '[tensorboard]')."""
    from harness import api

    with cli_errors():
        result = api.export(run_dir, to.value, dest)
    if as_json:
        print_json(result.to_dict())
        return
    for name, ref in result.runs.items():
        console.print(f"{name}: {ref}", markup=False, soft_wrap=True)
    console.print(str(result.dest), markup=False, soft_wrap=True)
