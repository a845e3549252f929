"""What reaching the target loss costs (issue 29): egress bytes and dollars, GPU-hours (worker-hours on CPU)
and joules, per optimizer and seed, from summary.json's figures and the scenario's `costs` prices.

Per seed: egress bytes = egress bytes per worker per step x steps to target x workers, egress $ = bytes / 1e9
x `egress_usd_per_gb`; GPU-hours = workers x time to target / 3600 (GPU $ = hours x `gpu_usd_per_hour` where
priced). A worker's egress per step is (tx + rx) / 2 on the comparison's basis (wire where every optimizer
counted it, else payload): inside the group every byte one worker sends another receives, so the group's
egress is half its tx + rx, and the ratio between optimizers stays the verdict's bytes ratio. A seed that
missed the target is costed at its whole run (steps and training seconds at the budget): a lower bound,
shown ">=". Energy needs NVML energy counters sampled during the run; none are, so joules are null with the
reason in `costs.energy_note`. Pure and torch-free: the CLI's verdict imports it.
"""

from __future__ import annotations

import ctypes.util
from dataclasses import dataclass

from distro_bench.results.metrics import COST_KEYS
from distro_bench.results.stats import Interval, finite, ratio_interval, t_interval

# The per-optimizer keys written into summary.json (means over seeds; null where a seed missed the target,
# like time_to_target_s), each seed's in per_seed, intervals in ci95. docs/run-folder.md.
# They are metrics.COST_KEYS, in metrics.SUMMARY_KEYS: summary.json's key order and summary.csv's
# columns include them.


@dataclass(frozen=True)
class SeedCost:
    egress_bytes: float
    egress_usd: float | None  # None: egress not priced (costs.egress_usd_per_gb: null)
    hours: float  # worker-hours: GPU-hours when the workers ran on GPUs
    gpu_usd: float | None  # None: no gpu_usd_per_hour
    capped: bool  # missed the target: the whole run's cost, a lower bound

    @property
    def usd(self) -> float | None:
        """Egress + GPU dollars (whichever are priced); None when nothing is."""
        parts = [x for x in (self.egress_usd, self.gpu_usd) if x is not None]
        return sum(parts) if parts else None


def nvml_present() -> bool:
    """True where NVIDIA's management library can be found (the energy counters would come from it)."""
    return ctypes.util.find_library("nvidia-ml") is not None


def energy_note() -> str:
    if not nvml_present():
        return "not measured: NVML (libnvidia-ml) is absent on this host, so there is no energy counter to read"
    return "not measured: NVML is present but the workers do not sample its energy counters yet"


def hours_unit(devices: list[str]) -> str:
    """'GPU-h' when every worker ran on a GPU, else 'CPU-h' (worker-hours on CPU: a GPU-hour price does not apply)."""
    return "GPU-h" if devices and all(str(d).startswith("cuda") for d in devices) else "CPU-h"


def bytes_basis(optimizers: dict) -> str:
    """Wire where every optimizer counted it, else payload (one basis for all, so ratios compare like with like)."""
    def has_wire(s: dict) -> bool:
        return finite(s.get("wire_tx_bytes_per_step")) and finite(s.get("wire_rx_bytes_per_step"))

    opts = [s for s in optimizers.values() if isinstance(s, dict)]
    return "wire" if opts and all(has_wire(s) for s in opts) else "payload"


def seed_cost(seed: dict, basis: str, workers: int, costs: dict) -> SeedCost | None:
    """One seed's cost to the target (at the budget where it missed); None without the figures to cost it."""
    tx, rx = seed.get(f"{basis}_tx_bytes_per_step"), seed.get(f"{basis}_rx_bytes_per_step")
    reached = finite(seed.get("time_to_target_s")) and finite(seed.get("steps_to_target"))
    steps = seed.get("steps_to_target") if reached else seed.get("steps")
    secs = seed.get("time_to_target_s") if reached else seed.get("train_time_s")
    if not (finite(tx) and finite(rx) and finite(steps) and finite(secs) and workers > 0):
        return None
    egress = (tx + rx) / 2 * steps * workers
    hours = workers * secs / 3600
    price, gpu_price = costs.get("egress_usd_per_gb"), costs.get("gpu_usd_per_hour")
    return SeedCost(egress_bytes=egress, egress_usd=egress / 1e9 * price if finite(price) else None,
                    hours=hours, gpu_usd=hours * gpu_price if finite(gpu_price) else None, capped=not reached)


