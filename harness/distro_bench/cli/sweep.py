"""`distro-bench sweep`: options -> distro_bench.api.sweep (the grid, the runs, the pick) -> the table and the pick."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from distro_bench.cli.console import cli_errors, console
from distro_bench.cli.options import BACKEND_HELP, LINK_ENGINE_HELP, Backend, LinkEngine, out_path, value

TUNE_SEEDS = 3  # studies.sweep.TUNE_SEEDS, for --help (importing studies.sweep here would load torch)


def sweep(
    scenario: Path = typer.Argument(..., help="scenario YAML file"),
    set_: list[str] = typer.Option(..., "--set", help="PATH=V1,V2,... a scenario field by dotted path and the values "
                                                      "to try (repeatable: the grid is every combination), e.g. "
                                                      "optimizers.distro.lr=1e-3,3e-3,1e-2 or links.dsl.up=1Mbit,10Mbit"),
    pick: str = typer.Option(None, help="best: write best.yaml (each method's best setting by the held-out tuning "
                                        "split's loss at equal budget) and best-scenario.yaml (ready for `run`)"),
    backend: Backend = typer.Option("auto", help=BACKEND_HELP),
    out: Path = typer.Option(Path("results"), parser=out_path, help="folder that receives the sweep folder"),
    steps: int = typer.Option(None, min=1, help="budget at every point: N steps (replaces the scenario's budget)"),
    time_budget: str = typer.Option(None, "--time-budget", help="budget at every point: training seconds per "
                                                                "optimizer, e.g. 60s (train.time_budget)"),
    tokens: str = typer.Option(None, help="budget at every point: tokens per optimizer, e.g. 2M (train.tokens)"),
    repeat: int = typer.Option(None, min=1, max=100, help="run every point with K seeds (train.seeds), for intervals; "
                                                          f"with --pick best the default is {TUNE_SEEDS}, and fewer "
                                                          "are refused unless --allow-few-seeds"),
    allow_few_seeds: bool = typer.Option(False, "--allow-few-seeds", help=f"let --pick best tune on fewer than "
                                                                          f"{TUNE_SEEDS} seeds (one seed's luck "
                                                                          "can win the pick)"),
    link_engine: LinkEngine = typer.Option(None, help=LINK_ENGINE_HELP, show_default=False),
    allow_unemulated: bool = typer.Option(False, help="run even if part of a link cannot be emulated here"),
    measure_links: bool = typer.Option(None, "--measure-links/--no-measure-links", show_default=False,
                                       help="measure each node's link once per point (a few seconds); default: "
                                            "the scenario's network.measure_links"),
    reuse: bool = typer.Option(True, help="reuse an optimizer's result when a point leaves its settings unchanged"),
) -> None:
    """Run SCENARIO over a grid of settings into one sweep folder (its path is the last line)."""
    from distro_bench import api
    from distro_bench.cli.progress import RichProgress
    from distro_bench.errors import InputError
    from distro_bench.run.overrides import Overrides, RunSettings

    with cli_errors():
        if pick not in (None, "best"):
            raise InputError(f"--pick: {pick!r} is not a choice; the one choice is 'best'")
        s = api.validate(scenario)
        # --allow-unemulated adds to the scenario's network.allow_unemulated; it never turns it off here
        overrides = Overrides(steps=steps, time_budget=time_budget, tokens=tokens, repeat=repeat)
        settings = RunSettings(backend=value(backend) or "auto", out=out, link_engine=value(link_engine),
                               allow_unemulated=allow_unemulated or None, measure_links=measure_links)

        def on_point(point, total, what):
            console.print(f"[bold][{point.index + 1}/{total}][/] {escape(point.label)}: {escape(what)}")

        # Ctrl-C: run_sweep keeps and summarises the finished points, then raises Interrupted (exit 130)
        result = api.sweep(s, set_, overrides, settings, pick_best=pick == "best", allow_few_seeds=allow_few_seeds,
                           reuse=reuse, on_point=on_point, point_progress=RichProgress)
        from distro_bench.studies.sweep import table_frame

        frame = table_frame(result.points)
        cols = [c for c in ["point", *[a.path for a in result.axes], "optimizer", "final_tune_loss", "final_val_loss", "time_to_target_s",
                            "step_time_s_mean", "state"] if c in frame.columns]
        console.print(frame[cols].to_string(index=False), markup=False)
        if result.best and result.best.get("by"):
            for name, b in result.best["by"].items():
                console.print(f"best {escape(name)}: " + ", ".join(f"{escape(p)}={escape(str(t))}"
                                                                    for p, t in b["settings"].items())
                              + f" ({b['metric']} {b['value']:.4f})")
            for w in result.best.get("warnings", []):
                console.print(f"[yellow]warning:[/] {escape(w)}")
            console.print(f"follow-up (fresh seeds {result.best.get('final_seeds')}): distro-bench run {result.sweep_dir / 'best-scenario.yaml'}", markup=False,
                          soft_wrap=True)
        for f in result.files:
            console.print(f"  {f}", markup=False, soft_wrap=True)
        console.print(str(result.sweep_dir), markup=False, soft_wrap=True)
