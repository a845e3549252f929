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
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.scenario.model import EGRESS_USD_PER_GB

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
    assert v.mine.cost.usd == pytest.approx(0.00045) and v.base.cost.usd == pytest.approx(0.018)
    lines = verdict_lines(s)
    i = next(i for i, line in enumerate(lines) if "cost to target $, CPU-h" in line)
    row = " ".join(lines[i:i + 2])  # the comparison may sit on the next line, under the figures
    # dollars price the bytes only (no GPU price): the bytes and the hours are compared apart, never "cheaper"
    assert "$0.00045, 0.044" in row and "$0.018, 0.11" in row and "40x less egress, 2.5x fewer CPU-h" in row, row
    assert "cheaper" not in row
    assert all(len(line) <= WIDTH for line in verdict_lines(s))


def test_gpu_price_adds_to_the_dollars():
    s = cost.add_costs(summary(), {"egress_usd_per_gb": 0.09, "gpu_usd_per_hour": 2.0}, ["cuda:0"] * WORKERS)
    a = s["optimizers"]["adamw"]
    assert a["gpu_usd_to_target"] == pytest.approx(2.0 * 400 / 3600)
    assert s["costs"]["hours_unit"] == "GPU-h"
    (v,) = verdicts(s)
    assert v.base.cost.usd == pytest.approx(0.018 + 2.0 * 400 / 3600)


def test_a_missed_seed_is_costed_at_the_budget_and_shown_as_a_bound():
    s = cost.add_costs(summary(distro_missed=True), PRICES, ["cpu"] * WORKERS)
    d = s["optimizers"]["distro"]
    assert d["egress_usd_to_target"] is None and d["gpu_hours_to_target"] is None  # no mean over a missed seed
    assert d["per_seed"]["1"]["egress_usd_to_target"] is None
    assert d["per_seed"]["0"]["egress_usd_to_target"] == pytest.approx(0.00045)
    (v,) = verdicts(s)
    # seed 1 at its whole run: 1e4 x 200 steps x 4 = 8e6 bytes ($0.00072), 4 x 80 s; mean with seed 0's
    assert v.mine.cost.capped and v.mine.cost.usd == pytest.approx((0.00045 + 0.00072) / 2)
    assert v.mine.cost.hours == pytest.approx((160 + 320) / 3600 / 2)
    lines = verdict_lines(s)
    i = next(i for i, line in enumerate(lines) if "cost to target" in line)
    row = " ".join(lines[i:i + 2])
    # a lower bound on mine: at most that much less (egress 2e8 / mean(5e6, 8e6) = 31; hours 0.111 / 0.0667 = 1.7)
    assert ">=$0.00059, 0.067" in row and "<=31x less egress, <=1.7x fewer CPU-h" in row, row


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


def test_scenario_costs_default_to_link_classes_and_reject_bad_input():
    s = scenario_from_dict(_scenario(), base_dir=None)
    assert s.costs.egress_usd_per_gb is None and s.costs.gpu_usd_per_hour is None and s.costs.link_classes == {}
    assert EGRESS_USD_PER_GB == cost.LINK_CLASS_USD_PER_GB["internet"] == 0.09
    assert scenario_from_dict(_scenario({"gpu_usd_per_hour": 2.5})).costs.gpu_usd_per_hour == 2.5
    with pytest.raises(InputError, match="egress_usd_per_gb"):
        scenario_from_dict(_scenario({"egress_usd_per_gb": -1}))
    with pytest.raises(InputError, match="link_classes"):
        scenario_from_dict(_scenario({"link_classes": {"dsl": "moon"}}))
    with pytest.raises(InputError, match=r"costs\.link_classes: 'wan' is not a link the workers use"):
        scenario_from_dict(_scenario({"link_classes": {"wan": "internet"}}))
    s = scenario_from_dict(_scenario({"link_classes": {"dsl": "cloud-inter-region"}}))
    assert cost.link_class_of("dsl", s.costs.link_classes) == "cloud-inter-region"


