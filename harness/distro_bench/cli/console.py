"""Rich console output shared by the CLI commands, and the one place library errors become exit codes."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from io import StringIO
from pathlib import Path
from typing import Literal, TypedDict

import typer
from rich.box import Box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from distro_bench.errors import HarnessError, InputError, ScenarioError, WorkerFailed, terminal_text
from distro_bench.results.runfiles import read_json
from distro_bench.scenario import environ


class _Stdout:
    """sys.stdout (looked up at each write, as Rich does, so redirections and test runners still work) that
    outlives its reader: when `distro-bench run ... | head` closes the pipe, what is printed afterwards goes
    to /dev/null and the command goes on to its end (a run completes and keeps its folder) instead of
    failing on a BrokenPipeError. Python's documented way: point fd 1 at /dev/null."""

    def __getattr__(self, name):  # isatty, fileno, encoding, ...: the real stream's
        return getattr(sys.stdout, name)

    def _dropped(self) -> None:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # no fd (a test runner's buffer): nothing to point elsewhere
            pass

    def write(self, text: str) -> int:
        try:
            return sys.stdout.write(text)
        except BrokenPipeError:
            self._dropped()
            return len(text)

    def flush(self) -> None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            self._dropped()


class SafeConsole(Console):
    """A Rich console that shows every control character of what it is given visibly (errors.terminal_text):
    strings, and a table's title, headers and cells. Strings from a run folder, a scenario or another host
    reach the terminal through here, so an ESC sequence or U+202E in them cannot drive or reorder it, even
    where a caller forgot. Rich markup is the caller's to escape (markup_text) where the string is markup."""

    def print(self, *objects, **kwargs) -> None:
        super().print(*(_shown(o) for o in objects), **kwargs)


def _shown(obj):
    if isinstance(obj, str):
        return terminal_text(obj)
    if isinstance(obj, Table):
        if isinstance(obj.title, str):
            obj.title = terminal_text(obj.title)
        for col in obj.columns:
            if isinstance(col.header, str):
                col.header = terminal_text(col.header)
            col._cells = [terminal_text(c) if isinstance(c, str) else c for c in col._cells]
    return obj


stdout = _Stdout()
console = SafeConsole(file=stdout, highlight=False)  # type: ignore[arg-type]  # a file-like object
err_console = SafeConsole(stderr=True, highlight=False, soft_wrap=True)

def markup_text(text: object, *, oneline: bool = False) -> str:
    """`text` for a Rich string with markup: control characters escaped (errors.terminal_text, the one escape
    for the terminal), and `[` read as itself."""
    return escape(terminal_text(text, oneline=oneline))


@contextmanager
def cli_errors():
    """Turn our errors into readable lines and the contract's exit codes; never a traceback."""
    try:
        yield
    except (typer.Exit, typer.Abort):  # a command's own exit code (click's Exit is a RuntimeError): not a bug
        raise
    except ScenarioError as e:
        err_console.print(f"[bold red]error:[/] {markup_text(e.source)}: {len(e.problems)} problem(s)")
        for p in e.problems:
            err_console.print(f"  {markup_text(p)}")
        raise typer.Exit(e.exit_code) from None
    except WorkerFailed as e:
        err_console.print(f"[bold red]error:[/] {markup_text(e)}")
        if e.log_tail:
            err_console.print("[dim]--- last lines of its log ---[/]")
            err_console.print(terminal_text(e.log_tail), markup=False)
        raise typer.Exit(e.exit_code) from None
    except HarnessError as e:
        err_console.print(f"[bold red]error:[/] {markup_text(e)}")
        raise typer.Exit(e.exit_code) from None
    except KeyboardInterrupt:
        err_console.print("[bold red]interrupted[/]")
        raise typer.Exit(130) from None
    except Exception as e:  # a bug of ours: one line here, the traceback in a file for the report
        if os.environ.get(environ.DEBUG):
            raise
        import tempfile
        import traceback

        with tempfile.NamedTemporaryFile("w", prefix="distro-bench-error-", suffix=".txt", delete=False) as f:
            traceback.print_exc(file=f)
        err_console.print(f"[bold red]internal error:[/] {markup_text(type(e).__name__)}: {markup_text(str(e)[:500])}. "
                          f"This is a bug in distro-bench; the traceback is in {markup_text(f.name)} "
                          "(DISTRO_BENCH_DEBUG=1 shows it here)")
        raise typer.Exit(1) from None


# Tables for any terminal or log: no borders, two spaces between columns, title on the left.
class TableStyle(TypedDict):
    """The keyword arguments every table of ours passes to rich's Table (typed, so `Table(**TABLE_STYLE)` checks)."""

    box: Box | None
    pad_edge: bool
    padding: tuple[int, int]
    title_justify: Literal["default", "left", "center", "right", "full"]
    header_style: str


TABLE_STYLE: TableStyle = {"box": None, "pad_edge": False, "padding": (0, 1), "title_justify": "left",
                           "header_style": "bold"}


def natural_width(renderable) -> int:
    """Columns the renderable takes when nothing has to wrap."""
    buf = StringIO()
    probe = Console(file=buf, width=10_000, highlight=False, color_system=None)
    probe.print(renderable)
    return max((len(line.rstrip()) for line in buf.getvalue().splitlines()), default=0)


def print_table(table, records: list[tuple[str, list[tuple[str, str]]]] | None = None, out: Console | None = None) -> None:
    """The table where it fits the terminal; otherwise `key: value` lines (one block per record), so no cell
    is ever cut to `opti…` in a narrow terminal or an 80-column log."""
    out = out or console
    if records is None or natural_width(table) <= out.width:
        out.print(table)
        return
    if table.title:
        out.print(str(table.title), markup=False)
    for title, pairs in records:
        out.print(title, markup=False)
        for k, v in pairs:
            out.print(f"  {k}: {v}", markup=False, soft_wrap=True)


def table_records(table_columns: list[str], rows: list[list[str]], key: int = 0) -> list[tuple[str, list[tuple[str, str]]]]:
    """`key: value` records of plain rows (the first column names the record)."""
    return [(row[key], [(c, v) for i, (c, v) in enumerate(zip(table_columns, row)) if i != key]) for row in rows]


def print_json(obj) -> None:
    """Machine output on stdout: plain JSON, numbers as numbers (no Rich markup or wrapping)."""
    stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
    stdout.flush()


def unemulated_line(run_dir: Path) -> str | None:
    """The line `run` prints above its verdict where the scenario's links were shaped but the network was not
    emulated (the local backend's loopback): the verdict's times are this host's, not the scenario's links'."""
    try:  # read as every run-folder file is (results/runfiles.py)
        env = read_json(Path(run_dir), "environment.json")
    except (OSError, InputError):
        return None
    net = env.get("network") if isinstance(env, dict) else None
    if not isinstance(net, dict) or net.get("network_emulated") is not False or not net.get("not_emulated"):
        return None
    return (f"NOT EMULATED: the scenario's links were not emulated ({net.get('backend', 'this')} backend, loopback): "
            "their rates, delays and loss did not apply, so step and communication times and the verdict below "
            "are this host's loopback, not the scenario's network (bytes per step are the scenario's). "
            "Emulate them as root with --backend netns or docker.")
