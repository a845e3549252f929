"""The `distro-bench` command line, assembled: the app, `run`, and the commands of the modules beside this one,
in the order --help lists them. Each command is thin: options -> distro_bench.api -> Rich output.

Output reads in any terminal or log: tables fit the width (else `key: value` lines), progress is plain lines
on stderr when stdout is not a terminal, and `--json` prints machine-readable results on stdout.
"""

from __future__ import annotations

from pathlib import Path

import typer

from distro_bench.cli.console import cli_errors, console, print_json, unemulated_line
from distro_bench.cli.docker import clean, image_app
from distro_bench.cli.export import export
from distro_bench.cli.history import history
from distro_bench.cli.net import doctor, links
from distro_bench.cli.node import node
from distro_bench.cli.options import (
    BACKEND_HELP,
    CORPUS_OUTSIDE_HELP,
    JSON_OPTION,
    LINK_ENGINE_HELP,
    ROOT_WORKERS_HELP,
    TRACE_OUTSIDE_HELP,
    Backend,
    LinkEngine,
    allow_corpus_outside,
    out_path,
    value,
    version_callback,
)
from distro_bench.cli.options import allow_trace_outside as _allow_trace_outside
from distro_bench.cli.project import project
from distro_bench.cli.report import check, report
from distro_bench.cli.scenario import schema, validate
from distro_bench.cli.summary import print_summary
from distro_bench.cli.sweep import sweep

app = typer.Typer(
    name="distro-bench",
    help="Benchmark DisTrO/DeMo against AdamW + all-reduce on emulated home and WAN networks.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    # Click's plain help (no Rich panels): it wraps the help text and never cuts an option's name, where Rich's
    # table cut `--target-val-loss` to `--target-val-lo…` at 80 columns (issue 52).
    rich_markup_mode=None,
)


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=version_callback, is_eager=True,
                                 help="print the version and exit"),
) -> None:
    """Benchmark DisTrO/DeMo against AdamW + all-reduce on emulated home and WAN networks."""


