"""`distro-bench export RUN --to mlflow|tensorboard`: a run folder into an experiment tracker; and
`distro-bench export slurm|k8s SCENARIO`: the launch recipes of a multi-host run (distro_bench/export/recipes.py)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from distro_bench.cli.options import JSON_OPTION
from distro_bench.run.console import cli_errors, console, print_json

RECIPES = ("slurm", "k8s")


class Tracker(str, Enum):
    mlflow = "mlflow"
    tensorboard = "tensorboard"


def export(
    run_dir: Path = typer.Argument(..., help="run folder, or `slurm` / `k8s` followed by a SCENARIO for a launch recipe"),
    scenario: Path = typer.Argument(None, help="slurm|k8s: the scenario the recipe runs", show_default=False),
    to: Tracker = typer.Option(None, "--to", help="mlflow (a local file store) or tensorboard (event files)",
                               show_default=False),
    dest: str = typer.Option(None, "--dest", help="folder to write (default: RUN/mlruns or RUN/tensorboard); for "
                                                  "mlflow also a tracking URI such as sqlite:///mlflow.db; for a "
                                                  "recipe the file (default: ./<scenario>.sbatch or .k8s.yaml)"),
    nnodes: int = typer.Option(None, "--nnodes", min=1, help="recipe: hosts (default: the scenario's placement, "
                                                              "else one per scenario node)"),
    iface: str = typer.Option("eth0", "--iface", help="recipe: interface each host shapes"),
    port: int = typer.Option(29400, "--port", min=1, max=65534, help="recipe: rendezvous port (the agents' store: +1)"),
    image: str = typer.Option(None, "--image", help="k8s: container image (default: distro-bench-worker:<version>)"),
    gpus_per_node: int = typer.Option(0, "--gpus-per-node", min=0, help="recipe: GPUs to request per host"),
    time_limit: str = typer.Option("01:00:00", "--time-limit", help="slurm: the job's time limit"),
    as_json: bool = JSON_OPTION,
) -> None:
    """Export RUN to an experiment tracker (`export RUN --to mlflow|tensorboard`), or write SCENARIO's launch
    recipe across hosts (`export slurm|k8s SCENARIO`).

    A tracker gets one run per optimizer with its parameters, per-step metrics and the report attached
    (optional extras: pip install 'distro-bench[mlflow]' or '[tensorboard]'). `slurm` writes an sbatch
    script, `k8s` an indexed Job and a headless Service (docs/scaling-out.md)."""
    from distro_bench import api
    from distro_bench.errors import InputError

    with cli_errors():
        if str(run_dir) in RECIPES and scenario is not None:
            path = _recipe(str(run_dir), scenario, dest, nnodes, iface, port, image, gpus_per_node, time_limit)
            if as_json:
                print_json({"recipe": str(run_dir), "path": str(path)})
            else:
                console.print(str(path), markup=False, soft_wrap=True)
            return
        if scenario is not None:
            raise InputError(f"export: a second argument ({scenario}) is only for `export slurm|k8s SCENARIO`")
        if to is None:
            raise InputError("export: --to mlflow|tensorboard is required for a run folder "
                             "(or `export slurm|k8s SCENARIO` for a launch recipe)")
        result = api.export(run_dir, to.value, dest)
    if as_json:
        print_json(result.to_dict())
        return
    for name, ref in result.runs.items():
        console.print(f"{name}: {ref}", markup=False, soft_wrap=True)
    console.print(str(result.dest), markup=False, soft_wrap=True)


def _recipe(kind: str, scenario_path: Path, dest: str | None, nnodes: int | None, iface: str, port: int,
            image: str | None, gpus: int, time_limit: str) -> Path:
    from distro_bench import __version__
    from distro_bench.export.recipes import RecipeSettings, default_nnodes, write
    from distro_bench.scenario.model import load_scenario

    s = load_scenario(scenario_path)
    settings = RecipeSettings(nnodes=default_nnodes(s, nnodes), iface=iface, port=port, gpus_per_node=gpus,
                              image=image or f"distro-bench-worker:{__version__}", time_limit=time_limit,
                              i_know=kind == "k8s")  # a pod's eth0 always carries its default route
    return write(kind, scenario_path, Path(dest) if dest else None, settings, s)
