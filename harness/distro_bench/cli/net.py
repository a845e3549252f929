"""`distro-bench doctor` (what this host can run, and the line that fixes each missing piece) and
`distro-bench links` (measure each emulated link against its spec): options -> distro_bench.api -> Rich output.
Registered in harness/distro_bench/cli/app.py."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from distro_bench.cli.console import cli_errors, console, print_json
from distro_bench.cli.options import JSON_OPTION, LINK_ENGINE_HELP, LinkEngine, value

if TYPE_CHECKING:
    from distro_bench.api import ScheduleReport
    from distro_bench.net.host import HostInfo
    from distro_bench.net.linktest import Check


def _capability_rows(h: HostInfo) -> list[tuple[str, bool | None, str]]:
    """(capability, ok (None: informational or not probed), detail) from a HostInfo."""
    from distro_bench.net.host import BINARIES

    q = set(h.qdiscs)
    rows = [
        ("root", h.root, "uid 0" if h.root else "not root"),
        ("network namespaces", h.netns, "namespace + veth created and removed" if h.netns else str(h.netns_error)),
        ("tbf qdisc (rate)", "tbf" in q, "kernel accepts tbf" if "tbf" in q else "missing"),
        ("netem qdisc (delay, jitter, loss)", "netem" in q, "kernel accepts netem" if "netem" in q else "missing"),
        ("other qdiscs", None, ", ".join(sorted(q - {"tbf", "netem"})) or "none"),
        ("userspace delay line", h.delayline, h.delayline_detail),
        ("Docker engine", h.docker, h.docker_detail),
        # No GPU is no fault: training runs on CPU (a worker that asks for cuda is what preflight checks).
        ("GPUs", True if h.gpus else None, ", ".join(h.gpus or ()) or "none (training runs on CPU)"),
    ]
    for name, pkg in BINARIES.items():
        path = h.binaries.get(name)
        rows.append((f"binary {name}", path is not None, path or f"missing ({pkg})"))
    for mod, version in h.modules.items():
        rows.append((f"module {mod}", version is not None, version or "missing"))
    return rows


def doctor(as_json: bool = JSON_OPTION) -> None:
    """Show what this host can run: root, namespaces, qdiscs, the delay line, Docker, GPUs, binaries and
    Python modules; then, per backend and link engine, ready or the exact line that fixes each problem."""
    from distro_bench import api

    with cli_errors():
        report = api.doctor()
    if as_json:
        print_json(report.to_dict())
        return
    h = report.host
    t = Table(title=f"distro-bench doctor (kernel {h.kernel}, python {h.python})")
    for col in ("capability", "status", "detail"):
        t.add_column(col, overflow="fold")
    for name, ok, detail in _capability_rows(h):
        status = {True: "[green]ok[/]", False: "[red]missing[/]", None: "[dim]-[/]"}[ok]
        t.add_row(name, status, detail)
    console.print(t)
    console.print("Not needed by any run: iperf3 (`links` falls back to a Python TCP probe), ping, ethtool, "
                  "ip, nsenter, setpriv (pyroute2 and a Python namespace launcher do their jobs).")
    for b, engines in report.readiness.items():
        for e, probs in engines.items():
            label = b if e == "none" else f"{b} + link engine {e}"
            if not probs:
                console.print(f"[green]ready[/]: {label}")
            else:
                console.print(f"[red]not ready[/]: {label}")
                for p in probs:
                    console.print(f"    - {p}", markup=False)
    console.print(f"--backend auto would use: {report.backend_auto}")


class _LinksLines:
    """api.LinksProgress as console lines (nothing with --json: stdout carries only the document)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    def measuring(self, tool: str, lo: float, hi: float) -> None:
        self._say(f"goodput by {tool}; passes at {lo:.0%}-{hi:.0%} of the configured rate (TCP payload; the rate "
                  f"counts Ethernet frames, so ~95% is the ceiling); RTT by TCP handshake at ±(1 ms + 5% + jitter/3)")

    def network(self, link_engine: str, reason: str, not_emulated: list[str], queues: list[str]) -> None:
        self._say(f"link engine: {link_engine} ({reason})")
        for x in not_emulated:
            self._say(f"[yellow]not emulated:[/] {x}")
        for q in queues:
            self._say(f"queue: {q}")

    def check(self, check: Check) -> None:
        from distro_bench.net.linktest import fmt_value

        c = check
        self._say(f"  {c.node} {c.what}: {fmt_value(c.measured, c.unit)} (configured {fmt_value(c.configured, c.unit)}, "
                  f"by {c.tool}) {c.status}")

    def _say(self, text: str) -> None:
        if not self.quiet:
            console.print(text)


