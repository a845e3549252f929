"""`distro-bench project`: bytes and step time per optimizer at any scale, from the projection model."""

from __future__ import annotations

from pathlib import Path

import typer

from distro_bench.cli.console import TABLE_STYLE, cli_errors, console, print_json, print_table, table_records
from distro_bench.cli.options import JSON_OPTION, out_path

PROJECTION_COLUMNS = ["n", "optimizer", "payload tx+rx", "wire each way", "rounds", "comm", "compute", "step"]
ACCOUNTING_COLUMNS = ["optimizer", "payload tx+rx", "ring wire, each way", "paper: from peers"]


def project(
    scenario: Path = typer.Argument(None, help="scenario YAML file (links, hardware, optimizers); not with --published"),
    model: str = typer.Option(None, help="model preset instead of the scenario's (tiny, small, medium, base, llama-1.2b)"),
    workers: list[int] = typer.Option(None, "--workers", "-n", help="worker counts (repeatable); default: the scenario's"),
    optimizer: list[str] = typer.Option(None, "--optimizer", "-o", help="only these optimizers (repeatable)"),
    mfu: float = typer.Option(0.4, min=0.01, max=1.0, help="model FLOPs utilisation for compute time"),
    out: Path = typer.Option(None, parser=out_path, help="folder for projection.json and plots (default results/project-<scenario>-<time>)"),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="draw step time against worker count and bandwidth"),
    published: bool = typer.Option(False, "--published",
                                   help="instead: published figures (distro_bench/data/published/) against their projection"),
    replayed: list[Path] = typer.Option(None, "--replayed", help="with --published: a replay's run folder "
                                        "(scenarios/published/*-replay.yaml) whose figures fill the replayed column (repeatable)"),
    as_json: bool = JSON_OPTION,
) -> None:
    """Project bytes per worker per step and step time per optimizer, with plots against worker count and bandwidth."""
    from rich.table import Table

    from distro_bench import api
    from distro_bench.results.format import fmt_bytes, fmt_seconds, fmt_times

    if published:
        _published(as_json, replayed or [])
        return
    if replayed:
        console.print("error: --replayed: only with --published", markup=False)
        raise typer.Exit(2)
    if scenario is None:
        console.print("error: SCENARIO: missing; give a scenario file, or --published for the published figures",
                      markup=False, soft_wrap=True)
        raise typer.Exit(2)
    with cli_errors():
        st = api.project(scenario, model=model, workers=workers or None, optimizers=optimizer or None, mfu=mfu,
                         out=out, plots=plots)
    if as_json:
        print_json({"out": str(st.out), **st.to_dict()})
        return

    rows = [[str(n), p.optimizer, fmt_bytes(p.payload_tx_bytes + p.payload_rx_bytes), fmt_bytes(p.wire_tx_bytes),
             str(p.rounds), fmt_seconds(p.comm_s), fmt_seconds(p.compute_s), fmt_seconds(p.step_s)]
            for n, projs in st.projections.items() for p in projs]
    t = Table(title=f"projection: {st.scenario}, model {st.model_name}, per worker per step", **TABLE_STYLE)
    for col in PROJECTION_COLUMNS:
        t.add_column(col, justify="left" if col == "optimizer" else "right", no_wrap=True)
    for r in rows:
        t.add_row(*r)
    print_table(t, [(f"{r[1]}, {r[0]} workers", list(zip(PROJECTION_COLUMNS[2:], r[2:]))) for r in rows])

    n_last = max(st.projections)
    acc_rows = [[a["optimizer"], fmt_bytes(a["payload_tx_rx"]), fmt_bytes(a["wire_each_way"]),
                 fmt_bytes(a["paper_style"])] for a in st.accounting]
    acc_rows += [[f"{r['baseline']}/{r['optimizer']}", fmt_times(r["payload_tx_rx"]), fmt_times(r["wire_each_way"]),
                  fmt_times(r["paper_style"])] for r in st.ratios]
    a = Table(title=f"bytes per worker per step, {n_last} workers, three accountings", **TABLE_STYLE)
    for col in ACCOUNTING_COLUMNS:
        a.add_column(col, justify="left" if col == "optimizer" else "right", no_wrap=True)
    for r in acc_rows:
        a.add_row(*r)
    print_table(a, table_records(ACCOUNTING_COLUMNS, acc_rows))
    floors = ", ".join(f"{p.optimizer} {p.floor_ratio:.2f}x" for p in st.projections[n_last] if p.floor_ratio)
    # wrapped at the console's width: one figure per optimizer
    console.print(f"payload over its information floor (log2 C(n, k) bits per chunk's index set, values at their "
                  f"declared bits): {floors}", markup=False)
    p = st.paper
    console.print(f"DisTrO report (1.2B, {p['workers']} workers): AdamW {fmt_bytes(p['adamw_bytes'])}, "
                  f"DisTrO {fmt_bytes(p['distro_bytes'])}, {p['ratio']}x", markup=False, soft_wrap=True)
    for pair, rate in st.crossings_bps.items():
        console.print(f"{pair}: step times cross at about {rate / 1e6:.3g} Mbit/s per link ({n_last} workers)",
                      markup=False, soft_wrap=True)
    console.print(str(st.out), markup=False, soft_wrap=True)


def _published(as_json: bool, replayed: list[Path]) -> None:
    """The published operating points table (docs/projection.md "Published operating points")."""
    from rich.table import Table

    from distro_bench import api
    from distro_bench.studies.published import COLUMNS, as_records, counts_line, table_rows

    with cli_errors():
        results = api.published(replayed)
    if as_json:
        print_json(as_records(results))
        return
    rows = table_rows(results)
    t = Table(title="published operating points against the projection", **TABLE_STYLE)
    for col in COLUMNS:
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(*r)
    print_table(t, table_records(COLUMNS, rows))
    console.print(counts_line(results), markup=False, soft_wrap=True)
