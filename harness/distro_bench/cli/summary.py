"""The run summary table that `run` and `node` print (one row per optimizer, units in the cells)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from distro_bench.cli.console import TABLE_STYLE, print_table, table_records

if TYPE_CHECKING:
    from distro_bench.results.summary import Summary

SUMMARY_COLUMNS = ["optimizer", "step", "comm", "{basis}/step", "fewer", "loss", "val loss", "replicas"]


def _basis(summary: Summary) -> str:
    """The byte basis of the table: wire where every optimizer measured it (as reduction_vs_baseline)."""
    known = {s.reduction_basis for s in summary.optimizers.values()} - {None}
    if len(known) == 1:
        return str(known.pop())
    return "wire" if all(s.wire_tx_bytes_per_step is not None for s in summary.optimizers.values()) else "payload"


def summary_columns(summary: Summary) -> list[str]:
    return [c.format(basis=_basis(summary)) for c in SUMMARY_COLUMNS]


def summary_rows(summary: Summary) -> list[list[str]]:
    """One row of short cells with units per optimizer; `fewer` is baseline bytes / this optimizer's."""
    from distro_bench.results.format import fmt_bytes, fmt_num, fmt_seconds, fmt_times

    basis = _basis(summary)
    return [[name, fmt_seconds(s.step_time_s_mean), fmt_seconds(s.comm_s_mean), fmt_bytes(s.bytes_per_step(basis)),
             "base" if name == summary.baseline else fmt_times(s.reduction_vs_baseline),
             fmt_num(s.final_loss, ".3f"), fmt_num(s.final_val_loss, ".3f"),
             {True: "same", False: "DIFFER", None: "n/a"}[s.replicas_identical]]
            for name, s in summary.optimizers.items()]


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
