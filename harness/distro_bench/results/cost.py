"""What reaching the target loss costs (issues 29 and 34): egress bytes and dollars, GPU-hours (worker-hours on
CPU) and joules, per optimizer and seed, from summary.json's figures and the scenario's `costs`.

Per seed: egress bytes = bytes each worker *sends* per step x steps to target x workers, on the wire where every
optimizer's wire counters were read; else the projection's ring wire bytes for this run (prediction.json: an
all-reduce of B sends 2(N-1)/N x B per worker, as the ring moves it, not the B the optimizer hands over); else the
payload it sends (a lower bound, said so). Egress $ prices each worker's bytes at its link's class
(LINK_CLASS_USD_PER_GB; the scenario's `costs.link_classes`, or `costs.egress_usd_per_gb` for every link).
GPU-hours = workers x GPUs per worker x time to target / 3600 (GPU $ = hours x `gpu_usd_per_hour` where
priced). A seed that missed the target is costed at its whole run (steps and training seconds at the budget): a
lower bound, shown ">=". Energy needs NVML energy counters sampled during the run; none are, so joules are null
with the reason in `costs.energy_note`. Pure and torch-free: the CLI's verdict imports it.
"""

from __future__ import annotations

import ctypes.util
from collections.abc import Mapping
from dataclasses import dataclass

from distro_bench.results.metrics import COST_KEYS
from distro_bench.results.stats import Interval, finite, ratio_interval, t_interval

# The per-optimizer keys written into summary.json (means over seeds; null where a seed missed the target,
# like time_to_target_s), each seed's in per_seed, intervals in ci95. docs/run-folder.md.
# They are metrics.COST_KEYS, in metrics.SUMMARY_KEYS: summary.json's key order and summary.csv's
# columns include them.

# What the sender pays per GB it sends, by link class (the scenario's `costs.link_classes`):
LINK_CLASS_USD_PER_GB = {
    # residential broadband (DSL, cable, fibre, LTE and satellite plans) is billed per month, not per byte;
    # a capped plan's overage is not modelled
    "home": 0.0,
    # AWS EC2 on-demand pricing, "Data Transfer" (aws.amazon.com/ec2/pricing/on-demand/): data transferred
    # within the same Availability Zone over private IPv4 addresses is free
    "cloud-same-zone": 0.0,
    # same page: data transfer out of a US region (us-east-1) to another AWS region, $0.02 per GB
    "cloud-inter-region": 0.02,
    # same page: data transfer out to the internet, first 10 TB a month, $0.09 per GB (scenario.EGRESS_USD_PER_GB)
    "internet": 0.09,
}
# A link not named in `costs.link_classes`: its preset's class (the datacenter preset is a top-of-rack link in
# one zone), else home, the case this harness is about.
PRESET_CLASS = {"datacenter": "cloud-same-zone"}
DEFAULT_CLASS = "home"


def link_class_of(link_name: str | None, link_classes: Mapping[str, str] | None = None) -> str:
    """The class a worker's link is priced at."""
    named = (link_classes or {}).get(link_name or "")
    return named or PRESET_CLASS.get(link_name or "", DEFAULT_CLASS)


def egress_prices(classes: list[str], flat: float | None = None) -> list[float]:
    """Each worker's $/GB: `flat` (costs.egress_usd_per_gb) for every link where set, else its class's price."""
    return [flat if finite(flat) else LINK_CLASS_USD_PER_GB[c] for c in classes]


@dataclass(frozen=True)
class SeedCost:
    egress_bytes: float  # sent by all workers together
    egress_usd: float | None  # None: egress not priced
    hours: float  # GPU-hours (workers x GPUs per worker x hours) when the workers ran on GPUs, else worker-hours
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


BASIS_WORDS = {"wire": "wire bytes sent", "predicted": "ring wire bytes sent (projected: no wire counters)",
               "payload": "payload bytes sent (no wire counters, no prediction: a lower bound for an all-reduce)"}


def bytes_basis(optimizers: dict, predicted: Mapping[str, float | None] | None = None) -> str:
    """Wire where every optimizer counted it, else the projection's ring wire bytes where it has every optimizer,
    else payload (one basis for all, so ratios compare like with like)."""
    def has_wire(s: dict) -> bool:
        return finite(s.get("wire_tx_bytes_per_step")) and finite(s.get("wire_rx_bytes_per_step"))

    opts = {k: s for k, s in optimizers.items() if isinstance(s, dict)}
    if opts and all(has_wire(s) for s in opts.values()):
        return "wire"
    if opts and predicted and all(finite(predicted.get(k)) for k in opts):
        return "predicted"
    return "payload"


