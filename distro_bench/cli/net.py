"""`distro-bench doctor` (what this host can run, and the line that fixes each missing piece) and
`distro-bench links` (measure each emulated link against its spec). Registered in distro_bench/cli/app.py."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer
from rich.table import Table

from distro_bench.cli.options import JSON_OPTION, LINK_ENGINE_HELP, LinkEngine, value
from distro_bench.run.console import cli_errors, console, print_json

BACKENDS = ("local", "netns", "docker")


def _capability_rows(h) -> list[tuple[str, bool | None, str]]:
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


def readiness(h) -> dict[str, dict[str, list[str]]]:
    """backend -> link engine -> problems (as lines; [] = ready) for a scenario with rates and delay."""
    from distro_bench.run.preflight import Needs, problems

    needs = Needs(shaped=True, impaired=True)
    out: dict[str, dict[str, list[str]]] = {}
    for b in BACKENDS:
        engines = ("none",) if b == "local" else ("tc", "userspace")
        out[b] = {e: [p.line() for p in problems(h, b, needs, link_engine="auto" if e == "none" else e)]
                  for e in engines}
    return out


def doctor(as_json: bool = JSON_OPTION) -> None:
    """Show what this host can run: root, namespaces, qdiscs, the delay line, Docker, GPUs, binaries and
    Python modules; then, per backend and link engine, ready or the exact line that fixes each problem."""
    from distro_bench.net import host

    with cli_errors():
        h = host.probe()
        ready = readiness(h)
        from distro_bench.backends import select_backend

        try:
            _, auto = select_backend("auto")
        except Exception as e:  # doctor reports, it does not fail
            auto = f"none ({e})"
        if as_json:
            print_json({"host": h.to_dict(), "readiness": ready, "backend_auto": auto})
            return
        t = Table(title=f"distro-bench doctor (kernel {h.kernel}, python {h.python})")
        for col in ("capability", "status", "detail"):
            t.add_column(col, overflow="fold")
        for name, ok, detail in _capability_rows(h):
            status = {True: "[green]ok[/]", False: "[red]missing[/]", None: "[dim]-[/]"}[ok]
            t.add_row(name, status, detail)
        console.print(t)
        console.print("Not needed by any run: iperf3 (`links` falls back to a Python TCP probe), ping, ethtool, "
                      "ip, nsenter, setpriv (pyroute2 and a Python namespace launcher do their jobs).")
        for b, engines in ready.items():
            for e, probs in engines.items():
                label = b if e == "none" else f"{b} + link engine {e}"
                if not probs:
                    console.print(f"[green]ready[/]: {label}")
                else:
                    console.print(f"[red]not ready[/]: {label}")
                    for p in probs:
                        console.print(f"    - {p}", markup=False)
        console.print(f"--backend auto would use: {auto}")


def _parse_range(text: str) -> tuple[float, float]:
    from distro_bench.errors import InputError

    try:
        lo, hi = (float(x.strip().rstrip("%")) for x in text.split(","))
    except ValueError:
        raise InputError(f"--tolerance {text!r}: write LO,HI as fractions of the rate, e.g. 0.90,1.02") from None
    if "%" in text:
        lo, hi = lo / 100, hi / 100
    if not 0 < lo < hi:
        raise InputError(f"--tolerance {text!r}: need 0 < LO < HI")
    return lo, hi


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
    from distro_bench.backends.base import BackendOptions
    from distro_bench.backends.netns import NetnsBackend
    from distro_bench.errors import InputError
    from distro_bench.net import linktest
    from distro_bench.run import preflight
    from distro_bench.scenario.model import load_scenario

    say = (lambda *a, **k: None) if as_json else console.print
    with cli_errors():
        if goodput_tool not in linktest.GOODPUT_TOOLS:
            raise InputError(f"--goodput-tool: unknown tool {goodput_tool!r}; one of {', '.join(linktest.GOODPUT_TOOLS)}")
        lo, hi = _parse_range(tolerance)
        s = load_scenario(scenario)
        opts = BackendOptions(link_engine=value(link_engine) or s.network.link_engine,
                              allow_unemulated=allow_unemulated or s.network.allow_unemulated)
        preflight.check_options("netns", s, opts)
        if goodput_tool == "iperf3":
            h = preflight.host_for("netns", preflight.Needs.of(s))
            if not h.has_binary("iperf3"):
                raise preflight.PreflightError([preflight.Problem("`iperf3`", "--goodput-tool iperf3",
                                                                  preflight.INSTALL["iperf3"] + ", or --goodput-tool auto")],
                                               backend="netns", link_engine=opts.link_engine)
        plan = NetnsBackend.preflight(s, opts)
        if schedule:
            passed = _links_schedule(s, opts, plan, node, direction, seconds, lo, hi, as_json)
    if schedule:
        if not passed:
            raise typer.Exit(1)
        return
    with cli_errors():
        tool = linktest.goodput_tool(goodput_tool)
        say(f"goodput by {tool}; passes at {lo:.0%}-{hi:.0%} of the configured rate (TCP payload; the rate counts "
            f"Ethernet frames, so ~95% is the ceiling); RTT by TCP handshake at ±(1 ms + 5% + jitter/3)")
        with tempfile.TemporaryDirectory(prefix="dbench-links-") as tmp:
            with NetnsBackend(s, Path(tmp), opts, plan) as backend:
                net = backend.describe()
                say(f"link engine: {net['link_engine']} ({net['link_engine_reason']})")
                for x in net["not_emulated"]:
                    say(f"[yellow]not emulated:[/] {x}")
                far_ns, far_addr = backend.far_end()
                checks = linktest.measure(
                    backend.link_targets(), far_ns, far_addr, seconds=seconds, goodput_range=(lo, hi), tool=goodput_tool,
                    on_check=lambda c: say(
                        f"  {c.node} {c.what}: {linktest.fmt_value(c.measured, c.unit)} "
                        f"(configured {linktest.fmt_value(c.configured, c.unit)}, by {c.tool}) {c.status}"))
        failed = [c for c in checks if c.status == "FAIL"]
        if as_json:
            print_json({
                "scenario": s.name, "link_engine": net["link_engine"], "goodput_tool": tool, "passed": not failed,
                "checks": [{"node": c.node, "check": c.what, "configured": c.configured, "measured": c.measured,
                            "unit": c.unit, "ratio": c.ratio, "status": c.status, "criterion": c.note, "tool": c.tool}
                           for c in checks]})
        else:
            t = Table(title=f"{s.name}: links measured vs configured")
            for col in ("node", "check", "configured", "measured", "ratio", "result", "by"):
                t.add_column(col, justify="left" if col in ("node", "check", "by") else "right")
            for c in checks:
                color = {"PASS": "green", "FAIL": "red", "SKIP": "dim"}[c.status]
                t.add_row(c.node, c.what, linktest.fmt_value(c.configured, c.unit), linktest.fmt_value(c.measured, c.unit),
                          f"{c.ratio:.1%}" if c.ratio is not None else "-", f"[{color}]{c.status}[/]", c.tool)
            console.print(t)
        if failed:
            say(f"[red]{len(failed)} of {len(checks)} checks failed[/]")
            raise typer.Exit(1)
        say(f"[green]all {len(checks)} checks passed[/]")


def _links_schedule(s, opts, plan, node: int, direction: str, seconds: float, lo: float, hi: float,
                    as_json: bool) -> bool:
    """`links --schedule`: distro_bench/net/schedtest.py on one node's direction, for the schedule's length (its
    last change plus `seconds`, or a trace's period), a row per second, exit 1 when a settled window falls
    outside LO..HI of the asked rate or a change was applied more than 200 ms late."""
    from distro_bench.backends.netns import NetnsBackend
    from distro_bench.errors import InputError
    from distro_bench.net.schedtest import measure_schedule
    from distro_bench.scenario.timeline import compile_timeline
    from distro_bench.scenario.trace import load_trace

    if direction not in ("up", "down"):
        raise InputError(f"--direction: {direction!r}; one of up, down")
    if node >= s.world_size:
        raise InputError(f"--node: {node}; this scenario has ranks 0..{s.world_size - 1}")
    tl = compile_timeline(s)
    mine = [c for c in tl.timed if c.rank == node and c.kind == "schedule" and direction in c.directions]
    trace = next((t for t in tl.traces if t.rank == node and t.direction == direction), None)
    if not mine and trace is None:
        raise InputError(f"--schedule: node {node}'s {direction} link has no timed schedule entry or trace to follow")
    length = load_trace(trace.path).period_s if trace else mine[-1].at_s + max(seconds, 10.0)
    with tempfile.TemporaryDirectory(prefix="dbench-links-") as tmp:
        with NetnsBackend(s, Path(tmp), opts, plan) as backend:
            m = measure_schedule(backend, tl, rank=node, direction=direction, seconds=length)
    ratios = m.ratios()
    late = m.lateness_s()
    bad = [r for r in ratios if not lo <= r[1] <= hi]
    too_late = [x for x in late if x > 0.2]
    result = {"scenario": s.name, "node": node, "direction": direction, "window_s": m.window_s,
              "asked_bps": m.expected_bps, "wire_bps": m.wire_bps, "goodput_bps": m.goodput_bps,
              "lateness_s": late, "correlation": m.correlation(), "total_ratio": m.total_ratio(),
              "windows_outside": len(bad), "passed": not bad and not too_late}
    if as_json:
        print_json(result)
    else:
        t = Table(title=f"{s.name}: node {node} {direction}, per {m.window_s:g} s (wire = egress frames)")
        for col in ("t s", "asked", "wire", "goodput", "wire/asked"):
            t.add_column(col, justify="right")
        for i, (e, w, g) in enumerate(zip(m.expected_bps, m.wire_bps, m.goodput_bps)):
            t.add_row(f"{i * m.window_s:g}", f"{e / 1e6:.2f} Mbit", f"{w / 1e6:.2f}", f"{g / 1e6:.2f}",
                      f"{w / e:.1%}" if e else "-")
        console.print(t)
        console.print(f"windows outside {lo:.0%}-{hi:.0%} (settled ones: not the window of a change nor the next): "
                      f"{len(bad)}/{len(ratios)}; correlation r = {result['correlation']:.3f}; total wire/asked "
                      f"{result['total_ratio']:.3f}; changes late by max {max(late, default=0) * 1e3:.0f} ms")
    return result["passed"]
