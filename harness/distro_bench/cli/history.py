"""`distro-bench history`: one figure of one scenario over the runs in an index (results/history.py), in time
order with its 95% interval, a change beyond the noise flagged: options -> distro_bench.api.history -> a table."""

from __future__ import annotations

from pathlib import Path

import typer

from distro_bench.cli.console import (
    TABLE_STYLE,
    cli_errors,
    console,
    markup_text,
    print_json,
    print_table,
    table_records,
    terminal_text,
)
from distro_bench.cli.options import JSON_OPTION, out_path


def history(
    index: Path = typer.Option(Path("results/index.parquet"), "--index",
                               help="the index every run appends to (<out>/index.parquet)"),
    scenario: str = typer.Option(None, "--scenario", help="the scenario's name (needed when the index holds several)"),
    figure: str = typer.Option("val_loss_at_equal_time", "--figure", help="a summary key, e.g. time_to_target_s, "
                                                                         "step_time_s_mean, final_val_loss"),
    optimizer: str = typer.Option(None, "--optimizer", help="only this optimizer (default: every one)"),
    plot: Path = typer.Option(None, "--plot", parser=out_path, help="also draw the points into this PNG file"),
    as_json: bool = JSON_OPTION,
) -> None:
    """A figure over runs and commits, changes flagged.

    A run whose interval over seeds does not overlap the previous run's (same optimizer) is flagged CHANGED,
    as asv flags a step; "-" where either has no interval (one seed) or for an optimizer's first run."""
    from rich.table import Table

    from distro_bench import api

    with cli_errors():
        points = api.history(index, figure=figure, scenario=scenario, optimizer=optimizer)
        drawn = api.plot_history(points, figure, plot) if plot is not None and points else None
    if as_json:
        print_json({"figure": figure, "points": [p.__dict__ for p in points],
                    **({"plot": str(drawn)} if drawn is not None else {})})
        return
    cols = ["finished", "commit", "run", "optimizer", figure, "95% interval", "change"]
    rows = [[p.finished[:19], (p.git_commit or "?")[:10], p.run_id, p.optimizer, f"{p.value:.4g}",
             f"[{p.lo:.4g}, {p.hi:.4g}]" if p.lo is not None and p.hi is not None else "-",
             {True: "CHANGED", False: "within noise", None: "-"}[p.changed]] for p in points]
    rows = [[terminal_text(c, oneline=True) for c in r] for r in rows]
    t = Table(title=markup_text(f"{figure} over {len({p.run_id for p in points})} run(s)"), **TABLE_STYLE)
    for c in cols:
        t.add_column(markup_text(c), no_wrap=True)
    for r in rows:
        t.add_row(*[markup_text(c) for c in r])
    print_table(t, table_records(cols, rows, key=2))
    flagged = [p for p in points if p.changed]
    console.print(f"{len(flagged)} change(s) beyond the noise" + (": " + ", ".join(
        f"{p.optimizer} at {(p.git_commit or '?')[:10]} ({p.run_id})" for p in flagged) if flagged else ""),
        markup=False, soft_wrap=True)
    if drawn is not None:
        console.print(str(drawn), markup=False, soft_wrap=True)
