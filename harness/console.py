"""Rich console output shared by the CLI commands, and the one place library errors become exit codes."""

from __future__ import annotations

from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape

from harness.errors import HarnessError, ScenarioError, WorkerFailed

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


@contextmanager
def cli_errors():
    """Turn our errors into readable lines and the contract's exit codes; never a traceback."""
    try:
        yield
    except ScenarioError as e:
        err_console.print(f"[bold red]error:[/] {escape(e.source)}: {len(e.problems)} problem(s)")
        for p in e.problems:
            err_console.print(f"  {escape(p)}")
        raise typer.Exit(e.exit_code) from None
    except WorkerFailed as e:
        err_console.print(f"[bold red]error:[/] {escape(str(e))}")
        if e.log_tail:
            err_console.print("[dim]--- last lines of its log ---[/]")
            err_console.print(escape(e.log_tail), markup=False)
        raise typer.Exit(e.exit_code) from None
    except HarnessError as e:
        err_console.print(f"[bold red]error:[/] {escape(str(e))}")
        raise typer.Exit(e.exit_code) from None
    except KeyboardInterrupt:
        err_console.print("[bold red]interrupted[/]")
        raise typer.Exit(130) from None
