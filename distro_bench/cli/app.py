"""The `distro-bench` command line. Each command is thin: options -> distro_bench.api -> output.

Output reads in any terminal or log: tables fit the width (else `key: value` lines), progress is plain lines
on stderr when stdout is not a terminal, and `--json` prints machine-readable results on stdout.
"""

from __future__ import annotations

from pathlib import Path

import typer

from distro_bench.cli.options import (
    BACKEND_HELP,
    JSON_OPTION,
    LINK_ENGINE_HELP,
    Backend,
    LinkEngine,
    value,
    version_callback,
)
from distro_bench.run.console import (
    TABLE_STYLE,
    cli_errors,
    console,
    err_console,
    print_json,
    print_table,
    table_records,
)

app = typer.Typer(
    name="distro-bench",
    help="Benchmark DisTrO/DeMo against AdamW + all-reduce on emulated home and WAN networks.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=version_callback, is_eager=True,
                                 help="print the version and exit"),
) -> None:
    """Benchmark DisTrO/DeMo against AdamW + all-reduce on emulated home and WAN networks."""


SUMMARY_COLUMNS = ["optimizer", "step", "comm", "{basis}/step", "fewer", "loss", "val loss", "replicas"]


def _basis(summary) -> str:
    """The byte basis of the table: wire where every optimizer measured it (as reduction_vs_baseline)."""
    known = {s.reduction_basis for s in summary.optimizers.values()} - {None}
    if len(known) == 1:
        return known.pop()
    return "wire" if all(s.wire_tx_bytes_per_step is not None for s in summary.optimizers.values()) else "payload"


def summary_columns(summary) -> list[str]:
    return [c.format(basis=_basis(summary)) for c in SUMMARY_COLUMNS]


def summary_rows(summary) -> list[list[str]]:
    """One row of short cells with units per optimizer; `fewer` is baseline bytes / this optimizer's."""
    from distro_bench.results.format import fmt_bytes, fmt_num, fmt_seconds, fmt_times

    basis = _basis(summary)
    return [[name, fmt_seconds(s.step_time_s_mean), fmt_seconds(s.comm_s_mean), fmt_bytes(s.bytes_per_step(basis)),
             "base" if name == summary.baseline else fmt_times(s.reduction_vs_baseline),
             fmt_num(s.final_loss, ".3f"), fmt_num(s.final_val_loss, ".3f"),
             {True: "same", False: "DIFFER", None: "n/a"}[s.replicas_identical]]
            for name, s in summary.optimizers.items()]


def print_summary(summary) -> None:
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


TRACE_OUTSIDE_HELP = "read trace files outside the scenario's folder (refused by default: the harness often runs as root)"


def _allow_trace_outside(allow: bool) -> None:
    if allow:  # the scenario loader reads it (distro_bench/scenario/model.py ALLOW_TRACE_OUTSIDE_ENV)
        import os

        from distro_bench.scenario.model import ALLOW_TRACE_OUTSIDE_ENV

        os.environ[ALLOW_TRACE_OUTSIDE_ENV] = "1"


