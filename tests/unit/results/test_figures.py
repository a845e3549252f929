"""results/figures.py: the one table of figures, and the one reduction with its one basis rule (issue 50)."""

from __future__ import annotations

import pytest

from distro_bench.results import figures, metrics
from distro_bench.results.summary import OptimizerSummary
from distro_bench.scenario.gates import GATES
from distro_bench.studies.sweep import POINT_KEYS


def test_the_summary_keys_and_the_model_come_from_the_table():
    keys = [f.key for f in figures.FIGURES]
    assert keys == metrics.SUMMARY_KEYS
    assert len(set(keys)) == len(keys)
    for f in figures.FIGURES:  # one attribute per key, typed as its row says
        assert f.key in OptimizerSummary.model_fields
        assert OptimizerSummary.model_fields[f.key].annotation == (f.kind | None)
    assert {k for k in POINT_KEYS if k in figures.BY_KEY} == {f.key for f in figures.FIGURES if f.point}


def test_every_gate_judges_one_figure():
    gated = [g.key for _, g in figures.gated()]
    assert sorted(gated) == sorted(GATES)


def _side(wire: float | None, payload: float) -> dict:
    return {"wire_tx_bytes_per_step": wire, "wire_rx_bytes_per_step": wire,
            "payload_tx_bytes_per_step": payload, "payload_rx_bytes_per_step": payload}


def test_one_basis_for_a_comparison_wire_only_where_both_sides_counted_it():
    base, cand = _side(1000.0, 800.0), _side(10.0, 8.0)
    assert figures.reduction_basis([base], [cand]) == "wire"
    assert figures.reduction(base, cand, "wire") == pytest.approx(100.0)
    blind = _side(None, 8.0)  # one side without wire counters: both on payload, never wire over payload
    assert figures.reduction_basis([base], [blind]) == "payload"
    assert figures.reduction(base, blind, "payload") == pytest.approx(100.0)
    # one seed of a side without wire bytes puts the whole comparison on payload
    assert figures.reduction_basis([base, _side(None, 800.0)], [cand, cand]) == "payload"
    assert figures.total_bytes({"wire_tx_bytes_per_step": 3.0}, "wire") is None  # both directions or none


def test_summarize_pairs_each_method_with_the_baseline_on_their_shared_basis():
    rows = []
    for opt, wire, payload in (("adamw", 1000, 900), ("distro", 10, 9), ("blind", None, 90)):
        for step in range(3):
            rows.append({"optimizer": opt, "rank": 0, "step": step, "seed": 0, "loss": 1.0, "step_time_s": 0.1,
                         "compute_s": 0.05, "comm_s": 0.05, "t_start": step * 0.1, "t_ready": step * 0.1,
                         "payload_tx_bytes": payload, "payload_rx_bytes": payload, "collectives": 1,
                         "ring_bytes": 0.0, "wire_tx_bytes": wire, "wire_rx_bytes": wire, "tokens": 10,
                         "data_s": 0.0, "stretch_s": 0.0, "compress_s": 0.0, "apply_s": 0.0, "lr": 0.1,
                         "train_time_s": step * 0.1})
    out = metrics.summarize(metrics.records_to_frame(rows), [], "adamw")
    assert out["distro"]["reduction_basis"] == "wire"
    assert out["distro"]["reduction_vs_baseline"] == pytest.approx(100.0)
    assert out["blind"]["reduction_basis"] == "payload"  # its own pair falls back, not the whole run
    assert out["blind"]["reduction_vs_baseline"] == pytest.approx(10.0)


def _records(opt: str, wire: int | None, val: list[tuple[int, float]]) -> list[dict]:
    """Two ranks, six steps, `wire` bytes each way per rank per step; val losses at the given steps."""
    vals = dict(val)
    return [{"optimizer": opt, "rank": r, "step": step, "seed": 0, "loss": 1.0, "val_loss": vals.get(step),
             "step_time_s": 1.0, "compute_s": 0.5, "comm_s": 0.5, "t_start": float(step), "t_ready": float(step),
             "train_time_s": float(step + 1), "payload_tx_bytes": 7, "payload_rx_bytes": 7, "collectives": 1,
             "ring_bytes": 0.0, "wire_tx_bytes": wire, "wire_rx_bytes": wire, "tokens": 10, "data_s": 0.0,
             "stretch_s": 0.0, "compress_s": 0.0, "apply_s": 0.0, "lr": 0.1}
            for step in range(6) for r in range(2)]


def test_wire_bytes_to_target_from_the_step_records():
    # adamw crosses 2.0 at its evaluation after step 5 (6 steps), distro after step 3 (4 steps)
    recs = (_records("adamw", 1000, [(1, 3.0), (3, 2.5), (5, 2.0)])
            + _records("distro", 10, [(1, 3.0), (3, 2.0), (5, 1.6)]))
    out = metrics.summarize(metrics.records_to_frame(recs), [], "adamw", target=2.0)
    a, d = out["adamw"], out["distro"]
    assert a["steps_to_target"] == pytest.approx(6.0) and d["steps_to_target"] == pytest.approx(4.0)
    assert a["wire_bytes_to_target"] == pytest.approx(6 * 2000)  # 6 steps x (1000 tx + 1000 rx) per worker
    assert d["wire_bytes_to_target"] == pytest.approx(4 * 20)
    assert figures.BY_KEY["wire_bytes_to_target"].better == "lower"
    assert OptimizerSummary.model_validate(d).wire_bytes_to_target == pytest.approx(80)


def test_wire_bytes_to_target_is_null_without_wire_counters_or_a_crossing():
    recs = _records("adamw", None, [(1, 3.0), (3, 2.0)]) + _records("distro", 10, [(1, 2.5), (3, 2.4)])
    out = metrics.summarize(metrics.records_to_frame(recs), [], "adamw", target=2.0)
    assert out["adamw"]["wire_bytes_to_target"] is None  # payload bytes are not wire bytes
    assert out["distro"]["wire_bytes_to_target"] is None  # never reached


def test_the_summary_table_takes_its_columns_and_cells_from_the_rows():
    from distro_bench.cli.summary import summary_columns, summary_rows
    from distro_bench.results.summary import Summary

    side = {"step_time_s_mean": 0.5, "comm_s_mean": 0.1, "wire_tx_bytes_per_step": 1e6, "wire_rx_bytes_per_step": 1e6,
            "reduction_vs_baseline": 1.0, "reduction_basis": "wire", "final_loss": 2.1, "final_val_loss": 2.2,
            "replicas_identical": True}
    cand = {**side, "wire_tx_bytes_per_step": 1e3, "wire_rx_bytes_per_step": 1e3, "reduction_vs_baseline": 1000.0,
            "final_val_loss": None, "replicas_identical": False}
    s = Summary.model_validate({"baseline": "adamw", "optimizers": {"adamw": side, "distro": cand}})
    assert summary_columns(s) == ["optimizer", "step", "comm", "wire/step", "fewer", "loss", "val loss", "replicas"]
    base_row, cand_row = summary_rows(s)
    assert base_row[4] == "base" and cand_row[4] == "1,000x"
    assert cand_row[6:] == ["n/a", "DIFFER"] and base_row[7] == "same"