def links(
    scenario: Path = typer.Argument(..., help="scenario YAML file"),
    link_engine: LinkEngine = typer.Option(None, help=LINK_ENGINE_HELP, show_default=False),
    tolerance: str = typer.Option("0.90,1.02", help="goodput pass range LO,HI as fractions of the configured rate"),
    seconds: float = typer.Option(5.0, min=1.0, help="seconds per direction (after 1 s left out)"),
    goodput_tool: str = typer.Option("auto", help="auto | iperf3 | python: what measures goodput (auto: iperf3 "
                                                  "where installed, else the built-in Python TCP probe)"),
    allow_unemulated: bool = typer.Option(False, help="measure even if part of a link cannot be emulated here"),
    schedule: bool = typer.Option(False, "--schedule", help="play the links' schedules and traces (as a run does, "
                                  "from t=0) and measure one node's rate per second against them"),
    node: int = typer.Option(0, min=0, help="with --schedule: the rank whose link is measured"),
    direction: str = typer.Option("up", help="with --schedule: up | down"),
    as_json: bool = JSON_OPTION,
) -> None:
    """Bring SCENARIO's links up (netns) and measure each node's goodput up and down (against a far end on
    the switch) and RTT (TCP handshakes) where delay is emulated, against the spec; exit 1 on any FAIL."""
    from distro_bench import api
    from distro_bench.net.linktest import fmt_value

    with cli_errors():
        if schedule:
            sched = api.links_schedule(scenario, node=node, direction=direction, seconds=seconds,
                                       link_engine=value(link_engine), tolerance=tolerance,
                                       allow_unemulated=allow_unemulated)
        else:
            report = api.links(scenario, link_engine=value(link_engine), tolerance=tolerance, seconds=seconds,
                               goodput_tool=goodput_tool, allow_unemulated=allow_unemulated,
                               progress=_LinksLines(quiet=as_json))
    if schedule:
        _print_schedule(sched, as_json)
        if not sched.passed:
            raise typer.Exit(1)
        return
    checks = report.checks
    failed = [c for c in checks if c.status == "FAIL"]
    if as_json:
        print_json(report.to_dict())
    else:
        t = Table(title=f"{report.scenario}: links measured vs configured")
        for col in ("node", "check", "configured", "measured", "ratio", "result", "by"):
            t.add_column(col, justify="left" if col in ("node", "check", "by") else "right")
        for c in checks:
            color = {"PASS": "green", "FAIL": "red", "SKIP": "dim"}[c.status]
            t.add_row(c.node, c.what, fmt_value(c.configured, c.unit), fmt_value(c.measured, c.unit),
                      f"{c.ratio:.1%}" if c.ratio is not None else "-", f"[{color}]{c.status}[/]", c.tool)
        console.print(t)
    if failed:
        if not as_json:
            console.print(f"[red]{len(failed)} of {len(checks)} checks failed[/]")
        raise typer.Exit(1)
    if not as_json:
        console.print(f"[green]all {len(checks)} checks passed[/]")


def _print_schedule(r: ScheduleReport, as_json: bool) -> None:
    """`links --schedule`: a row per window, then how many settled windows fell outside the range."""
    if as_json:
        print_json(r.to_dict())
        return
    lo, hi = r.tolerance
    t = Table(title=f"{r.scenario}: node {r.node} {r.direction}, per {r.window_s:g} s (wire = egress frames)")
    for col in ("t s", "asked", "wire", "goodput", "wire/asked"):
        t.add_column(col, justify="right")
    for i, (e, w, g) in enumerate(zip(r.asked_bps, r.wire_bps, r.goodput_bps)):
        t.add_row(f"{i * r.window_s:g}", f"{e / 1e6:.2f} Mbit", f"{w / 1e6:.2f}", f"{g / 1e6:.2f}",
                  f"{w / e:.1%}" if e else "-")
    console.print(t)
    console.print(f"windows outside {lo:.0%}-{hi:.0%} (settled ones: not the window of a change nor the next): "
                  f"{r.windows_outside}/{r.windows_settled}; correlation r = {r.correlation:.3f}; total wire/asked "
                  f"{r.total_ratio:.3f}; changes late by max {max(r.lateness_s, default=0) * 1e3:.0f} ms")
