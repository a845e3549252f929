"""The typed summary (distro_bench.results.summary): public keys as fields, dict access, extra keys kept, the verdict line,
and plain progress lines."""

from __future__ import annotations

import io

from distro_bench.cli.progress import PlainProgress
from distro_bench.report.verdict_words import figure_lines
from distro_bench.results import metrics
from distro_bench.results.summary import OptimizerSummary, Summary


def _summary() -> dict:
    base = dict.fromkeys(metrics.SUMMARY_KEYS)
    adamw = {**base, "steps": 50, "step_time_s_mean": 3.02, "final_val_loss": 2.10, "reduction_vs_baseline": 1.0,
             "reduction_basis": "wire", "wire_tx_bytes_per_step": 1.2e6, "wire_rx_bytes_per_step": 1.2e6,
             "replicas_identical": True}
    distro = {**adamw, "step_time_s_mean": 0.3775, "final_val_loss": 2.69, "reduction_vs_baseline": 565.0,
              "wire_tx_bytes_per_step": 2130.0, "wire_rx_bytes_per_step": 2118.0}
    return {"schema_version": 1, "run": {"scenario": "home-dsl", "backend": "netns", "state": "complete",
                                         "world_size": 4, "budget": {"kind": "steps", "value": 50}},
            "baseline": "adamw", "optimizers": {"adamw": adamw, "distro": {**distro, "new_key": 7}},
            "target": {"val_loss": 2.75, "how": "worst optimizer's best", "post_hoc": True}}


def test_every_public_key_is_a_field():
    assert set(metrics.SUMMARY_KEYS) <= set(OptimizerSummary.model_fields)


def test_typed_and_dict_access_agree_and_extras_survive():
    s = Summary.model_validate(_summary())
    d = s.optimizers["distro"]
    assert d.reduction_vs_baseline == d["reduction_vs_baseline"] == 565.0
    assert s["optimizers"]["adamw"]["step_time_s_mean"] == 3.02 and s["run"]["world_size"] == 4
    assert d["new_key"] == 7 and d.get("missing", "x") == "x" and "new_key" in d
    assert s.to_dict() == _summary()
    assert d.bytes_per_step() == 2130.0 + 2118.0


def test_of_types_a_mapping_once_and_keeps_a_summary_as_it_is():
    typed = Summary.of(_summary())
    assert isinstance(typed, Summary) and Summary.of(typed) is typed
    assert typed.optimizers["distro"].reduction_vs_baseline == 565.0 and typed.run.budget == {"kind": "steps", "value": 50}
    old = {**_summary(), "target": {"val_loss": 2.75, "how": "the worst optimizer's best val loss"}}
    assert Summary.of(old).target["post_hoc"] is True  # migrated as it is typed (MIGRATIONS)


def test_verdict_line():
    (line,) = figure_lines(_summary())
    assert line == "distro: 8.0x faster steps, 565x fewer wire bytes, val loss +0.59 vs adamw"


def test_plain_progress_prints_every_n_steps_and_on_a_timer():
    out, now = io.StringIO(), [0.0]
    p = PlainProgress(stream=out, every=5, interval_s=10.0, clock=lambda: now[0])
    p.start("adamw", 20)
    rec = {"loss": 3.0, "step_time_s": 0.12, "payload_tx_bytes": 2000, "payload_rx_bytes": 2260}
    for step in range(7):
        p.step("adamw", {**rec, "step": step})
    now[0] = 11.0
    p.step("adamw", {**rec, "step": 7})  # not a multiple of 5, but 10 s have passed
    p.finish("adamw")
    lines = out.getvalue().splitlines()
    assert lines[0] == "adamw: starting workers, then training 20 steps"
    assert [line.split(",")[0] for line in lines[1:]] == ["adamw: step 5/20", "adamw: step 8/20"]
    assert "120 ms/step" in lines[1] and "4.26 kB/step" in lines[1]
