"""`distro-bench report` and `distro-bench check`: thin wrappers over harness.report."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from harness.console import cli_errors, console, err_console


def report(
    run_dirs: list[Path] = typer.Argument(..., help="one run folder (its report) or several (a comparison)"),
    out: Path = typer.Option(None, help="output folder (default: the run folder itself; for a comparison "
                                        "results/compare-<timestamp>/)"),
) -> None:
    """Write report.md, report.html and plots/*.png for a run, or compare several runs."""
    from harness.report import write_comparison, write_run_report
    from harness.report.compare import default_out
    from harness.report.load import load_for_report

    with cli_errors():
        if len(run_dirs) == 1:
            run = load_for_report(run_dirs[0])
            for note in filter(None, [run.state_note(), *run.notes]):
                err_console.print(f"[yellow]note:[/] {escape(note)}")
            paths = write_run_report(run_dirs[0], out)
        else:
            paths = write_comparison(run_dirs, out or default_out())
        for p in paths[2:]:
            console.print(f"  {p}", markup=False, soft_wrap=True)
        console.print(f"Markdown: {paths[0]}", markup=False, soft_wrap=True)
        console.print(str(paths[1]), markup=False, soft_wrap=True)


def check(
    run_dir: Path = typer.Argument(..., help="run folder"),
    min_reduction: float = typer.Option(None, min=0, help="candidate must send at least X times fewer bytes than the baseline (default: the scenario's checks.min_reduction)"),
    max_loss_gap: float = typer.Option(None, min=0, help="candidate's final val loss may exceed the baseline's by at most Y (default: checks.max_loss_gap)"),
    baseline: str = typer.Option(None, help="optimizer to compare against (default: the scenario's baseline)"),
    candidate: list[str] = typer.Option(None, "--candidate", help="optimizer(s) to check (repeatable; default: checks.candidate or every non-baseline optimizer)"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON (for machines)"),
) -> None:
    """The CI gate: exit 0 when every check passes, 1 when any fails, 2 on a bad run folder or flag."""
    from harness.report.check import FAIL, PASS, measured_text, run_checks
    from harness.report.load import load_for_report

    with cli_errors():
        run = load_for_report(run_dir)
        result = run_checks(run, min_reduction=min_reduction, max_loss_gap=max_loss_gap, baseline=baseline,
                            candidates=candidate or None)
    if as_json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        for note in filter(None, [run.state_note(), *run.notes]):
            err_console.print(f"[yellow]note:[/] {escape(note)}")
        t = Table(title=f"check {escape(run.data.name)} (baseline {escape(str(result.baseline))})")
        for col in ("check", "optimizer", "measured", "threshold", "result", "note"):
            t.add_column(col, justify="right" if col == "measured" else "left")
        colour = {PASS: "green", FAIL: "bold red"}
        for r in result.results:
            t.add_row(escape(r.check), escape(r.optimizer or "-"), escape(measured_text(r)), escape(r.threshold),
                      f"[{colour.get(r.status, 'dim')}]{r.status}[/]", escape(r.note))
        console.print(t)
        failed = sum(r.status == FAIL for r in result.results)
        console.print("[green]all checks passed[/]" if not failed else f"[bold red]{failed} check(s) failed[/]")
    if not result.passed:
        raise typer.Exit(1)
