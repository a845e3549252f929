"""`distro-bench export RUN --to mlflow|tensorboard|wandb`: a run folder into an experiment tracker; and
`distro-bench export slurm|k8s SCENARIO`: the launch recipes of a multi-host run (harness/distro_bench/export/recipes.py)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from distro_bench.cli.console import cli_errors, console, print_json, terminal_text
from distro_bench.cli.options import JSON_OPTION

RECIPES = ("slurm", "k8s")


class Tracker(StrEnum):
    mlflow = "mlflow"
    tensorboard = "tensorboard"
    wandb = "wandb"


def export(
    run_dir: Path = typer.Argument(..., help="run folder, or `slurm` / `k8s` followed by a SCENARIO for a launch recipe"),
    scenario: Path = typer.Argument(None, help="slurm|k8s: the scenario the recipe runs", show_default=False),
    to: Tracker = typer.Option(None, "--to", help="mlflow (a local file store), tensorboard (event files) or wandb "
                                                "(offline: a local folder, `wandb sync` uploads it)",
                               show_default=False),
    dest: str = typer.Option(None, "--dest", help="folder to write (default: RUN/mlruns, RUN/tensorboard or RUN/wandb); for "
                                                  "mlflow also a tracking URI such as sqlite:///mlflow.db; for a "
                                                  "recipe the file (default: ./<scenario>.sbatch or .k8s.yaml)"),
    nnodes: int = typer.Option(None, "--nnodes", min=1, help="recipe: hosts (default: the scenario's placement, "
                                                              "else one per scenario node)"),
    iface: str = typer.Option("eth0", "--iface", help="recipe: interface each host shapes"),
    port: int = typer.Option(29400, "--port", min=1, max=65534, help="recipe: rendezvous port (the agents' store: +1)"),
    placement: str = typer.Option(None, "--placement", help="recipe: scenario ranks per host, e.g. '0,1;2,3' (default: "
                                                            "the scenario's workers[].host, else in order); every "
                                                            "agent is started with the placement written"),
    image: str = typer.Option(None, "--image", help="k8s: the node image (default: distro-bench-node:<version>, "
                                                    "built by `distro-bench image build --node`)"),
    results_claim: str = typer.Option(None, "--results-claim", help="k8s: an existing PersistentVolumeClaim "
                                                                    "(ReadWriteMany) for the run folder (default: "
                                                                    "the manifest declares <job>-results)"),
    gpus_per_node: int = typer.Option(0, "--gpus-per-node", min=0, help="recipe: GPUs to request per host"),
    time_limit: str = typer.Option("01:00:00", "--time-limit", help="slurm: the job's time limit"),
    as_json: bool = JSON_OPTION,
) -> None:
    """Export RUN to a tracker (`--to mlflow|tensorboard|wandb`) or SCENARIO's launch recipe (`export
    slurm|k8s SCENARIO`).

    A tracker gets one run per optimizer and seed with its parameters (run id, git commit, scenario hash, every
    node's link and hardware, the model), per-step metrics and the report attached (optional extras: pip install
    'distro-bench[mlflow]', '[tensorboard]' or '[wandb]'). `slurm` writes an sbatch
    script (submit it from its folder), `k8s` an indexed Job, a headless Service, the scenario as a ConfigMap and
    a claim for the results (docs/scaling-out.md)."""
    from distro_bench import api
    from distro_bench.errors import InputError

    with cli_errors():
        if str(run_dir) in RECIPES and scenario is not None:
            path = api.export_recipe(str(run_dir), scenario, dest=dest, nnodes=nnodes, placement=placement,  # type: ignore[arg-type]
                                     iface=iface, port=port, image=image, results_claim=results_claim,
                                     gpus_per_node=gpus_per_node, time_limit=time_limit)
            if as_json:
                print_json({"recipe": str(run_dir), "path": str(path)})
            else:
                console.print(str(path), markup=False, soft_wrap=True)
            return
        if scenario is not None:
            raise InputError(f"export: a second argument ({scenario}) is only for `export slurm|k8s SCENARIO`")
        if to is None:
            raise InputError("export: --to mlflow|tensorboard|wandb is required for a run folder "
                             "(or `export slurm|k8s SCENARIO` for a launch recipe)")
        result = api.export(run_dir, to.value, dest)
    if as_json:
        print_json(result.to_dict())
        return
    for name, ref in result.runs.items():
        console.print(terminal_text(f"{name}: {ref}", oneline=True), markup=False, soft_wrap=True)
    console.print(str(result.dest), markup=False, soft_wrap=True)

