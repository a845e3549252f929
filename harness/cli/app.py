"""The `distro-bench` command line. Each command is thin: options -> library call -> Rich output."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from harness.console import cli_errors, console

app = typer.Typer(
    name="distro-bench",
    help="Benchmark DisTrO/DeMo against AdamW + all-reduce on emulated home and WAN networks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

BACKEND_HELP = "auto | local | netns | docker (auto picks the most faithful one available)"


def _fmt(v, spec: str = ".3g") -> str:
    if v is None:
        return "n/a"
    return format(v, spec) if isinstance(v, (int, float)) else str(v)


def summary_table(summary: dict) -> Table:
    t = Table(title=f"{summary['run']['scenario']} ({summary['run']['backend']}, {summary['run']['state']})")
    for col in ("optimizer", "step time s", "compute s", "comm s", "payload MB/step", "wire MB/step",
                "reduction", "final loss", "val loss", "replicas"):
        t.add_column(col, justify="left" if col == "optimizer" else "right")
    for name, s in summary["optimizers"].items():
        payload = (s["payload_tx_bytes_per_step"] or 0) + (s["payload_rx_bytes_per_step"] or 0)
        wire = None if s["wire_tx_bytes_per_step"] is None else s["wire_tx_bytes_per_step"] + s["wire_rx_bytes_per_step"]
        red = s["reduction_vs_baseline"]
        t.add_row(name, _fmt(s["step_time_s_mean"]), _fmt(s["compute_s_mean"]), _fmt(s["comm_s_mean"]),
                  _fmt(payload / 1e6), _fmt(wire / 1e6 if wire is not None else None),
                  f"{red:.1f}x" if red else "n/a", _fmt(s["final_loss"], ".4f"), _fmt(s["final_val_loss"], ".4f"),
                  {True: "identical", False: "[red]DIFFER[/]", None: "n/a"}[s["replicas_identical"]])
    return t


@app.command()
def run(
    scenario: Path = typer.Argument(..., help="scenario YAML file"),
    backend: str = typer.Option("auto", help=BACKEND_HELP),
    optimizer: list[str] = typer.Option(None, "--optimizer", "-o", help="run only these optimizers (repeatable)"),
    steps: int = typer.Option(None, min=1, help="override train.steps"),
    out: Path = typer.Option(Path("results"), help="folder that receives the run folder"),
    seed: int = typer.Option(None, min=0, help="override train.seed"),
    link_engine: str = typer.Option("auto", help="auto | tc | userspace: how delay, jitter and loss are emulated"),
    allow_unemulated: bool = typer.Option(False, help="run even if part of a link cannot be emulated here (the report says what)"),
    image: str = typer.Option(None, help="docker backend: worker image (default: distro-bench-worker:<version>)"),
) -> None:
    """Train every optimizer of SCENARIO on emulated links and write a run folder (its path is the last line)."""
    from harness.backends import BackendOptions
    from harness.progress import RichProgress
    from harness.runner import RunOptions, run_scenario
    from harness.scenario import load_scenario

    with cli_errors():
        from harness.net.engines import ENGINE_CHOICES

        if link_engine not in ENGINE_CHOICES:
            from harness.errors import InputError

            raise InputError(f"--link-engine: unknown engine {link_engine!r}; one of {', '.join(ENGINE_CHOICES)}")
        s = load_scenario(scenario).with_overrides(steps=steps, seed=seed, optimizers=optimizer)
        opts = RunOptions(backend=backend, out=out, backend_options=BackendOptions(
            link_engine=link_engine, allow_unemulated=allow_unemulated or s.network.allow_unemulated, image=image))
        with RichProgress() as progress:
            result = run_scenario(s, opts, progress)
        console.print(summary_table(result.summary))
        console.print(str(result.run_dir), markup=False, soft_wrap=True)


@app.command()
def validate(scenario: Path = typer.Argument(..., help="scenario YAML file")) -> None:
    """Check SCENARIO and show it resolved (presets expanded, units normalised); exit 2 on any problem."""
    from harness.scenario import load_scenario

    with cli_errors():
        s = load_scenario(scenario)
        t = Table(title=f"{s.name}: {s.world_size} workers, model {s.model.preset or 'custom'}, {s.train.steps} steps")
        for col in ("rank", "node", "hardware", "speed", "link", "shaping"):
            t.add_column(col)
        for n in s.nodes():
            t.add_row(str(n.rank), n.name, n.hardware_name, f"{n.compute_scale:.2f}x", n.link_name or "-",
                      n.link.describe() if n.link else "unshaped")
        console.print(t)
        console.print(f"optimizers: {', '.join(f'{k} ({v.type})' for k, v in s.optimizer_configs().items())}; "
                      f"baseline: {s.baseline}")
        console.print(f"[green]{scenario} is valid[/]")


from harness.cli.report import check as _check, report as _report  # noqa: E402

app.command(name="report")(_report)
app.command(name="check")(_check)

from harness.cli.net import doctor as _doctor, links as _links  # noqa: E402

app.command(name="doctor")(_doctor)
app.command(name="links")(_links)

from harness.cli.docker import clean as _clean, image_app as _image_app  # noqa: E402

app.add_typer(_image_app, name="image")
app.command(name="clean")(_clean)

from harness.cli.project import project as _project  # noqa: E402

app.command(name="project")(_project)

from harness.cli.sweep import sweep as _sweep  # noqa: E402

app.command(name="sweep")(_sweep)


if __name__ == "__main__":
    app()
