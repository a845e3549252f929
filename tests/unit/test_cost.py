"""Cost to target (issue 29): egress dollars and worker-hours per optimizer and seed, in summary.json and the
verdict's row, from constructed summaries with known bytes, steps and seconds."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from distro_bench.errors import InputError
from distro_bench.report.verdict import WIDTH, verdict_lines, verdicts
from distro_bench.results import cost
from distro_bench.scenario.model import EGRESS_USD_PER_GB, scenario_from_dict

WORKERS = 4


def _seed(wire_per_dir, steps_to_target, ttt, steps=200, train_time=300.0):
    return {"wire_tx_bytes_per_step": wire_per_dir, "wire_rx_bytes_per_step": wire_per_dir,
            "payload_tx_bytes_per_step": wire_per_dir, "payload_rx_bytes_per_step": wire_per_dir,
            "steps": steps, "train_time_s": train_time, "step_time_s_mean": train_time / steps,
            "time_to_target_s": ttt, "steps_to_target": steps_to_target}


def _opt(seeds: dict) -> dict:
    vals = list(seeds.values())
    out = {k: sum(s[k] for s in vals) / len(vals) for k in vals[0] if all(s[k] is not None for s in vals)}
    out.update({"seeds": len(vals), "ranks": WORKERS, "ci95": {},
                "per_seed": {str(i): dict(s) for i, s in enumerate(vals)}})
    if any(s["time_to_target_s"] is None for s in vals):
        out["time_to_target_s"] = out["steps_to_target"] = None
    out["target_reached"] = sum(s["time_to_target_s"] is not None for s in vals)
    return out


def summary(distro_missed=False, target=3.0):
    # adamw: 1 MB each way per worker per step, 50 steps / 100 s to target; distro: 10 kB, 125 steps / 40 s.
    adamw = {0: _seed(1e6, 50, 100.0), 1: _seed(1e6, 50, 100.0)}
    distro = {0: _seed(1e4, 125, 40.0), 1: _seed(1e4, 125, 40.0)}
    if distro_missed:
        distro[1] = _seed(1e4, None, None, steps=200, train_time=80.0)
    return {"schema_version": 1, "run": {"scenario": "home-dsl", "world_size": WORKERS,
                                         "budget": {"kind": "steps", "value": 200}},
            "baseline": "adamw", "target": {"val_loss": target, "how": "checks.target_val_loss in the scenario"},
            "optimizers": {"adamw": _opt(adamw), "distro": _opt(distro)}}


PRICES = {"egress_usd_per_gb": 0.09, "gpu_usd_per_hour": None}


def test_exact_dollars_and_hours_for_known_bytes():
    s = cost.add_costs(summary(), PRICES, ["cpu"] * WORKERS)
    a, d = s["optimizers"]["adamw"], s["optimizers"]["distro"]
    # adamw: (1e6 + 1e6) / 2 x 50 steps x 4 workers = 2e8 bytes = 0.2 GB -> $0.018; 4 x 100 s = 0.1111 h
    assert a["egress_bytes_to_target"] == pytest.approx(2e8)
    assert a["egress_usd_to_target"] == pytest.approx(0.018)
    assert a["gpu_hours_to_target"] == pytest.approx(400 / 3600)
    # distro: 1e4 x 125 x 4 = 5e6 bytes -> $0.00045; 4 x 40 s = 0.0444 h
    assert d["egress_usd_to_target"] == pytest.approx(0.00045)
    assert d["gpu_hours_to_target"] == pytest.approx(160 / 3600)
    assert d["per_seed"]["1"]["egress_usd_to_target"] == pytest.approx(0.00045)
    assert d["gpu_usd_to_target"] is None and d["energy_j_to_target"] is None  # no GPU price; no energy counter
    assert s["costs"]["hours_unit"] == "CPU-h" and s["costs"]["bytes_basis"] == "wire"
    (v,) = verdicts(s)
    assert v.cost.usd == pytest.approx(0.00045) and v.base_cost.usd == pytest.approx(0.018)
    lines = verdict_lines(s)
    i = next(i for i, line in enumerate(lines) if "cost to target $, CPU-h" in line)
    row = " ".join(lines[i:i + 2])  # the comparison may sit on the next line, under the figures
    assert "$0.00045, 0.044" in row and "$0.018, 0.11" in row and "40x cheaper" in row, row
    assert all(len(line) <= WIDTH for line in verdict_lines(s))


def test_gpu_price_adds_to_the_dollars():
    s = cost.add_costs(summary(), {"egress_usd_per_gb": 0.09, "gpu_usd_per_hour": 2.0}, ["cuda:0"] * WORKERS)
    a = s["optimizers"]["adamw"]
    assert a["gpu_usd_to_target"] == pytest.approx(2.0 * 400 / 3600)
    assert s["costs"]["hours_unit"] == "GPU-h"
    (v,) = verdicts(s)
    assert v.base_cost.usd == pytest.approx(0.018 + 2.0 * 400 / 3600)


def test_a_missed_seed_is_costed_at_the_budget_and_shown_as_a_bound():
    s = cost.add_costs(summary(distro_missed=True), PRICES, ["cpu"] * WORKERS)
    d = s["optimizers"]["distro"]
    assert d["egress_usd_to_target"] is None and d["gpu_hours_to_target"] is None  # no mean over a missed seed
    assert d["per_seed"]["1"]["egress_usd_to_target"] is None
    assert d["per_seed"]["0"]["egress_usd_to_target"] == pytest.approx(0.00045)
    (v,) = verdicts(s)
    # seed 1 at its whole run: 1e4 x 200 steps x 4 = 8e6 bytes ($0.00072), 4 x 80 s; mean with seed 0's
    assert v.cost.capped and v.cost.usd == pytest.approx((0.00045 + 0.00072) / 2)
    assert v.cost.hours == pytest.approx((160 + 320) / 3600 / 2)
    lines = verdict_lines(s)
    i = next(i for i, line in enumerate(lines) if "cost to target" in line)
    row = " ".join(lines[i:i + 2])
    assert ">=$0.00059, 0.067" in row and "<=32x cheaper" in row, row  # a lower bound on mine: at most that cheaper


def test_no_row_without_a_target_or_without_prices():
    s = cost.add_costs(summary(target=None), PRICES, ["cpu"])
    assert "egress_usd_to_target" not in s["optimizers"]["adamw"] and s["costs"]["egress_usd_per_gb"] == 0.09
    assert not any("cost to target" in line for line in verdict_lines(s))
    old = summary()  # a folder from before issue 29: no `costs`
    assert not any("cost to target" in line for line in verdict_lines(old))
    assert any("cost to target" in line for line in verdict_lines(cost.add_costs(copy.deepcopy(old), PRICES, [])))


def test_energy_is_null_and_says_nvml_is_absent(monkeypatch):
    monkeypatch.setattr(cost, "nvml_present", lambda: False)
    s = cost.add_costs(summary(), PRICES, ["cpu"])
    assert s["costs"]["energy_j"] is None and "NVML" in s["costs"]["energy_note"]
    assert "absent" in s["costs"]["energy_note"]
    assert "energy not measured: NVML" in " ".join(line.strip() for line in verdict_lines(s))


def _scenario(costs=None) -> dict:
    data = yaml.safe_load(Path("scenarios/home-dsl.yaml").read_text())
    if costs is not None:
        data["costs"] = costs
    return data


def test_scenario_costs_default_to_the_sourced_egress_price_and_reject_a_negative_one():
    s = scenario_from_dict(_scenario(), base_dir=None)
    assert s.costs.egress_usd_per_gb == EGRESS_USD_PER_GB == 0.09 and s.costs.gpu_usd_per_hour is None
    assert scenario_from_dict(_scenario({"gpu_usd_per_hour": 2.5})).costs.gpu_usd_per_hour == 2.5
    with pytest.raises(InputError, match="egress_usd_per_gb"):
        scenario_from_dict(_scenario({"egress_usd_per_gb": -1}))
