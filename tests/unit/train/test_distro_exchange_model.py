"""The projection's model of DisTrO's exchanges (ring vs direct), `exchange: auto`, and overlapped steps."""

from __future__ import annotations

import pytest

from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.scenario.presets import MODELS
from distro_bench.train.model import ModelConfig, parameter_shapes
from distro_bench.train.optim import Collective
from distro_bench.train.optim.base import payload_of
from distro_bench.train.optim.distro import DisTrO, DisTrOConfig
from distro_bench.train.projection import WIRE_FACTOR, collective_time, project, resolve_options

DSL = {"l": {"up": "10Mbit", "down": "40Mbit", "delay": "10ms"}}


def _scenario(count: int, **distro) -> object:
    return scenario_from_dict({
        "name": "t", "workers": [{"count": count, "hardware": "gaming-pc", "link": "l"}], "links": DSL,
        "model": {"preset": "tiny"}, "data": {"corpus": "builtin:pydoc", "seq_len": 32, "batch_size": 4},
        "train": {"steps": 4, "eval_every": 2, "seed": 0}, "baseline": "ring",
        "optimizers": {"ring": {"type": "distro", "lr": 1e-3, "topk": 4, "values": "1bit", "exchange": "ring"},
                       "direct": {"type": "distro", "lr": 1e-3, "topk": 4, "values": "1bit", "exchange": "direct"},
                       "auto": {"type": "distro", "lr": 1e-3, "topk": 4, "values": "1bit", "exchange": "auto", **distro}},
    })


def test_direct_gather_is_one_round_trip_and_the_same_bytes_per_link():
    nodes = _scenario(4).nodes()
    rounds, latency, transfer = collective_time(Collective("all_gather_direct", 1000), nodes)
    assert (rounds, latency) == (1, pytest.approx(0.040))
    assert transfer == pytest.approx(3 * 1000 * WIRE_FACTOR * 8 / 10e6)  # 3 copies through the 10 Mbit uplink
    ring = collective_time(Collective("all_gather", 1000), nodes)
    assert ring[0] == 3 and ring[1] == pytest.approx(3 * 0.040) and ring[2] == pytest.approx(transfer)


def test_auto_picks_direct_from_three_workers_and_ring_for_two():
    shapes = parameter_shapes(ModelConfig(**MODELS["tiny"]))
    for count, want in [(2, "ring"), (4, "direct")]:
        s = _scenario(count)
        assert resolve_options(s.optimizer_configs()["auto"], s.nodes(), shapes).exchange == want


def test_projection_of_direct_counts_tx_copies_and_fewer_rounds():
    by = {p.optimizer: p for p in project(_scenario(4))}
    assert by["direct"].rounds == 1 and by["ring"].rounds == 3
    assert by["direct"].payload_tx_bytes == 3 * by["ring"].payload_tx_bytes
    assert by["direct"].payload_rx_bytes == by["ring"].payload_rx_bytes
    assert by["direct"].wire_tx_bytes == pytest.approx(by["ring"].wire_tx_bytes)
    assert by["direct"].comm_s < by["ring"].comm_s - 0.07
    assert by["auto"].rounds == 1


def test_overlapped_step_is_the_longer_of_compute_and_communication():
    by = {p.optimizer: p for p in project(_scenario(4, overlap=True))}
    a = by["auto"]
    assert a.step_s == pytest.approx(max(a.compute_s, a.comm_s))
    assert by["direct"].step_s == pytest.approx(by["direct"].compute_s + by["direct"].comm_s)


def test_demo_wire_format_at_small_is_12_bytes_per_kept_coefficient():
    """index int64 + values fp32, topk 32: (8 + 4) x 32 bytes per chunk, every chunk of the `small` model."""
    shapes = parameter_shapes(ModelConfig(**MODELS["small"]))
    cfg = DisTrOConfig(lr=1e-3, topk=32, chunk=64, values="fp32", index="int64", exchange="ring")
    tx, _ = DisTrO.predict_payload_bytes(cfg, shapes, 4)
    chunks = sum((s[0] // 64) * (s[1] // 64) if len(s) == 2 else s[0] // 64 for s in shapes.values())
    assert tx == 12 * 32 * chunks


def test_exchange_defaults_to_auto_so_four_dsl_workers_exchange_directly():
    """DisTrO at its best by default: direct measured 0.32x the ring's comm time on home-dsl."""
    assert DisTrOConfig(lr=1e-3).exchange == "auto"
    s = scenario_from_dict({
        "name": "t", "workers": [{"count": 4, "hardware": "gaming-pc", "link": "l"}], "links": DSL,
        "model": {"preset": "tiny"}, "data": {"corpus": "builtin:pydoc", "seq_len": 32, "batch_size": 4},
        "train": {"steps": 4, "eval_every": 2, "seed": 0}, "baseline": "d",
        "optimizers": {"d": {"type": "distro", "lr": 1e-3, "topk": 4, "values": "1bit"}}})
    shapes = parameter_shapes(ModelConfig(**MODELS["tiny"]))
    assert resolve_options(s.optimizer_configs()["d"], s.nodes(), shapes).exchange == "direct"


def test_payload_of_counts_a_direct_gathers_tx_as_comm_does():
    """harness/distro_bench/train/comm.py counts a direct gather's tx as N-1 copies (this rank sends to every peer itself), a
    ring gather's as one contribution; payload_of, which every per-step prediction goes through, must agree
    (it counted one copy for both, so `exchange: auto` resolving to direct broke predicted == counted)."""
    assert payload_of([Collective("all_gather_direct", 100)], 3) == (200, 200)
    assert payload_of([Collective("all_gather", 100)], 3) == (100, 200)
    shapes = parameter_shapes(ModelConfig(**MODELS["tiny"]))
    for how, copies in [("ring", 1), ("direct", 3)]:
        cfg = DisTrOConfig(lr=1e-3, topk=4, values="1bit", exchange=how)
        tx, rx = payload_of(DisTrO.predict_step(cfg, shapes, 4, 0, 10), 4)
        one = sum(c.nbytes for c in DisTrO.predict_collectives(cfg, shapes, 4))
        assert (tx, rx) == (copies * one, 3 * one) == DisTrO.predict_payload_bytes(cfg, shapes, 4)