@app.command()
def run(
    scenario: Path = typer.Argument(..., help="scenario YAML file"),
    backend: Backend = typer.Option("auto", help=BACKEND_HELP),
    optimizer: list[str] = typer.Option(None, "--optimizer", "-o", help="run only these optimizers (repeatable)"),
    steps: int = typer.Option(None, min=1, help="budget: train N steps (replaces the scenario's budget)"),
    time_budget: str = typer.Option(None, "--time-budget", help="budget: training seconds per optimizer, e.g. 300s"),
    tokens: str = typer.Option(None, help="budget: tokens per optimizer (all workers), e.g. 2M"),
    target_val_loss: float = typer.Option(None, "--target-val-loss",
                                          help="budget: stop at this val loss (capped by the steps or time budget)"),
    repeat: int = typer.Option(None, min=1, max=100, help="run each optimizer K times, seeds seed..seed+K-1"),
    out: Path = typer.Option(Path("results"), help="folder that receives the run folder"),
    seed: int = typer.Option(None, min=0, help="override train.seed"),
    link_engine: LinkEngine = typer.Option(None, help=LINK_ENGINE_HELP, show_default=False),
    allow_unemulated: bool = typer.Option(None, "--allow-unemulated/--no-allow-unemulated", show_default=False,
                                          help="run even if part of a link cannot be emulated here (the report says "
                                               "what); default: the scenario's network.allow_unemulated"),
    image: str = typer.Option(None, help="docker backend: worker image (default: distro-bench-worker:<version>)"),
    measure_links: bool = typer.Option(None, "--measure-links/--no-measure-links", show_default=False,
                                       help="measure each node's goodput and RTT once the links are up (a few "
                                            "seconds; the report's 'measured'); default: network.measure_links"),
    allow_trace_outside: bool = typer.Option(False, "--allow-trace-outside", help=TRACE_OUTSIDE_HELP),
    as_json: bool = JSON_OPTION,
) -> None:
    """Train every optimizer of SCENARIO on emulated links and write a run folder (its path is the last line)."""
    from distro_bench import api
    from distro_bench.run.overrides import Overrides
    from distro_bench.run.progress import make_progress

    _allow_trace_outside(allow_trace_outside)

    with cli_errors():
        overrides = Overrides(backend=value(backend) or "auto", optimizers=optimizer or None, steps=steps, seed=seed,
                              time_budget=time_budget, tokens=tokens, target_val_loss=target_val_loss, repeat=repeat,
                              out=out, link_engine=value(link_engine), allow_unemulated=allow_unemulated, image=image,
                              measure_links=measure_links)
        # With --json, stdout carries only the JSON document: progress goes to stderr as plain lines.
        with make_progress(interactive=False if as_json else None) as progress:
            result = api.run(scenario, overrides, progress=progress)
    if as_json:
        print_json({"run_dir": str(result.run_dir), "state": result.state, "summary": result.summary.to_dict()})
        return
    print_summary(result.summary)
    from distro_bench.report.verdict import ranking_lines, verdict_lines

    for line in verdict_lines(result.summary.to_dict()) + ranking_lines(result.summary.to_dict()):
        console.print(line, markup=False)  # wrapped at the terminal's (or 80) columns
    for line in result.summary.verdicts():
        console.print(line, markup=False, soft_wrap=True)
    if (Path(result.run_dir) / "events.parquet").is_file():  # issue 18: what the network's changes cost each
        from distro_bench.report.events_section import loss_sentences
        from distro_bench.report.load import load_for_report

        for line in loss_sentences(load_for_report(result.run_dir).events):
            console.print(line, markup=False)
    console.print(str(result.run_dir), markup=False, soft_wrap=True)


@app.command()
def validate(
    scenario: Path = typer.Argument(..., help="scenario YAML file"),
    allow_trace_outside: bool = typer.Option(False, "--allow-trace-outside", help=TRACE_OUTSIDE_HELP),
    as_json: bool = JSON_OPTION,
) -> None:
    """Check SCENARIO and show it resolved (presets expanded, units normalised); exit 2 on any problem,
    all problems listed at once."""
    from distro_bench import api
    from distro_bench.errors import ScenarioError

    _allow_trace_outside(allow_trace_outside)

    if as_json:
        try:
            s = api.validate(scenario)
        except ScenarioError as e:
            print_json({"valid": False, "source": e.source, "problems": e.problems})
            raise typer.Exit(e.exit_code) from None
        print_json(_scenario_json(s))
        return
    with cli_errors():
        s = api.validate(scenario)
    from rich.table import Table

    from distro_bench.results.format import fmt_num

    cols = ["rank", "node", "hardware", "speed", "link", "up/down delay loss"]
    rows = [[str(n.rank), n.name, n.hardware_name, f"{fmt_num(n.compute_scale, '.2f')}x", n.link_name or "-",
             _link_cell(n.link)] for n in s.nodes()]
    b = s.budget().as_dict()
    t = Table(title=f"{s.name}: {s.world_size} workers, model {s.model.preset or 'custom'}, budget {b['kind']} {b['value']:g}",
              **TABLE_STYLE)
    for c in cols:
        t.add_column(c, no_wrap=True)
    for r in rows:
        t.add_row(*r)
    print_table(t, table_records(cols, rows, key=1))
    console.print(f"optimizers: {', '.join(f'{k} ({v.type})' for k, v in s.optimizer_configs().items())}; "
                  f"baseline: {s.baseline}", markup=False)
    for line in _timeline_lines(s):
        console.print(line, markup=False, soft_wrap=True)
    for line in _region_lines(s):
        console.print(line, markup=False, soft_wrap=True)
    console.print(f"[green]{scenario} is valid[/]")


