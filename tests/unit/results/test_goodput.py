"""One goodput for every method (issue 37): useful model FLOPs per training second (6 x parameters per token
that reached the shared model), in all, per worker, and as a share of the workers' peak where that peak is
real (every worker on CUDA under a profile with a TFLOPS figure)."""

from __future__ import annotations

import pytest

from distro_bench.results import metrics
from distro_bench.results.metrics import GOODPUT_KEYS, goodput_figures


def _start(rank: int, device: str = "cuda:0", tflops: float | None = 100.0, params: int = 1_000_000) -> dict:
    return {"type": "start", "rank": rank, "world_size": 2, "device": device, "profile_tflops": tflops,
            "params": params}


def test_useful_flops_are_six_per_parameter_and_token_and_the_peak_is_the_profiles():
    g = goodput_figures(1000.0, [_start(0), _start(1)], world=2)
    assert g["goodput_model_flops_per_s"] == pytest.approx(6e9 * 1000 / 1000)  # 6 x 1M params x 1000 tok/s
    assert g["goodput_model_flops_per_s_per_worker"] == pytest.approx(3e9)
    assert g["goodput_of_peak"] == pytest.approx(6e9 / 200e12)


@pytest.mark.parametrize("starts", [
    [_start(0), _start(1, device="cpu")],  # an emulated GPU on this CPU: no such peak here
    [_start(0), _start(1, tflops=None)],  # a profile without a TFLOPS figure
    [_start(0)],  # a worker's start record missing
])
def test_no_share_of_peak_unless_every_worker_has_a_real_one(starts):
    g = goodput_figures(1000.0, starts, world=2)
    assert g["goodput_of_peak"] is None and g["goodput_model_flops_per_s"] == pytest.approx(6e9)


def test_nothing_to_say_without_tokens_or_parameters():
    assert goodput_figures(None, [_start(0)], 2) == dict.fromkeys(GOODPUT_KEYS)
    assert goodput_figures(10.0, [{"type": "start", "rank": 0}], 2) == dict.fromkeys(GOODPUT_KEYS)


def test_every_method_of_a_summary_has_it_from_the_tokens_that_reached_the_model():
    """Two methods, two workers, 4 steps of 100 tokens a worker: 800 tokens that reached the model each."""
    rows = []
    for opt in ("adamw", "distro"):
        for step in range(4):
            for r in range(2):
                rows.append({"type": "step", "optimizer": opt, "rank": r, "step": step, "loss": 3.0 - 0.1 * step,
                             "val_loss": 3.0 - 0.1 * step, "lr": 1e-3, "step_time_s": 0.5, "data_s": 0.0,
                             "compute_s": 0.3, "stretch_s": 0.0, "compress_s": 0.0, "comm_s": 0.2, "apply_s": 0.0,
                             "t_start": 1000.0 + 0.5 * step, "t_ready": 1000.0 + 0.5 * step + 0.3,
                             "payload_tx_bytes": 10, "payload_rx_bytes": 10, "collectives": 1, "wire_tx_bytes": 11,
                             "wire_rx_bytes": 11, "tokens": 100, "param_checksum": None, "seed": 0})
    df = metrics.records_to_frame(rows)
    starts = [_start(r, device="cpu", params=2000) for r in range(2)]
    out = metrics.summarize(df, starts, "adamw")
    for name in ("adamw", "distro"):
        s = out[name]
        assert s["goodput_tokens_per_s"] == pytest.approx(800 / s["train_time_s"]) and s["train_time_s"] > 0
        assert s["goodput_model_flops_per_s"] == pytest.approx(6 * 2000 * s["goodput_tokens_per_s"])
        assert s["goodput_model_flops_per_s_per_worker"] == pytest.approx(s["goodput_model_flops_per_s"] / 2)
        assert s["goodput_of_peak"] is None