def test_egress_is_priced_per_link_class():
    """Issue 34: a home line pays nothing per byte; a cloud node pays its provider's egress (sourced prices)."""
    assert cost.link_class_of("dsl") == "home" and cost.link_class_of("datacenter") == "cloud-same-zone"
    assert cost.link_class_of("wan", {"wan": "internet"}) == "internet"
    prices = cost.LINK_CLASS_USD_PER_GB
    assert (prices["home"], prices["cloud-same-zone"], prices["cloud-inter-region"], prices["internet"]) == \
        (0.0, 0.0, 0.02, 0.09)
    home = cost.add_costs(summary(), {"egress_usd_per_gb": None}, ["cpu"] * WORKERS, link_classes=["home"] * WORKERS)
    assert home["optimizers"]["adamw"]["egress_usd_to_target"] == 0.0  # 2e8 bytes, at $0/GB
    assert home["costs"]["class_usd_per_gb"] == {"home": 0.0}
    mixed = ["home", "home", "cloud-inter-region", "internet"]  # the workers send alike: the mean price
    s = cost.add_costs(summary(), {"egress_usd_per_gb": None}, ["cpu"] * WORKERS, link_classes=mixed)
    assert s["optimizers"]["adamw"]["egress_usd_to_target"] == pytest.approx(0.2 * (0.02 + 0.09) / 4)
    flat = cost.add_costs(summary(), {"egress_usd_per_gb": 0.05}, ["cpu"] * WORKERS, link_classes=mixed)
    assert flat["optimizers"]["adamw"]["egress_usd_to_target"] == pytest.approx(0.2 * 0.05)  # one price for all
    lines = " ".join(line.strip() for line in verdict_lines(s))
    assert "priced by link class (cloud-inter-region $0.02/GB, home $0/GB, internet $0.09/GB)" in lines, lines


def _payload_only(s: dict) -> dict:
    """The summary as a run without wire counters (loopback) records it: payload as the optimizer hands it over."""
    for o in s["optimizers"].values():
        for rec in [o, *o["per_seed"].values()]:
            rec["wire_tx_bytes_per_step"] = rec["wire_rx_bytes_per_step"] = None
    return s


def test_ring_all_reduce_egress_is_what_the_ring_sends():
    """An all-reduce of B hands the optimizer B to send, but the ring sends 2(N-1)/N x B per worker (1.5x at 4):
    without wire counters, egress comes from the projection's ring wire bytes (prediction.json), not payload."""
    predicted = {"adamw": 1.5e6, "distro": 3e4}  # 2(N-1)/N x 1e6; an all-gather of 1e4 sends (N-1) x 1e4
    s = cost.add_costs(_payload_only(summary()), PRICES, ["cpu"] * WORKERS, predicted_wire_tx=predicted)
    assert s["costs"]["bytes_basis"] == "predicted"
    assert s["optimizers"]["adamw"]["egress_bytes_to_target"] == pytest.approx(1.5e6 * 50 * WORKERS)
    assert s["optimizers"]["distro"]["egress_bytes_to_target"] == pytest.approx(3e4 * 125 * WORKERS)
    payload = cost.add_costs(_payload_only(summary()), PRICES, ["cpu"] * WORKERS)
    assert payload["costs"]["bytes_basis"] == "payload"  # no prediction: the payload sent, said to be a lower bound
    assert payload["optimizers"]["adamw"]["egress_bytes_to_target"] == pytest.approx(1e6 * 50 * WORKERS)
    assert "lower bound" in cost.BASIS_WORDS["payload"]


def test_gpu_hours_count_every_gpu_of_a_worker():
    s = cost.add_costs(summary(), {"egress_usd_per_gb": 0.09, "gpu_usd_per_hour": 2.0}, ["cuda:0"] * WORKERS,
                       gpus_per_worker=8)
    a = s["optimizers"]["adamw"]
    assert a["gpu_hours_to_target"] == pytest.approx(WORKERS * 8 * 100 / 3600)  # an 8-GPU node is 8 GPU-hours an hour
    assert s["costs"]["gpus_per_worker"] == 8
    note = " ".join(line.strip() for line in verdict_lines(s))
    assert "workers x GPUs per worker x hours" in note


def test_a_bytes_win_and_an_hours_loss_are_not_one_verdict():
    """The new user's case: DisTrO sends 200x fewer bytes but took more CPU-hours; no '200x cheaper'."""
    base = summary()
    for seed in base["optimizers"]["distro"]["per_seed"].values():
        seed["time_to_target_s"] = 250.0  # slower to the target than AdamW's 100 s
    base["optimizers"]["distro"]["time_to_target_s"] = 250.0
    s = cost.add_costs(base, PRICES, ["cpu"] * WORKERS)
    row = " ".join(line for line in verdict_lines(s) if line.strip())
    assert "40x less egress, 2.5x more CPU-h" in row and "cheaper" not in row, row
