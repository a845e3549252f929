"""`distro-bench report` and `distro-bench check`: thin wrappers over distro_bench.api."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from distro_bench.cli.console import (
    TABLE_STYLE,
    cli_errors,
    console,
    err_console,
    markup_text,
    print_json,
    print_table,
    terminal_text,
)
from distro_bench.cli.options import JSON_OPTION, out_path
from distro_bench.scenario.gates import Gate

if TYPE_CHECKING:
    from distro_bench.api import Run


def _notes(run: Run) -> None:
    for note in filter(None, [run.state_note(), *run.notes]):
        err_console.print(f"[yellow]note:[/] {markup_text(note, oneline=True)}")


def report(
    run_dirs: list[Path] = typer.Argument(..., help="one run folder (its report) or several (a comparison)"),
    out: Path = typer.Option(None, parser=out_path, help="output folder (default: the run folder itself; for a comparison "
                                        "results/compare-<timestamp>/)"),
    allow_different: bool = typer.Option(False, "--allow-different",
                                         help="compare runs that differ in more than the optimizers under test "
                                              "(workers, links, model, budget, seeds, backend, host); the "
                                              "differences then head the report"),
    as_json: bool = JSON_OPTION,
) -> None:
    """Write report.md, report.html and plots/*.png for a run, or compare several runs.

    Runs that differ in more than the optimizers under test are refused, every difference named (exit 2),
    unless --allow-different."""
    from distro_bench import api

    with cli_errors():
        if len(run_dirs) == 1:
            run = api.load_run(run_dirs[0])
            _notes(run)
            files = api.report(run, out)  # loaded once
        else:
            run, files = None, api.compare(run_dirs, out, allow_different=allow_different)
    if as_json:
        from distro_bench.report.verdict_words import figure_lines

        print_json({**files.to_dict(), "runs": [str(p) for p in run_dirs],
                    **({"summary": run.summary.to_dict(), "verdicts": figure_lines(run.summary)} if run else {})})
        return
    for p in files.plots:
        console.print(f"  {p}", markup=False, soft_wrap=True)
    if run is not None:  # a run whose network changed: what each optimizer lost to it (wrapped at 80 columns)
        from distro_bench.report.events_section import loss_sentences

        for line in loss_sentences(run.events):
            console.print(line, markup=False)
    console.print(f"Markdown: {files.markdown}", markup=False, soft_wrap=True)
    console.print(str(files.html), markup=False, soft_wrap=True)


CHECK_COLUMNS = ["check", "optimizer", "measured", "threshold", "result"]


def _check(
    run_dir: Path = typer.Argument(..., help="run folder"),
    baseline: str = typer.Option(None, help="optimizer to compare against (default: the scenario's baseline)"),
    candidate: list[str] = typer.Option(None, "--candidate", help="optimizer(s) to check (repeatable; default: checks.candidate or every non-baseline optimizer)"),
    allow_few_seeds: bool = typer.Option(False, "--allow-few-seeds", help="judge the loss gap on fewer than 3 seeds (one seed: its value, no interval)"),
    strict: bool = typer.Option(False, "--strict", help="a check that does not apply to the run (N/A: e.g. loss at equal time over unshaped links) fails too"),
    against: Path = typer.Option(None, "--against", help="a reference run of the same scenario (the last good one): also check the reduction's drop and the loss gap's regression against it, paired by seed"),
    as_json: bool = JSON_OPTION,
    **thresholds: float | None,
) -> None:
    """The CI gate: exit 0 when every check passes or is N/A, 1 when any fails, 2 on a bad run folder or flag.

    A check that does not apply to the run (N/A, with its reason) fails only with --strict."""
    from rich.table import Table

    from distro_bench import api
    from distro_bench.report.check import FAIL, NA, measured_text

    with cli_errors():
        run = api.load_run(run_dir)
        result = api.check(run, baseline=baseline, candidates=candidate or None, allow_few_seeds=allow_few_seeds,
                           strict=strict, against=api.load_run(against) if against is not None else None,
                           **thresholds)
    if as_json:
        print_json(api.check_to_dict(result))
    else:
        for note in filter(None, [run.state_note(), *result.notes]):  # the run's notes, then the check's own
            err_console.print(f"[yellow]note:[/] {markup_text(note, oneline=True)}")
        # one line per cell: a forged state or name with a newline cannot print a line of its own
        rows = [[terminal_text(c, oneline=True) for c in (r.check, r.optimizer or "-", measured_text(r), r.threshold)]
                + [r.status] for r in result.results]
        t = Table(title=f"check {markup_text(run.path.name)} (baseline {markup_text(str(result.baseline))})", **TABLE_STYLE)
        for col in CHECK_COLUMNS:
            t.add_column(col, justify="right" if col == "measured" else "left", no_wrap=True)
        colour = {"PASS": "green", FAIL: "bold red", NA: "yellow"}
        for r in rows:
            t.add_row(*[markup_text(c) for c in r[:4]], f"[{colour.get(r[4], 'dim')}]{r[4]}[/]")
        print_table(t, [(f"{r[4]} {r[0]}" + (f" ({r[1]})" if r[1] != "-" else ""),
                         list(zip(CHECK_COLUMNS[2:4], r[2:4]))) for r in rows])
        # Notes below the table: a long sentence in a cell would push the table past 80 columns.
        for c in result.results:
            if c.note:
                # Wrapped (not soft-wrapped) so a margin and interval still fit 80 columns in a log.
                line = f"  {c.status} {c.check}" + (f" ({c.optimizer})" if c.optimizer else "") + f": {c.note}"
                console.print(terminal_text(line, oneline=True), markup=False)
        failed = sum(c.status == FAIL or (strict and c.status == NA) for c in result.results)
        na = sum(c.status == NA for c in result.results)
        na_words = f" ({na} not applicable{', failing with --strict' if strict else ''})" if na else ""
        console.print(f"[green]all checks passed{na_words}[/]" if not failed
                      else f"[bold red]{failed} check(s) failed{na_words}[/]")
    if not result.passed:
        raise typer.Exit(1)


def check_command() -> Callable[..., None]:
    """`check` with one option per gate row (results/figures.py's rows, scenario/gates.py's flags and help), so a
    gate added to a figure row is a flag here with no edit. Typer reads a command's options from
    `inspect.signature`, which honours `__signature__`: the gates on the run's own baseline follow the run
    folder, those against a reference run follow --against (the order `check --help` and the docs list)."""
    from distro_bench.results.figures import gate_signature

    def gate(g: Gate) -> inspect.Parameter:
        return inspect.Parameter(g.key, inspect.Parameter.KEYWORD_ONLY, annotation=float,
                                 default=typer.Option(None, g.flag, min=g.bound[1], help=g.help))

    params = list(gate_signature(_check, gate, eval_str=True).parameters.values())

    def check(**options: Any) -> None:
        _check(**options)

    check.__doc__ = _check.__doc__
    check.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    check.__annotations__ = {p.name: p.annotation for p in params}  # typer resolves each option's type from these
    return check


check = check_command()
