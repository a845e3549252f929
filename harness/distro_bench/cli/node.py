"""`distro-bench node SCENARIO --rdzv HOST:PORT --node-rank I ...`: one host's agent of a multi-host run
(harness/distro_bench/multihost/agent.py). Registered in harness/distro_bench/cli/app.py."""

from __future__ import annotations

from pathlib import Path

import typer

from distro_bench.cli.console import cli_errors, console, err_console, print_json
from distro_bench.cli.options import JSON_OPTION, ROOT_WORKERS_HELP, out_path
from distro_bench.cli.summary import print_summary


def node(
    scenario: Path = typer.Argument(..., help="scenario YAML file (the same on every host)"),
    rdzv: str = typer.Option(..., "--rdzv", help="HOST:PORT of torchrun's c10d rendezvous: node-rank 0's host, "
                                                  "which also serves the agents' store on PORT+1"),
    node_rank: int = typer.Option(..., "--node-rank", min=0, help="this host's index, 0..N-1 (0 writes the run folder)"),
    nnodes: int = typer.Option(None, "--nnodes", min=1, help="hosts in the run (default: from the placement, else "
                                                              "one scenario node per host)"),
    iface: str = typer.Option(None, "--iface", help="interface to shape, count and talk over (required for shaping; "
                                                    "never guessed)"),
    i_know: bool = typer.Option(False, "--i-know", help="shape --iface even though it carries the default route or "
                                                        "your SSH session, or replace shaping found on it"),
    shaping: bool = typer.Option(True, "--shaping/--no-shaping", help="apply the scenario's links (--no-shaping: "
                                                                      "measure the network as it is)"),
    optimizer: list[str] = typer.Option(None, "--optimizer", "-o", help="run only these optimizers (repeatable)"),
    steps: int = typer.Option(None, min=1, help="budget: train N steps (replaces the scenario's budget)"),
    out: Path = typer.Option(Path("results"), parser=out_path, help="folder that receives the run folder (node-rank 0), or this "
                                                   "host's records where --out is not shared"),
    placement: str = typer.Option(None, "--placement", help="scenario ranks per host, e.g. '0,1;2,3' (default: the "
                                                            "scenario's workers[].host, else in order)"),
    store_port: int = typer.Option(None, "--store-port", min=1, max=65535, help="port of the agents' store "
                                                                                 "(default: the rendezvous port + 1)"),
    allow_unemulated: bool = typer.Option(None, "--allow-unemulated/--no-allow-unemulated", show_default=False,
                                          help="run even if part of a link cannot be emulated here (delay without netem)"),
    measure: bool = typer.Option(True, "--measure/--no-measure", help="measure RTT and goodput to the peers after shaping"),
    timeout: float = typer.Option(600.0, "--timeout", min=5, help="seconds to wait for the other hosts (rendezvous, "
                                                                  "records)"),
    collective_timeout: float = typer.Option(None, "--collective-timeout", min=5,
                                             help="seconds a collective may block (default: derived from the links)"),
    ship_records: bool = typer.Option(False, "--ship-records", help="hand the records to node-rank 0 over the "
                                                                    "agents' store even where --out is a shared path"),
    secret_file: Path = typer.Option(None, "--secret-file", help="file (mode 600) holding the run's secret for the "
                                                                 "agents' store, the same on every host (default: "
                                                                 "$DISTRO_BENCH_SECRET; else node-rank 0 makes one and "
                                                                 "prints it)"),
    stream: bool = typer.Option(False, "--stream", help="for a launcher driving this agent over a pipe (the ssh "
                                                        "backend): notes, records and heartbeats as JSON lines on "
                                                        "stdout; stop as on Ctrl-C when stdin closes"),
    allow_root_workers: bool = typer.Option(False, "--allow-root-workers", help=ROOT_WORKERS_HELP),
    as_json: bool = JSON_OPTION,
) -> None:
    """Run this host's part of SCENARIO across hosts: shape --iface with the links of the nodes placed here,
    start their workers under torchrun (c10d rendezvous at --rdzv), remove the shaping on exit, Ctrl-C or
    failure. Node-rank 0 writes the run folder (its path is the last line printed)."""
    from distro_bench import api
    from distro_bench.run.overrides import Overrides, RunSettings

    with cli_errors():
        overrides = Overrides(optimizers=tuple(optimizer) if optimizer else None, steps=steps)
        settings = RunSettings(out=out, allow_unemulated=allow_unemulated, measure_links=measure,
                               collective_timeout_s=collective_timeout, allow_root_workers=allow_root_workers)
        result = api.node(scenario, rdzv=rdzv, node_rank=node_rank, nnodes=nnodes, iface=iface, i_know=i_know,
                          shaping=shaping, placement=placement, store_port=store_port, join_timeout_s=timeout,
                          ship_records=ship_records, stream=stream, secret_file=secret_file, overrides=overrides, settings=settings,
                          note=lambda text: err_console.print(text, markup=False))
    if stream:  # the stream's `end` line said it all; stdout carries nothing but the stream
        return
    if as_json:
        print_json(result.to_dict())
        return
    if result.summary is not None:
        print_summary(result.summary)
    console.print(str(result.run_dir), markup=False, soft_wrap=True)
