"""`distro-bench doctor` (what this host can emulate) and `distro-bench links` (measure each emulated
link against its spec). Registered in harness/cli/app.py."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer
from rich.table import Table

from harness.cli.options import JSON_OPTION, LINK_ENGINE_HELP, LinkEngine, value
from harness.console import cli_errors, console, print_json


def _capability_rows(caps) -> list[tuple[str, bool | None, str, str]]:
    """(capability, ok (None: not probed), detail, what its absence means for a scenario)."""
    from harness.net.engines import ENGINES

    q = set(caps.qdiscs)
    tc_ok, tc_why = ENGINES["tc"].available(caps)
    us_ok, us_why = ENGINES["userspace"].available(caps)
    gpus = caps.gpus or ()
    return [
        ("root", caps.root, "uid 0" if caps.root else "not root",
         "netns backend, tc shaping and the delay line need root; only --backend local (no emulation) runs"),
        ("iproute2 (ip, tc)", caps.iproute2 is not None, caps.iproute2 or "missing",
         "no namespaces or shaping: apt-get install iproute2"),
        ("network namespaces", caps.netns, "veth + namespace created and removed" if caps.netns else str(caps.netns_error),
         "no netns backend; workers run on loopback with links not emulated"),
        ("tbf qdisc (rate)", "tbf" in q, "kernel accepts tbf" if "tbf" in q else "missing",
         "link rates (up/down) cannot be shaped"),
        ("netem qdisc (delay, jitter, loss)", "netem" in q, "kernel accepts netem" if "netem" in q else "missing",
         "delay/jitter/loss need --link-engine userspace (auto picks it) or --allow-unemulated"),
        ("other qdiscs", None, ", ".join(sorted(q)) or "none", "informational"),
        ("link engine tc", tc_ok, tc_why, "--link-engine tc fails on scenarios with delay, jitter or loss"),
        ("link engine userspace", us_ok, us_why, "no delay/jitter/loss without netem"),
        ("iperf3", caps.iperf3, "found" if caps.iperf3 else "missing",
         "`distro-bench links` cannot measure goodput: apt-get install iperf3"),
        ("ping", caps.ping, "found" if caps.ping else "missing",
         "no RTT checks in `links`, no reachability check at bring-up: apt-get install iputils-ping"),
        ("ethtool", caps.ethtool, "found" if caps.ethtool else "missing",
         "the userspace engine cannot turn off TSO/GSO/GRO: apt-get install ethtool"),
        ("Docker engine", caps.docker, caps.docker_detail, "no docker backend (containers); netns still works"),
        ("GPUs", bool(gpus) if caps.gpus is not None else None, ", ".join(gpus) or "none",
         "training runs on CPU; NCCL is not exercised"),
    ]


def doctor(as_json: bool = JSON_OPTION) -> None:
    """Show what this host can emulate (root, namespaces, qdiscs, link engines, tools, Docker, GPUs)."""
    from harness.net.probe import probe

    with cli_errors():
        caps = probe()
        if as_json:
            from harness.backends import select_backend

            try:
                auto = select_backend("auto")[1]
            except Exception as e:  # doctor reports, it does not fail
                auto = f"none: {e}"
            print_json({"kernel": caps.kernel, "auto_backend": auto, "capabilities": [
                {"capability": n, "ok": ok, "detail": d, "if_missing": "" if ok else m}
                for n, ok, d, m in _capability_rows(caps)]})
            return
        t = Table(title=f"distro-bench doctor (kernel {caps.kernel})")
        for col in ("capability", "status", "detail", "if missing"):
            t.add_column(col)
        for name, ok, detail, missing in _capability_rows(caps):
            status = {True: "[green]ok[/]", False: "[red]missing[/]", None: "[dim]-[/]"}[ok]
            t.add_row(name, status, detail, "" if ok else missing)
        console.print(t)
        from harness.backends import select_backend

        try:
            _, why = select_backend("auto")
            console.print(f"--backend auto would use: {why}")
        except Exception as e:  # doctor reports, it does not fail
            console.print(f"--backend auto: {e}")


def _parse_range(text: str) -> tuple[float, float]:
    from harness.errors import InputError

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
    seconds: float = typer.Option(5.0, min=1.0, help="iperf3 seconds per direction (after 1 s left out)"),
    allow_unemulated: bool = typer.Option(False, help="measure even if part of a link cannot be emulated here"),
) -> None:
    """Bring SCENARIO's links up (netns) and measure each node's goodput up and down (iperf3 against a far
    end on the switch) and RTT where delay is emulated, against the spec; exit 1 on any FAIL."""
    from harness.backends.base import BackendOptions
    from harness.backends.netns import NetnsBackend
    from harness.errors import CapabilityError
    from harness.net import linktest
    from harness.scenario import load_scenario

    with cli_errors():
        lo, hi = _parse_range(tolerance)
        s = load_scenario(scenario)
        ok, why = NetnsBackend.probe(s)
        if not ok:
            raise CapabilityError(f"links needs the netns backend: {why}")
        opts = BackendOptions(link_engine=value(link_engine) or s.network.link_engine,
                              allow_unemulated=allow_unemulated or s.network.allow_unemulated)
        NetnsBackend.preflight(s, opts)
        console.print(f"goodput passes at {lo:.0%}-{hi:.0%} of the configured rate (TCP payload; the rate counts "
                      f"Ethernet frames, so ~95% is the ceiling); RTT at ±(2 ms + 10% + jitter)")
        with tempfile.TemporaryDirectory(prefix="dbench-links-") as tmp:
            with NetnsBackend(s, Path(tmp), opts) as backend:
                net = backend.describe()
                console.print(f"link engine: {net['link_engine']} ({net['link_engine_reason']})")
                for x in net["not_emulated"]:
                    console.print(f"[yellow]not emulated:[/] {x}")
                far_ns, far_addr = backend.far_end()
                checks = linktest.measure(
                    backend.link_targets(), far_ns, far_addr, seconds=seconds, goodput_range=(lo, hi),
                    on_check=lambda c: console.print(
                        f"  {c.node} {c.what}: {linktest.fmt_value(c.measured, c.unit)} "
                        f"(configured {linktest.fmt_value(c.configured, c.unit)}) {c.status}"))
        t = Table(title=f"{s.name}: links measured vs configured")
        for col in ("node", "check", "configured", "measured", "ratio", "result", "criterion"):
            t.add_column(col, justify="left" if col in ("node", "check", "criterion") else "right")
        for c in checks:
            color = {"PASS": "green", "FAIL": "red", "SKIP": "dim"}[c.status]
            t.add_row(c.node, c.what, linktest.fmt_value(c.configured, c.unit), linktest.fmt_value(c.measured, c.unit),
                      f"{c.ratio:.1%}" if c.ratio is not None else "-", f"[{color}]{c.status}[/]", c.note)
        console.print(t)
        failed = [c for c in checks if c.status == "FAIL"]
        if failed:
            console.print(f"[red]{len(failed)} of {len(checks)} checks failed[/]")
            raise typer.Exit(1)
        console.print(f"[green]all {len(checks)} checks passed[/]")