def seed_cost(seed: dict, basis: str, workers: int, costs: dict, *, predicted_tx: float | None = None,
              prices: list[float] | None = None, gpus_per_worker: int = 1) -> SeedCost | None:
    """One seed's cost to the target (at the budget where it missed); None without the figures to cost it.
    `prices`: each worker's $/GB (egress_prices); without them, `costs.egress_usd_per_gb` for every worker."""
    tx = predicted_tx if basis == "predicted" else seed.get(f"{basis}_tx_bytes_per_step")
    reached = finite(seed.get("time_to_target_s")) and finite(seed.get("steps_to_target"))
    steps = seed.get("steps_to_target") if reached else seed.get("steps")
    secs = seed.get("time_to_target_s") if reached else seed.get("train_time_s")
    if not (finite(tx) and finite(steps) and finite(secs) and workers > 0):
        return None
    egress = tx * steps * workers
    if prices is None:
        flat = costs.get("egress_usd_per_gb")
        prices = [flat] * workers if finite(flat) else []
    price = sum(prices) / len(prices) if prices else None  # the workers send alike: the mean price
    hours = workers * gpus_per_worker * secs / 3600
    gpu_price = costs.get("gpu_usd_per_hour")
    return SeedCost(egress_bytes=egress, egress_usd=egress / 1e9 * price if price is not None else None,
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
    predicted = costs.get("predicted_wire_tx_bytes_per_step") or {}
    # an old folder's unknown basis was read as payload when the summary was loaded (results/summary.py MIGRATIONS)
    basis = costs.get("bytes_basis") or bytes_basis(summary.get("optimizers") or {}, predicted)
    prices = costs.get("worker_usd_per_gb")
    per_seed = s.get("per_seed") or {"-": s}  # a folder without per_seed: its means are the one seed
    out = {}
    for k, seed in per_seed.items():
        c = (seed_cost(seed, basis, _workers(summary, s), costs, predicted_tx=predicted.get(name),
                       prices=prices if isinstance(prices, list) and prices else None,
                       gpus_per_worker=int(costs.get("gpus_per_worker") or 1))
             if isinstance(seed, dict) else None)
        if c is not None:
            out[str(k)] = c
    return out


def _field(c: SeedCost, key: str) -> float | None:
    return {"egress_bytes_to_target": c.egress_bytes, "egress_usd_to_target": c.egress_usd,
            "gpu_hours_to_target": c.hours, "gpu_usd_to_target": c.gpu_usd, "energy_j_to_target": None}[key]


def add_costs(summary: dict, costs: dict, devices: list[str], *, link_classes: list[str] | None = None,
              predicted_wire_tx: Mapping[str, float | None] | None = None, gpus_per_worker: int = 1) -> dict:
    """Write the top-level `costs` (prices, link classes, basis, unit, energy note) and each optimizer's COST_KEYS
    (means over seeds, null where a seed missed the target; per seed; ci95) into `summary`, in place. With no
    target loss, only the prices are recorded. `link_classes`: each worker's (link_class_of), in rank order;
    `predicted_wire_tx`: optimizer -> the projection's wire bytes sent per worker per step (prediction.json);
    `gpus_per_worker`: devices each worker drives (one per worker process here)."""
    classes = list(link_classes or [])
    flat = costs.get("egress_usd_per_gb")
    summary["costs"] = {"egress_usd_per_gb": flat,
                        "gpu_usd_per_hour": costs.get("gpu_usd_per_hour"),
                        "link_classes": classes,
                        "class_usd_per_gb": {c: LINK_CLASS_USD_PER_GB[c] for c in sorted(set(classes))},
                        "worker_usd_per_gb": egress_prices(classes, flat) if classes else None,
                        "predicted_wire_tx_bytes_per_step": dict(predicted_wire_tx or {}) or None,
                        "bytes_basis": bytes_basis(summary.get("optimizers") or {}, predicted_wire_tx),
                        "gpus_per_worker": gpus_per_worker,
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
    egress_bytes: float = 0.0


def side(summary: dict, name: str) -> CostSide | None:
    per = seed_costs(summary, name)
    if not per:
        return None

    def mean(key: str) -> float | None:
        vals = [getattr(c, key) for c in per.values()]
        return None if any(v is None for v in vals) else sum(vals) / len(vals)

    return CostSide(usd=mean("usd"), egress_usd=mean("egress_usd"), gpu_usd=mean("gpu_usd"),
                    hours=sum(c.hours for c in per.values()) / len(per),
                    capped=any(c.capped for c in per.values()), seeds=per,
                    egress_bytes=sum(c.egress_bytes for c in per.values()) / len(per))


def one_currency(base: CostSide, mine: CostSide) -> bool:
    """Whether dollars cover both what the bytes and what the hours cost (egress and GPU both priced): only
    then is one 'Nx cheaper' a verdict; otherwise the bytes and the hours are compared apart."""
    return all(c.egress_usd is not None and c.gpu_usd is not None for c in (base, mine))


def paired_ratio(base: CostSide, mine: CostSide) -> Interval | None:
    """Baseline cost / this optimizer's, seed by seed on the log scale (dollars where they cover bytes and
    hours, else hours)."""
    key = "usd" if one_currency(base, mine) else "hours"
    iv = ratio_interval({k: getattr(c, key) for k, c in base.seeds.items()},
                        {k: getattr(c, key) for k, c in mine.seeds.items()})
    return iv if iv is not None and iv.n >= 2 else None


__all__ = ["BASIS_WORDS", "COST_KEYS", "LINK_CLASS_USD_PER_GB", "CostSide", "SeedCost", "add_costs", "bytes_basis",
           "egress_prices", "energy_note", "hours_unit", "link_class_of", "nvml_present", "one_currency",
           "paired_ratio", "seed_cost", "seed_costs", "side"]