def _region_lines(s) -> list[str]:
    """The delay between the regions the workers are in (geo-distributed scenarios; distro_bench/scenario/regions.py)."""
    from distro_bench.scenario.model import region_matrix
    from distro_bench.scenario.regions import describe_lines

    m = region_matrix(s)
    return describe_lines(m, [n.region for n in s.nodes()]) if m is not None else []


def _timeline_lines(s) -> list[str]:
    """What changes while each optimizer trains (link schedules, outages, stragglers, traces), in order."""
    from distro_bench.scenario.timeline import compile_timeline

    tl = compile_timeline(s)
    if not tl:
        return []
    lines = ["changes during each optimizer's run (clock: from its first step):"]
    lines += [f"  {c.trigger}: {c.describe()}" for c in tl.changes]
    lines += [f"  {t.node} {t.direction} rate follows {t.path.name} every {t.resolution_s * 1e3:g} ms" for t in tl.traces]
    return lines


def _link_cell(link) -> str:
    """`10Mbit/50Mbit 15ms±3ms 0.1%` (up/down, one-way delay ± jitter, loss): short enough for 80 columns."""
    if link is None:
        return "unshaped"
    from distro_bench.scenario.units import format_duration, format_percent, format_rate

    parts = [f"{format_rate(link.up) if link.up else '-'}/{format_rate(link.down) if link.down else '-'}"]
    if link.delay:
        parts.append(format_duration(link.delay) + (f"±{format_duration(link.jitter)}" if link.jitter else ""))
    if link.loss:
        parts.append(format_percent(link.loss))
    return " ".join(parts)


def _scenario_json(s) -> dict:
    return {
        "valid": True, "name": s.name, "world_size": s.world_size, "baseline": s.baseline,
        "model": s.resolved_model(),
        "train": s.train.model_dump(mode="json"),
        "nodes": [{"rank": n.rank, "name": n.name, "hardware": n.hardware_name, "compute_scale": n.compute_scale,
                   "link": n.link_name,
                   "up_bps": n.link.up if n.link else None, "down_bps": n.link.down if n.link else None,
                   "delay_s": n.link.delay if n.link else 0.0, "jitter_s": n.link.jitter if n.link else 0.0,
                   "loss": n.link.loss if n.link else 0.0, "region": n.region} for n in s.nodes()],
        "optimizers": {k: v.model_dump() for k, v in s.optimizer_configs().items()},
        "regions": _regions_json(s),
    }


def _regions_json(s) -> list[dict] | None:
    from distro_bench.scenario.model import region_matrix
    from distro_bench.scenario.regions import describe_json

    m = region_matrix(s)
    return describe_json(m, [n.region for n in s.nodes()]) if m is not None else None


@app.command()
def schema(
    out: Path = typer.Option(None, "--out", help="write to this file instead of stdout"),
) -> None:
    """Print the JSON Schema of a scenario file (for editors: `# yaml-language-server: $schema=...`)."""
    import json

    from distro_bench import api

    text = json.dumps(api.schema(), indent=2) + "\n"
    if out:
        out.write_text(text)
        err_console.print(f"wrote {out}", markup=False)
    else:
        typer.echo(text, nl=False)


from distro_bench.cli.report import check as _check  # noqa: E402
from distro_bench.cli.report import report as _report

app.command(name="report")(_report)
app.command(name="check")(_check)

from distro_bench.cli.net import doctor as _doctor  # noqa: E402
from distro_bench.cli.net import links as _links

app.command(name="doctor")(_doctor)
app.command(name="links")(_links)

from distro_bench.cli.docker import clean as _clean  # noqa: E402
from distro_bench.cli.docker import image_app as _image_app

app.add_typer(_image_app, name="image")
app.command(name="clean")(_clean)

from distro_bench.cli.project import project as _project  # noqa: E402

app.command(name="project")(_project)

from distro_bench.cli.export import export as _export  # noqa: E402

app.command(name="export")(_export)

from distro_bench.cli.sweep import sweep as _sweep  # noqa: E402

app.command(name="sweep")(_sweep)

from distro_bench.cli.node import node as _node  # noqa: E402

app.command(name="node")(_node)


if __name__ == "__main__":
    app()
