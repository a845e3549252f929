"""CLI commands for containers: `distro-bench image build` and `distro-bench clean`."""

from __future__ import annotations

import typer
from rich.markup import escape

from distro_bench.cli.console import cli_errors, console

image_app = typer.Typer(help="The worker image the docker backend runs (and the node image of `export k8s`).",
                        no_args_is_help=True)


@image_app.command("build")
def image_build(
    offline: bool = typer.Option(False, help="no registry: the debootstrap base (built if missing) and a wheelhouse "
                                             "downloaded on this host; the build runs without network"),
    base: str = typer.Option(None, help="base image (default: a CUDA/PyTorch image; with --offline the local "
                                        "Debian base distro-bench-base:bookworm)"),
    tag: str = typer.Option(None, help="image tag (default: distro-bench-worker:<harness version>, with --node "
                                       "distro-bench-node:<harness version>)"),
    node: bool = typer.Option(False, "--node", help="also build the node image of `export k8s` on the worker image: "
                                                    "the distro-bench command, tc, the CLI's deps"),
    force: bool = typer.Option(False, help="build even when an image with the same build key exists"),
    no_cache: bool = typer.Option(False, "--no-cache", help="rebuild every layer (implies --force)"),
    with_packages: list[str] = typer.Option(None, "--with", help="a distribution of your own to install into the "
                                            "worker image (a method: docs/extending.md): its folder (with "
                                            "pyproject.toml) or a wheel; repeatable"),
) -> None:
    """Build the worker image (wheelhouse, then `docker build`, with progress); skipped when up to date."""
    from distro_bench import api

    with cli_errors(), console.status("preparing", spinner="dots") as status:
        def progress(line: str) -> None:
            if not line.startswith("  "):
                console.print(escape(line))
            elif line.lstrip().startswith("Step "):
                step = " ".join(line.split())  # one line per step: RUN commands span many
                width = max(40, console.width - 1)
                console.print(f"[dim]{escape(step if len(step) <= width else step[:width - 3] + '...')}[/]")
            else:
                status.update(escape(line.strip()[:100]))

        r = api.build_image(offline=offline, base=base, tag=tag, node=node, force=force, no_cache=no_cache,
                            progress=progress, with_packages=list(with_packages or []))
    what = "up to date" if r.cached else "built"
    console.print(f"[green]{r.tag}[/] {what}: {r.id[7:19]}, {r.size_bytes / 1e6:.0f} MB, base {r.base}, {r.seconds:.1f}s")


def clean(
    force: bool = typer.Option(False, "--force", help="also remove what runs that are still going use"),
) -> None:
    """Remove anything a finished or killed run left behind: containers and networks labelled distro-bench,
    dbench-* namespaces. Runs still in progress are left alone unless --force.

    Also delay lines' /tmp/dbench-delayline-* folders. A run's liveness is judged from the owner recorded on
    what it made (host, boot id, pid and its start time); what cannot be proven dead (another host's, an
    older harness's) is kept and named, exit 1. A run that --force ends says so in its status."""
    from distro_bench import api

    with cli_errors():
        result = api.clean(force=force)
    failed = False
    for backend, removed in result.removed.items():
        for r in removed:
            console.print(f"removed {escape(r)} [dim]({backend})[/]")
    for backend, problems in result.problems.items():
        for p in problems:
            failed = True
            console.print(f"[red]could not remove[/] {escape(p)} [dim]({backend})[/]")
    if not any(result.removed.values()) and not failed:
        console.print("nothing to clean")
    if failed:
        raise typer.Exit(1)
