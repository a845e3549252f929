"""Option types shared by the commands: choices as Enums (so --help and shell completion list them),
--json, and --version."""

from __future__ import annotations

from enum import Enum
from typing import get_args

import typer

from distro_bench.scenario.model import LinkEngineName

# Names of harness/distro_bench/backends BACKENDS (a unit test keeps them in step); not imported here: importing the
# backends costs start-up time every command would pay.
BACKEND_NAMES = ("auto", "local", "netns", "docker")

Backend = Enum("Backend", {n: n for n in BACKEND_NAMES}, type=str)  # type: ignore[misc]  # members from a tuple
Backend.__doc__ = "auto picks the most faithful backend this host can run"
LinkEngine = Enum("LinkEngine", {n: n for n in get_args(LinkEngineName)}, type=str)  # type: ignore[misc]  # from a Literal
LinkEngine.__doc__ = "how delay, jitter and loss are emulated"

BACKEND_HELP = "auto picks the most faithful one available (docker, then netns, then local)"
LINK_ENGINE_HELP = ("how delay, jitter and loss are emulated: tc (netem), userspace (a delay line), or auto "
                    "(default: the scenario's network.link_engine)")

JSON_OPTION = typer.Option(False, "--json", help="print the result as JSON on stdout (numbers as numbers)")


def value(choice) -> str | None:
    """An Enum choice's plain name (None stays None)."""
    return None if choice is None else getattr(choice, "value", choice)


def version_callback(show: bool) -> None:
    if show:
        from distro_bench import __version__

        typer.echo(f"distro-bench {__version__}")
        raise typer.Exit()


TRACE_OUTSIDE_HELP = "read trace files outside the scenario's folder (refused by default: the harness often runs as root)"


def allow_trace_outside(allow: bool) -> None:
    if allow:  # the scenario loader reads it (harness/distro_bench/scenario/model.py ALLOW_TRACE_OUTSIDE_ENV)
        import os

        from distro_bench.scenario.model import ALLOW_TRACE_OUTSIDE_ENV

        os.environ[ALLOW_TRACE_OUTSIDE_ENV] = "1"
