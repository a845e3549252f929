"""`distro-bench project`: bytes and step time per optimizer at any scale, from the projection model."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import typer
from rich.table import Table

from harness.console import cli_errors, console


def _mb(x: float) -> str:
    return f"{x / 1e6:,.2f}"


def project(
    scenario: Path = typer.Argument(..., help="scenario YAML file (links, hardware, optimizers)"),
    model: str = typer.Option(None, help="model preset instead of the scenario's (tiny, small, base, llama-1.2b)"),
    workers: list[int] = typer.Option(None, "--workers", "-n", help="worker counts (repeatable); default: the scenario's"),
    optimizer: list[str] = typer.Option(None, "--optimizer", "-o", help="only these optimizers (repeatable)"),
    mfu: float = typer.Option(0.4, min=0.01, max=1.0, help="model FLOPs utilisation for compute time"),
    out: Path = typer.Option(None, help="folder for projection.json and plots (default results/project-<scenario>-<time>)"),
) -> None:
    """Project bytes per worker per step and step time per optimizer, with plots against worker count and bandwidth."""
    from harness import presets
    from harness.errors import InputError
    from harness.projection import PAPER, nodes_like, paper_accounting, project as run_projection
    from harness.report.projection_plots import step_time_vs_bandwidth, step_time_vs_workers
    from harness.scenario import load_scenario

    with cli_errors():
        s = load_scenario(scenario)
        if optimizer:
            s = s.with_overrides(optimizers=optimizer)
        if model and model not in presets.MODELS:
            raise InputError(f"--model: unknown preset {model!r}; known: {', '.join(presets.MODELS)}")
        model_cfg = dict(presets.MODELS[model]) if model else s.resolved_model()
        counts = sorted(set(workers or [s.world_size]))
        if counts[0] < 1:
            raise InputError("--workers: must be at least 1")
        results = {n: run_projection(s, nodes=nodes_like(s, n), model=model_cfg, mfu=mfu) for n in counts}

        t = Table(title=f"projection: {s.name}, model {model or s.model.preset or 'custom'}, per worker per step")
        for col in ("workers", "optimizer", "payload tx MB", "payload rx MB", "wire each way MB", "collectives",
                    "rounds", "latency s", "transfer s", "comm s", "compute s", "step s"):
            t.add_column(col, justify="left" if col == "optimizer" else "right")
        for n, projs in results.items():
            for p in projs:
                t.add_row(str(n), p.optimizer, _mb(p.payload_tx_bytes), _mb(p.payload_rx_bytes), _mb(p.wire_tx_bytes),
                          str(p.collectives), str(p.rounds), f"{p.latency_s:.3g}", f"{p.transfer_s:.3g}",
                          f"{p.comm_s:.3g}", "n/a" if p.compute_s is None else f"{p.compute_s:.3g}",
                          "n/a" if p.step_s is None else f"{p.step_s:.3g}")
        console.print(t)

        n_last = counts[-1]
        kinds = s.optimizer_configs()
        acc = [paper_accounting(p, kinds[p.optimizer].type) for p in results[n_last]]
        a = Table(title=f"bytes per worker per step, {n_last} workers, in three accountings")
        for col in ("optimizer", "ours: payload tx+rx", "ring wire, each way", "paper style: received from peers"):
            a.add_column(col, justify="left" if col == "optimizer" else "right")
        for row in acc:
            a.add_row(row["optimizer"], _mb(row["payload_tx_rx"]) + " MB", _mb(row["wire_each_way"]) + " MB",
                      _mb(row["paper_style"]) + " MB")
        base = next((r for r in acc if r["optimizer"] == s.baseline), None)
        if base:
            for row in acc:
                if row is not base and row["paper_style"]:
                    a.add_row(f"ratio {s.baseline}/{row['optimizer']}", f"{base['payload_tx_rx'] / row['payload_tx_rx']:.0f}x",
                              f"{base['wire_each_way'] / row['wire_each_way']:.0f}x",
                              f"{base['paper_style'] / row['paper_style']:.0f}x")
        a.add_row("DisTrO report (1.2B, 32 workers)", "", "",
                  f"AdamW {PAPER['adamw_bytes'] / 1e9:.1f} GB, DisTrO {PAPER['distro_bytes'] / 1e6:.1f} MB, {PAPER['ratio']}x")
        console.print(a)

        out = out or Path("results") / f"project-{s.name}-{datetime.now():%Y%m%d-%H%M%S}"
        out.mkdir(parents=True, exist_ok=True)
        workers_plot = step_time_vs_workers(s, model_cfg, sorted(set(counts) | {2, 4, 8, 16, 32, 64}), out, mfu)
        bw_plot, crossings = step_time_vs_bandwidth(s, model_cfg, n_last, out, mfu)
        for pair, rate in crossings.items():
            console.print(f"{pair}: step times cross at about {rate / 1e6:.3g} Mbit/s per link ({n_last} workers)")
        (out / "projection.json").write_text(json.dumps(
            {"scenario": s.name, "model": model_cfg, "mfu": mfu,
             "projections": {str(n): [p.as_dict() for p in ps] for n, ps in results.items()},
             "accounting": acc, "paper": PAPER, "crossings_bps": crossings,
             "plots": [workers_plot.name, bw_plot.name]}, indent=2))
        console.print(str(out), markup=False, soft_wrap=True)