def _workers(summary: dict, s: dict) -> int:
    w = (summary.get("run") or {}).get("world_size")
    if not isinstance(w, int) or isinstance(w, bool):
        w = s.get("ranks")
    return w if isinstance(w, int) and not isinstance(w, bool) else 0


def seed_costs(summary: dict, name: str) -> dict[str, SeedCost]:
    """{seed: cost} for one optimizer of a summary that has `costs` (empty otherwise, or with no target)."""
    costs = summary.get("costs")
    s = (summary.get("optimizers") or {}).get(name)
    target = (summary.get("target") or {}).get("val_loss") if isinstance(summary.get("target"), dict) else None
    if not isinstance(costs, dict) or not isinstance(s, dict) or not finite(target):
        return {}
    basis = costs.get("bytes_basis") or bytes_basis(summary.get("optimizers") or {})
    per_seed = s.get("per_seed") or {"-": s}  # a folder without per_seed: its means are the one seed
    out = {}
    for k, seed in per_seed.items():
        c = seed_cost(seed, basis, _workers(summary, s), costs) if isinstance(seed, dict) else None
        if c is not None:
            out[str(k)] = c
    return out


def _field(c: SeedCost, key: str) -> float | None:
    return {"egress_bytes_to_target": c.egress_bytes, "egress_usd_to_target": c.egress_usd,
            "gpu_hours_to_target": c.hours, "gpu_usd_to_target": c.gpu_usd, "energy_j_to_target": None}[key]


def add_costs(summary: dict, costs: dict, devices: list[str]) -> dict:
    """Write the top-level `costs` (prices, basis, unit, energy note) and each optimizer's COST_KEYS (means
    over seeds, null where a seed missed the target; per seed; ci95) into `summary`, in place. With no target
    loss, only the prices are recorded."""
    summary["costs"] = {"egress_usd_per_gb": costs.get("egress_usd_per_gb"),
                        "gpu_usd_per_hour": costs.get("gpu_usd_per_hour"),
                        "bytes_basis": bytes_basis(summary.get("optimizers") or {}),
                        "hours_unit": hours_unit(devices), "energy_j": None, "energy_note": energy_note()}
    for name, s in (summary.get("optimizers") or {}).items():
        per = seed_costs(summary, name)
        if not per:
            continue
        for key in COST_KEYS:
            vals = {k: (None if c.capped else _field(c, key)) for k, c in per.items()}
            for k, v in vals.items():
                if k in (s.get("per_seed") or {}):
                    s["per_seed"][k][key] = v
            iv = t_interval(vals.values()) if all(v is not None for v in vals.values()) else None
            s[key] = None if iv is None else iv.mean
            if isinstance(s.get("ci95"), dict):
                s["ci95"][key] = None if iv is None or iv.n < 2 else [iv.lo, iv.hi]
    return summary


@dataclass(frozen=True)
class CostSide:
    """One optimizer's mean cost over seeds (missed seeds at their whole run: then `capped`)."""

    usd: float | None
    egress_usd: float | None
    gpu_usd: float | None
    hours: float
    capped: bool
    seeds: dict[str, SeedCost]


def side(summary: dict, name: str) -> CostSide | None:
    per = seed_costs(summary, name)
    if not per:
        return None

    def mean(key: str) -> float | None:
        vals = [getattr(c, key) for c in per.values()]
        return None if any(v is None for v in vals) else sum(vals) / len(vals)

    return CostSide(usd=mean("usd"), egress_usd=mean("egress_usd"), gpu_usd=mean("gpu_usd"), hours=sum(c.hours for c in per.values()) / len(per),
                    capped=any(c.capped for c in per.values()), seeds=per)


def paired_ratio(base: CostSide, mine: CostSide) -> Interval | None:
    """Baseline cost / this optimizer's, seed by seed on the log scale (dollars where priced, else hours)."""
    key = "usd" if base.usd is not None and mine.usd is not None else "hours"
    iv = ratio_interval({k: getattr(c, key) for k, c in base.seeds.items()},
                        {k: getattr(c, key) for k, c in mine.seeds.items()})
    return iv if iv is not None and iv.n >= 2 else None


__all__ = ["COST_KEYS", "CostSide", "SeedCost", "add_costs", "bytes_basis", "energy_note", "hours_unit",
           "nvml_present", "paired_ratio", "seed_cost", "seed_costs", "side"]
