"""Option types shared by the commands: choices as Enums (so --help and shell completion list them),
--json, and --version."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import get_args

import typer

from distro_bench.backends.catalog import CATALOG, NAMES
from distro_bench.scenario.model import LinkEngineName

# The backends' names and options come from their catalog (harness/distro_bench/backends/catalog.py), which imports
# none of them: importing the backends costs start-up time every command would pay.
Backend = Enum("Backend", {n: n for n in NAMES}, type=str)  # type: ignore[misc]  # members from a tuple
Backend.__doc__ = "auto picks the most faithful backend this host can run"
LinkEngine = Enum("LinkEngine", {n: n for n in get_args(LinkEngineName)}, type=str)  # type: ignore[misc]  # from a Literal
LinkEngine.__doc__ = "how delay, jitter and loss are emulated"

BACKEND_HELP = ("auto picks the most faithful one available (docker, then netns, then local); "
                + "; ".join(f"{e.name}: {e.what}" for e in CATALOG.values()))
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

        from distro_bench.scenario.problems import ALLOW_TRACE_OUTSIDE_ENV

        os.environ[ALLOW_TRACE_OUTSIDE_ENV] = "1"


CORPUS_OUTSIDE_HELP = ("read a corpus file or folder (or a local hf: dataset) outside the scenario's folder (refused by "
                       "default: the harness often runs as root)")


def allow_corpus_outside(allow: bool) -> None:
    if allow:  # the scenario loader reads it (harness/distro_bench/scenario/model.py ALLOW_CORPUS_OUTSIDE_ENV)
        import os

        from distro_bench.scenario.problems import ALLOW_CORPUS_OUTSIDE_ENV

        os.environ[ALLOW_CORPUS_OUTSIDE_ENV] = "1"


# Linux's limits on a path and on one name in it, in bytes.
PATH_MAX_BYTES = 4095
NAME_MAX_BYTES = 255


def out_problem(raw: str) -> str | None:
    """What is wrong with an --out value as typed (None: nothing): empty, a NUL or control character, or past
    the system's limits on a path or on one name in it."""
    if raw.strip() == "":
        return "is empty; give a folder (or file) path, e.g. --out results"
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        return "holds a control character (or NUL); a path of printable characters is valid"
    size = len(raw.encode("utf-8", "surrogateescape"))
    if size > PATH_MAX_BYTES:
        return f"is {size:,} bytes long; a path is at most {PATH_MAX_BYTES:,} bytes"
    longest = max((len(p.encode("utf-8", "surrogateescape")) for p in raw.split("/")), default=0)
    if longest > NAME_MAX_BYTES:
        return f"has a name of {longest:,} bytes; each name in a path is at most {NAME_MAX_BYTES} bytes"
    return None


def out_path(raw) -> Path:
    """The `parser` of every --out option: the typed string checked (out_problem), then a Path. Typer turns
    the BadParameter into its usage error: one line and exit 2."""
    if isinstance(raw, Path):  # a default, not typed
        return raw
    problem = out_problem(str(raw))
    if problem:
        shown = repr(raw) if len(repr(raw)) <= 60 else repr(raw)[:55] + "...'"
        raise typer.BadParameter(f"{shown} {problem}", param_hint="--out")
    return Path(raw)


ROOT_WORKERS_HELP = ("accept workers as uid 0 (no capabilities, but owner of every root file) where no unprivileged "
                     "uid can run them; recorded in environment.json and summary.json (default: such a run stops "
                     "before training and says why)")
