"""`distro-bench project` as a library call: projections at several worker counts, the paper's accounting,
baseline ratios, plots and projection.json in a folder of its own.

The arithmetic is harness/distro_bench/train/projection.py's; this module only chooses what to project and stores it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from distro_bench.errors import InputError
from distro_bench.scenario import presets
from distro_bench.scenario.model import Scenario
from distro_bench.studies.projection_plots import step_time_vs_bandwidth, step_time_vs_workers
from distro_bench.train.projection import PAPER, nodes_like, paper_accounting, project


@dataclass
class ProjectionStudy:
    scenario: str
    model_name: str
    model: dict
    mfu: float
    baseline: str
    projections: dict[int, list[Any]]  # worker count -> [projection.Projection]
    accounting: list[dict]  # at the largest worker count: payload tx+rx, ring wire each way, paper style
    ratios: list[dict]  # baseline bytes / each optimizer's, in the three accountings
    paper: dict
    crossings_bps: dict[str, float] = field(default_factory=dict)
    plots: list[Path] = field(default_factory=list)
    out: Path | None = None

    def to_dict(self) -> dict:
        """What projection.json holds (numbers as numbers)."""
        return {"scenario": self.scenario, "model": self.model, "mfu": self.mfu,
                "projections": {str(n): [p.as_dict() for p in ps] for n, ps in self.projections.items()},
                "accounting": self.accounting, "ratios": self.ratios, "paper": self.paper,
                "crossings_bps": self.crossings_bps, "plots": [p.name for p in self.plots]}


def default_out(scenario: Scenario, root: Path = Path("results")) -> Path:
    return root / f"project-{scenario.name}-{datetime.now():%Y%m%d-%H%M%S}"


def study(s: Scenario, *, model: str | None = None, workers: list[int] | None = None, mfu: float = 0.4,
          out: Path | None = None, plots: bool = True) -> ProjectionStudy:
    if model and model not in presets.MODELS:
        raise InputError(f"--model: unknown preset {model!r}; known: {', '.join(presets.MODELS)}")
    if not 0 < mfu <= 1:
        raise InputError(f"--mfu: {mfu} is not in (0, 1]")
    model_cfg = dict(presets.MODELS[model]) if model else s.resolved_model()
    counts = sorted(set(workers or [s.world_size]))
    if counts[0] < 1:
        raise InputError("--workers: must be at least 1")
    results = {n: project(s, nodes=nodes_like(s, n), model=model_cfg, mfu=mfu) for n in counts}
    kinds = s.optimizer_configs()
    acc = [paper_accounting(p, kinds[p.optimizer].type) for p in results[counts[-1]]]
    ratios = []
    base = next((r for r in acc if r["optimizer"] == s.baseline), None)
    if base:
        for row in acc:
            if row is not base and row["paper_style"]:
                ratios.append({"optimizer": row["optimizer"], "baseline": s.baseline,
                               **{k: base[k] / row[k] if row[k] else None
                                  for k in ("payload_tx_rx", "wire_each_way", "paper_style")}})
    st = ProjectionStudy(scenario=s.name, model_name=model or s.model.preset or "custom", model=model_cfg, mfu=mfu,
                         baseline=s.baseline, projections=results, accounting=acc, ratios=ratios, paper=PAPER)
    if out is None and not plots:
        return st
    st.out = Path(out) if out is not None else default_out(s)
    st.out.mkdir(parents=True, exist_ok=True)
    if plots:
        workers_plot = step_time_vs_workers(s, model_cfg, sorted(set(counts) | {2, 4, 8, 16, 32, 64}), st.out, mfu)
        bw_plot, st.crossings_bps = step_time_vs_bandwidth(s, model_cfg, counts[-1], st.out, mfu)
        st.plots = [workers_plot, bw_plot]
    (st.out / "projection.json").write_text(json.dumps(st.to_dict(), indent=2))
    return st
