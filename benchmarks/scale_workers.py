"""Scale on one box: scenarios/scale-32.yaml at 4, 8, 16 and 32 workers on the netns backend, each
optimizer's counted bytes per worker per step set beside the projection's (harness/distro_bench/train/projection.py), with
the step time and the workers' peak resident memory. Prints a table; asserts nothing.

    sudo .venv/bin/python benchmarks/scale_workers.py [--workers 4 8 16 32] [--steps 4] [--optimizer NAME ...]

What the projection predicts per worker per step (B: the gradient bytes, s: one worker's DisTrO packet):
AdamW's ring all-reduce moves 2(N-1)/N*B each way (4(N-1)/N*B on the wire, tx + rx); DisTrO's ring
all-gather and its direct exchange both move (N-1)*s each way (2(N-1)s), the ring in N-1 rounds, direct
in one. Wire figures carry the TCP/IPv4/Ethernet framing of full segments (1514/1448). Payload is what the
optimizer handed to its collectives (an all-reduce: B sent and B received, whatever N).
Peak memory is each worker's ru_maxrss from its end record (`max_rss_bytes`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from distro_bench.run.runner import RunOptions, run_scenario
from distro_bench.scenario.loading import load_scenario, scenario_from_dict, with_overrides
from distro_bench.scenario.model import Scenario
from distro_bench.train.projection import project

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "scale-32.yaml"


def with_workers(s: Scenario, n: int) -> Scenario:
    """The scenario with its one worker group resized to `n` (re-validated)."""
    data = s.model_dump(mode="json", exclude_none=True)
    data["data"]["corpus"] = s.corpus_path()
    if len(data["workers"]) != 1:
        raise SystemExit(f"{s.name}: expected one worker group to resize, found {len(data['workers'])}")
    data["workers"][0]["count"] = n
    return scenario_from_dict(data, source=f"{s.name} at {n} workers")


@dataclass(frozen=True)
class Row:
    workers: int
    optimizer: str
    payload: float  # measured tx + rx per worker per step
    payload_pred: float
    wire: float | None  # measured on eth0, tx + rx
    wire_pred: float
    rounds: int
    step_s: float
    max_rss_mib: float  # the largest worker's peak
    mean_rss_mib: float

    @property
    def payload_ratio(self) -> float:
        return self.payload / self.payload_pred

    @property
    def wire_ratio(self) -> float | None:
        return None if self.wire is None else self.wire / self.wire_pred


def peak_rss(run_dir: Path, optimizer: str) -> list[int]:
    """Each rank's `max_rss_bytes` from its end record."""
    out = []
    for f in sorted((run_dir / "workers" / optimizer).glob("rank*.jsonl")):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("type") == "end" and rec.get("max_rss_bytes"):
                out.append(int(rec["max_rss_bytes"]))
    return out


def measure(s: Scenario, out: Path, backend: str) -> list[Row]:
    """One run of `s`; a row per optimizer."""
    result = run_scenario(s, RunOptions(backend=backend, out=out, write_report=False))
    if result.state != "complete":
        raise SystemExit(f"{s.name} at {s.world_size} workers: run {result.state} ({result.run_dir})")
    summary = json.loads((result.run_dir / "summary.json").read_text())["optimizers"]
    rows = []
    for p in project(s):
        m = summary[p.optimizer]
        wire = (None if m["wire_tx_bytes_per_step"] is None
                else m["wire_tx_bytes_per_step"] + m["wire_rx_bytes_per_step"])
        rss = peak_rss(result.run_dir, p.optimizer)
        rows.append(Row(workers=s.world_size, optimizer=p.optimizer,
                        payload=m["payload_tx_bytes_per_step"] + m["payload_rx_bytes_per_step"],
                        payload_pred=p.payload_tx_bytes + p.payload_rx_bytes, wire=wire,
                        wire_pred=p.wire_tx_bytes + p.wire_rx_bytes, rounds=p.rounds, step_s=m["step_time_s_mean"],
                        max_rss_mib=max(rss, default=0) / 2**20, mean_rss_mib=sum(rss) / max(1, len(rss)) / 2**20))
    return rows


def table(rows: list[Row]) -> str:
    head = ("| workers | optimizer | rounds | payload B (measured) | payload B (predicted) | ratio "
            "| wire B (measured) | wire B (predicted) | ratio | step s | peak RSS MiB (max / mean) |")
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        wire = "-" if r.wire is None else f"{r.wire:,.0f}"
        wratio = "-" if r.wire_ratio is None else f"{r.wire_ratio:.3f}"
        lines.append(f"| {r.workers} | {r.optimizer} | {r.rounds} | {r.payload:,.0f} | {r.payload_pred:,.0f} "
                     f"| {r.payload_ratio:.3f} | {wire} | {r.wire_pred:,.0f} | {wratio} | {r.step_s:.3f} "
                     f"| {r.max_rss_mib:.0f} / {r.mean_rss_mib:.0f} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scenario", type=Path, default=SCENARIO)
    p.add_argument("--workers", type=int, nargs="+", default=[4, 8, 16, 32])
    p.add_argument("--steps", type=int, default=None, help="override the scenario's step budget")
    p.add_argument("--optimizer", action="append", default=None, help="run only these (repeatable)")
    p.add_argument("--backend", default="netns")
    args = p.parse_args()
    base = with_overrides(load_scenario(args.scenario), steps=args.steps, optimizers=args.optimizer)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as out:
        for n in args.workers:
            t0 = time.monotonic()
            rows += measure(with_workers(base, n), Path(out), args.backend)
            print(f"{n} workers: {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
