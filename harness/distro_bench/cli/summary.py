"""The run summary table that `run` and `node` print (one row per optimizer, units in the cells)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from distro_bench.cli.console import TABLE_STYLE, print_table, table_records

if TYPE_CHECKING:
    from distro_bench.results.summary import Summary

# The bytes column is no one summary key: tx + rx per worker per step on the table's basis, after `comm`.
BYTES_AT, BYTES_COLUMN = 3, "{basis}/step"


def _basis(summary: Summary) -> str:
    """The byte basis of the table: the reductions' where they agree, else results/figures.py's one rule over
    every optimizer."""
    from distro_bench.results.figures import reduction_basis

    known = {s.reduction_basis for s in summary.optimizers.values()} - {None}
    if len(known) == 1:
        return str(known.pop())
    return reduction_basis(summary.optimizers.values())


def summary_columns(summary: Summary) -> list[str]:
    """`optimizer`, then the columns of results/figures.py's rows that have one, the bytes column in its place."""
    from distro_bench.results.figures import columns

    heads = [f.column[1] for f in columns() if f.column]
    heads.insert(BYTES_AT - 1, BYTES_COLUMN.format(basis=_basis(summary)))
    return ["optimizer", *heads]


def summary_rows(summary: Summary) -> list[list[str]]:
    """One row of short cells with units per optimizer (each figure's cell as its row says); `fewer` is baseline
    bytes / this optimizer's, `base` on the baseline's own row."""
    from distro_bench.results.figures import columns
    from distro_bench.results.format import fmt_bytes

    basis = _basis(summary)
    out = []
    for name, s in summary.optimizers.items():
        cells = ["base" if f.key == "reduction_vs_baseline" and name == summary.baseline else f.column[2](s.get(f.key))
                 for f in columns() if f.column]
        cells.insert(BYTES_AT - 1, fmt_bytes(s.bytes_per_step(basis)))
        out.append([name, *cells])
    return out


def print_summary(summary: Summary) -> None:
    from rich.table import Table

    run = summary.run
    cols = summary_columns(summary)
    t = Table(title=f"{run.scenario} ({run.backend}, {run.state}), per worker per step", **TABLE_STYLE)
    for col in cols:
        t.add_column(col, justify="left" if col == "optimizer" else "right", no_wrap=True)
    rows = summary_rows(summary)
    for row in rows:
        t.add_row(*row, style="red" if row[-1] == "DIFFER" else None)
    print_table(t, table_records(cols, rows))
