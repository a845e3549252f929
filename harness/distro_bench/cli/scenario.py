"""`distro-bench validate` (a scenario checked and shown resolved) and `distro-bench schema` (its JSON Schema):
options -> distro_bench.api -> Rich output. Registered in harness/distro_bench/cli/app.py."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from distro_bench.cli.console import (
    TABLE_STYLE,
    cli_errors,
    console,
    err_console,
    markup_text,
    print_json,
    print_table,
    stdout,
    table_records,
    terminal_text,
)
from distro_bench.cli.options import (
    CORPUS_OUTSIDE_HELP,
    JSON_OPTION,
    TRACE_OUTSIDE_HELP,
    allow_corpus_outside,
    out_path,
)
from distro_bench.cli.options import allow_trace_outside as permit_trace_outside
from distro_bench.scenario import environ

if TYPE_CHECKING:
    from distro_bench.scenario.model import LinkSpec, Scenario


def validate(
    scenario: Path = typer.Argument(..., help="scenario YAML file"),
    allow_trace_outside: bool = typer.Option(False, "--allow-trace-outside", help=TRACE_OUTSIDE_HELP),
    allow_corpus_outside_: bool = typer.Option(False, "--allow-corpus-outside", help=CORPUS_OUTSIDE_HELP),
    as_json: bool = JSON_OPTION,
) -> None:
    """Check SCENARIO and show it resolved (presets expanded, units normalised); exit 2 on any problem,
    all problems listed at once."""
    from distro_bench import api

    permit_trace_outside(allow_trace_outside)
    allow_corpus_outside(allow_corpus_outside_)

    if as_json:
        _validate_json(scenario)
        return
    with cli_errors():
        s = api.validate(scenario)
    from rich.table import Table

    from distro_bench.results.format import fmt_num

    cols = ["rank", "node", "hardware", "speed", "link", "up/down delay, impairments"]
    # Names follow the scenario's name rule; escaped all the same, as everything a scenario sets that is printed.
    from distro_bench.scenario.model import model_label

    rows = [[str(n.rank), markup_text(n.name), markup_text(n.hardware_name), f"{fmt_num(n.compute_scale, '.2f')}x",
             markup_text(n.link_name or "-"), _link_cell(n.link)] for n in s.nodes()]
    b = s.budget().as_dict()
    t = Table(title=markup_text(f"{s.name}: {s.world_size} workers, model {model_label(s.model)}, "
                                f"budget {b['kind']} {b['value']:g}"), **TABLE_STYLE)
    for c in cols:
        t.add_column(c, no_wrap=True)
    for r in rows:
        t.add_row(*r)
    print_table(t, table_records(cols, rows, key=1))
    console.print(terminal_text(f"optimizers: {', '.join(f'{k} ({v.type})' for k, v in s.optimizer_configs().items())}; "
                                f"baseline: {s.baseline}"), markup=False)
    console.print(terminal_text(f"data: {s.data.tokens or s.data.corpus}; losses in {s.loss_unit()}"), markup=False,
                  soft_wrap=True)
    from distro_bench.scenario.problems import vocab_mismatch

    if s.replay is None and (mismatch := vocab_mismatch(s)):
        console.print(terminal_text(f"note: {mismatch} (valid to project; `run` refuses it)"), markup=False,
                      soft_wrap=True)
    for line in _timeline_lines(s):
        console.print(terminal_text(line), markup=False, soft_wrap=True)
    for line in _region_lines(s) + _site_lines(s):
        console.print(terminal_text(line), markup=False, soft_wrap=True)
    console.print(f"[green]{markup_text(scenario)} is valid[/]", soft_wrap=True)  # a path is never broken in two


def _validate_json(scenario: Path) -> None:
    """Print `validate --json`'s document (distro_bench.api.validate_document); on bad input `{"valid": false,
    "problems": [...]}` and exit 2, on a bug of ours `{"valid": false, "internal_error": ...}` and exit 1 (the
    traceback in a file): never a raw traceback, whatever the scenario holds."""
    import os

    from distro_bench import api

    try:
        result = api.validate_document(scenario)
    except Exception as e:  # a bug of ours: JSON all the same; the traceback in a file
        if os.environ.get(environ.DEBUG):
            raise
        import tempfile
        import traceback

        with tempfile.NamedTemporaryFile("w", prefix="distro-bench-error-", suffix=".txt", delete=False) as f:
            traceback.print_exc(file=f)
        print_json({"valid": False, "source": str(scenario),
                    "internal_error": f"{type(e).__name__}: {str(e)[:500]}", "traceback_file": f.name})
        raise typer.Exit(1) from None
    print_json(result.document)
    if not result.valid:
        raise typer.Exit(result.exit_code)


def _region_lines(s: Scenario) -> list[str]:
    """The delay between the regions the workers are in (geo-distributed scenarios; harness/distro_bench/scenario/regions.py)."""
    from distro_bench.scenario.model import region_matrix
    from distro_bench.scenario.regions import describe_lines

    m = region_matrix(s)
    return describe_lines(m, [n.region for n in s.nodes() if n.region is not None]) if m is not None else []


def _site_lines(s: Scenario) -> list[str]:
    """The sites' shared uplinks and the WAN paths between them (harness/distro_bench/scenario/sites.py)."""
    from distro_bench.scenario.model import site_layout
    from distro_bench.scenario.sites import describe_lines

    lay = site_layout(s)
    return describe_lines(lay, [n.name for n in s.nodes()]) if lay is not None else []


def _timeline_lines(s: Scenario) -> list[str]:
    """What changes while each optimizer trains (link schedules, outages, stragglers, traces), in order."""
    from distro_bench.scenario.timeline import compile_timeline

    tl = compile_timeline(s)
    if not tl:
        return []
    lines = ["changes during each optimizer's run (clock: from its first step):"]
    lines += [f"  {c.trigger}: {c.describe()}" for c in tl.changes]
    lines += [f"  {t.node} {t.direction} rate follows {t.path.name} every {t.resolution_s * 1e3:g} ms" for t in tl.traces]
    return lines


def _link_cell(link: LinkSpec | None) -> str:
    """`10Mbit/50Mbit 15ms±3ms loss 0.1%` (up/down, one-way delay ± jitter, then every other impairment that is
    set, from the table in harness/distro_bench/scenario/impairments.py): short enough for 80 columns."""
    if link is None:
        return "unshaped"
    from distro_bench.scenario.impairments import describe_parts
    from distro_bench.scenario.units import format_rate

    rates = f"{format_rate(link.up) if link.up else '-'}/{format_rate(link.down) if link.down else '-'}"
    return " ".join([rates, *describe_parts(link.impairments(), short=True)])


def schema(
    out: Path = typer.Option(None, "--out", help="write to this file instead of stdout", parser=out_path),
) -> None:
    """Print the JSON Schema of a scenario file (for editors: `# yaml-language-server: $schema=...`)."""
    import json

    from distro_bench import api

    text = json.dumps(api.schema(), indent=2) + "\n"
    if out:
        out.write_text(text)
        err_console.print(terminal_text(f"wrote {out}"), markup=False)
    else:
        stdout.write(text)