@app.command()
def run(
    scenario: Path = typer.Argument(..., help="scenario YAML file"),
    set_: list[str] = typer.Option(None, "--set", help="PATH=VALUE: change one scenario field by dotted path, the "
                                                       "value read as YAML (repeatable), e.g. optimizers.distro.lr=1e-3 "
                                                       "or links.dsl.up=10Mbit; validated like the file, recorded in "
                                                       "the run folder"),
    backend: Backend = typer.Option("auto", help=BACKEND_HELP),
    optimizer: list[str] = typer.Option(None, "--optimizer", "-o", help="run only these optimizers (repeatable)"),
    steps: int = typer.Option(None, min=1, help="budget: train N steps (replaces the scenario's budget)"),
    time_budget: str = typer.Option(None, "--time-budget", help="budget: training seconds per optimizer, e.g. 300s"),
    tokens: str = typer.Option(None, help="budget: tokens per optimizer (all workers), e.g. 2M"),
    target_val_loss: float = typer.Option(None, "--target-val-loss",
                                          help="budget: stop at this val loss (capped by the steps or time budget)"),
    repeat: int = typer.Option(None, min=1, max=100, help="run each optimizer K times, seeds seed..seed+K-1"),
    out: Path = typer.Option(Path("results"), help="folder that receives the run folder", parser=out_path),
    seed: int = typer.Option(None, min=0, help="override train.seed"),
    link_engine: LinkEngine = typer.Option(None, help=LINK_ENGINE_HELP, show_default=False),
    allow_unemulated: bool = typer.Option(None, "--allow-unemulated/--no-allow-unemulated", show_default=False,
                                          help="run even if part of a link cannot be emulated here (the report says "
                                               "what); default: the scenario's network.allow_unemulated"),
    image: str = typer.Option(None, help="docker backend: worker image (default: distro-bench-worker:<version>)"),
    inventory: Path = typer.Option(None, help="ssh backend: the hosts to run on (YAML: host, iface, user, key, ... "
                                              "per host; docs/backends.md, 'The ssh backend')"),
    measure_links: bool = typer.Option(None, "--measure-links/--no-measure-links", show_default=False,
                                       help="measure each node's goodput and RTT once the links are up (a few "
                                            "seconds; the report's 'measured'); default: network.measure_links"),
    allow_trace_outside: bool = typer.Option(False, "--allow-trace-outside", help=TRACE_OUTSIDE_HELP),
    allow_corpus_outside_: bool = typer.Option(False, "--allow-corpus-outside", help=CORPUS_OUTSIDE_HELP),
    allow_root_workers: bool = typer.Option(False, "--allow-root-workers", help=ROOT_WORKERS_HELP),
    as_json: bool = JSON_OPTION,
) -> None:
    """Train every optimizer of SCENARIO on emulated links and write a run folder (its path is the last line)."""
    from distro_bench import api
    from distro_bench.cli.progress import make_progress
    from distro_bench.run.overrides import Overrides, RunSettings, set_pairs

    _allow_trace_outside(allow_trace_outside)
    allow_corpus_outside(allow_corpus_outside_)

    with cli_errors():
        overrides = Overrides(optimizers=tuple(optimizer) if optimizer else None, steps=steps, seed=seed,
                              time_budget=time_budget, tokens=tokens, target_val_loss=target_val_loss, repeat=repeat,
                              sets=set_pairs(set_))
        settings = RunSettings(backend=value(backend) or "auto", out=out, link_engine=value(link_engine),
                               allow_unemulated=allow_unemulated, image=image, inventory=inventory,
                               measure_links=measure_links, allow_root_workers=allow_root_workers)
        # With --json, stdout carries only the JSON document: progress goes to stderr as plain lines.
        with make_progress(interactive=False if as_json else None) as progress:
            result = api.run(scenario, overrides, settings, progress=progress)
    if as_json:
        print_json({"run_dir": str(result.run_dir), "state": result.state, "summary": result.summary.to_dict()})
        return
    from distro_bench.report.replay_section import is_replay, replay_lines
    from distro_bench.report.verdict import closing_lines, ranking_lines, verdict_lines
    from distro_bench.results.rundir import predicted_optimizers

    summary = result.summary.to_dict()
    if not is_replay(summary):  # a replay's own table below says what it measured (no loss, no replicas)
        print_summary(result.summary)

    if unemulated := unemulated_line(result.run_dir):  # said plainly where the verdict is read (issue 38)
        console.print(unemulated, markup=False, style="bold yellow")

    if is_replay(summary):  # nothing trained: what the communication cost, no verdict on training
        for line in replay_lines(summary, predicted_optimizers(Path(result.run_dir))):
            console.print(line, markup=False, soft_wrap=True)
    else:
        for line in verdict_lines(summary) + ranking_lines(summary):
            console.print(line, markup=False)  # wrapped at the terminal's (or 80) columns
        for line in closing_lines(summary):  # the decision first: never more than the verdict says (issue 52)
            console.print(line, markup=False, soft_wrap=True)
    if (Path(result.run_dir) / "events.parquet").is_file():  # issue 18: what the network's changes cost each
        from distro_bench.report.events_section import loss_sentences
        from distro_bench.report.load import load_for_report

        for line in loss_sentences(load_for_report(result.run_dir).events):
            console.print(line, markup=False)
    console.print(str(result.run_dir), markup=False, soft_wrap=True)


app.command(name="validate")(validate)
app.command(name="schema")(schema)
app.command(name="report")(report)
app.command(name="check")(check)
app.command(name="doctor")(doctor)
app.command(name="links")(links)
app.add_typer(image_app, name="image")
app.command(name="clean")(clean)
app.command(name="project")(project)
app.command(name="export")(export)
app.command(name="sweep")(sweep)
app.command(name="node")(node)
app.command(name="history")(history)


if __name__ == "__main__":
    app()
