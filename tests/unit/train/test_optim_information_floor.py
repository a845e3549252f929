"""The information floor of what each method sends (issue 37): log2 C(n, k) bits per chunk's index set plus
the values at their declared bits, against the payload's bits (`floor_ratio`), and wire over payload
(`framing_ratio`) in summary.json."""

from __future__ import annotations

import math

import pytest

from distro_bench.scenario.loading import load_scenario
from distro_bench.scenario.optimizers import DisTrOConfig, SparseLoCoConfig
from distro_bench.train.optim.base import Collective, floor_tx_bits_of, index_set_bits, payload_of
from distro_bench.train.optim.distro import DisTrO
from distro_bench.train.optim.sparseloco import SparseLoCo
from distro_bench.train.projection import project
from tests.helpers import REPO

SHAPES = {"w": (256, 256), "v": (128, 64)}  # 16 + 2 chunks of 64x64


def _distro(**kw) -> DisTrOConfig:
    return DisTrOConfig(type="distro", lr=1e-3, chunk=64, topk=8, **kw)


def _ratio(strategy, cfg, world: int = 4) -> float:
    tx, _ = strategy.predict_payload_bytes(cfg, SHAPES, world)
    return 8 * tx / strategy.predict_floor_tx_bits(cfg, SHAPES, world)


def test_index_set_bits_is_log2_of_the_binomial():
    assert index_set_bits(4096, 8) == pytest.approx(math.log2(math.comb(4096, 8)), rel=1e-12)
    assert index_set_bits(10, 0) == pytest.approx(0) and index_set_bits(10, 10) == pytest.approx(0)
    assert index_set_bits(4096, 8) + 8 == pytest.approx(88.69, abs=0.01)  # the Psyche floor per block


@pytest.mark.parametrize("bucket", [True, False])
def test_distro_u16_and_1bit_at_top8_is_psyche_s_1_53(bucket):
    # u16 index + 1 sign bit per coefficient: 8 x 17 = 136 bits a chunk, against 88.69
    assert _ratio(DisTrO, _distro(values="1bit", bucket=bucket, exchange="ring")) == pytest.approx(136 / 88.69, rel=1e-3)


@pytest.mark.parametrize("bucket", [True, False])
def test_distro_coded_1bit_at_top8_is_within_1_10x_of_its_floor(bucket):
    # Elias-Fano: 8 x 9 low bits + a 16-bit upper array, + 8 sign bits = 96 bits a chunk, against 88.69
    ratio = _ratio(DisTrO, _distro(values="1bit", bucket=bucket, index="coded", exchange="ring"))
    assert ratio == pytest.approx(96 / 88.69, rel=1e-3) and ratio <= 1.10


def test_sparseloco_coded_is_nearer_its_floor_than_u16():
    u16 = _ratio(SparseLoCo, SparseLoCoConfig(lr=1e-3))
    coded = _ratio(SparseLoCo, SparseLoCoConfig(lr=1e-3, index="coded"))
    assert coded < 1.10 < u16


def test_distro_formats_order_by_their_overhead():
    demo = _ratio(DisTrO, _distro(values="fp32", index="int64", exchange="ring"))
    bf16 = _ratio(DisTrO, _distro(values="bf16", exchange="ring"))
    # int64 + fp32: 8 x 96 = 768 bits a chunk against 80.69 + 8 x 32
    assert demo == pytest.approx(768 / (index_set_bits(4096, 8) + 256), rel=1e-6)
    assert bf16 == pytest.approx(8 * 32 / (index_set_bits(4096, 8) + 128), rel=1e-6)
    assert 1 < bf16 < demo


def test_a_direct_gather_has_the_same_floor_ratio_as_a_ring():
    # The direct layout sends N-1 copies; the floor counts them too, so the ratio is the encoding's alone.
    ring = _ratio(DisTrO, _distro(values="1bit", exchange="ring"), world=5)
    direct = _ratio(DisTrO, _distro(values="1bit", exchange="direct"), world=5)
    assert direct == pytest.approx(ring, rel=1e-12)
    colls = [Collective("all_gather_direct", 100, 500.0)]
    assert floor_tx_bits_of(colls, 5) == 4 * 500 and payload_of(colls, 5)[0] == 4 * 100


def test_sparseloco_2bit_floor_counts_codes_tables_and_index_sets():
    cfg = SparseLoCoConfig(type="sparseloco", lr=1e-3, chunk=4096, topk=64, values="2bit", inner_steps=10)
    floor = SparseLoCo.predict_floor_tx_bits(cfg, SHAPES, 4) * 10  # per period (one packet)
    # w: 16 chunks of 4096, v: 2 chunks of 4096; each slice: a 4-entry fp32 table, 2 bits per sent value
    expected = sum(c * (index_set_bits(4096, 64) + 2 * 64) + 32 * 4 for c in (16, 2))
    assert floor == pytest.approx(expected, rel=1e-9)
    assert _ratio(SparseLoCo, cfg) > 1


def test_every_dense_method_is_its_own_floor_and_every_top_k_one_is_above_it():
    ratios = {p.optimizer: p.floor_ratio for p in project(load_scenario(REPO / "scenarios" / "methods-home-dsl.yaml"))}
    sparse = {n for n in ratios if n.startswith(("distro", "demo", "sparseloco"))}
    assert sparse and len(ratios) - len(sparse) >= 8, ratios
    for name, r in ratios.items():
        assert r is not None, name
        if name in sparse:
            assert r > 1.05, (name, r)
        else:
            assert r == pytest.approx(1.0), (name, r)


def test_the_summary_carries_the_prediction_s_floor_and_the_measured_framing(tmp_path):
    import pandas as pd

    from distro_bench.results.build import build_summary
    from tests.helpers import make_run

    run = make_run(tmp_path)  # wire = payload x 1.04 in its records
    df = pd.read_parquet(run / "metrics.parquet")
    events = [{"type": "end", "optimizer": o, "rank": r, "param_checksum": "x"} for o in ("adamw", "distro") for r in range(4)]
    s = build_summary(df, events, schema_version=1, run={}, baseline="adamw",
                      predicted_floor_ratio={"adamw": 1.0, "distro": 1.53})
    assert s["optimizers"]["distro"]["floor_ratio"] == 1.53 and s["optimizers"]["adamw"]["floor_ratio"] == 1.0
    for name, o in s["optimizers"].items():
        assert o["framing_ratio"] == pytest.approx(1.04, rel=0.01), (name, o["framing_ratio"])
    assert build_summary(df, events, schema_version=1, run={}, baseline="adamw")["optimizers"]["distro"]["floor_ratio"] is None


def test_empirical_floor_of_uniform_picks_is_near_the_uniform_floor_and_lower_for_clustered_ones():
    import torch

    from distro_bench.train.optim.entropy import SentStatistics

    g = torch.Generator().manual_seed(0)
    n, k, chunks = 64, 4, 50
    uniform, clustered = SentStatistics([n], [k], 1, torch.device("cpu")), SentStatistics([n], [k], 1, torch.device("cpu"))
    for _ in range(200):
        idx = torch.stack([torch.randperm(n, generator=g)[:k] for _ in range(chunks)])
        uniform.add([(idx, torch.randn(chunks, k, generator=g))])
        low = torch.stack([torch.randperm(8, generator=g)[:k] for _ in range(chunks)])  # 8 low frequencies only
        clustered.add([(low, torch.ones(chunks, k))])  # every sign positive
    u, c = uniform.figures(), clustered.figures()
    assert u["empirical_index_bits_per_sync"] == pytest.approx(chunks * index_set_bits(n, k), rel=0.02)
    assert u["empirical_value_bits_per_sync"] == pytest.approx(chunks * k, rel=0.02)  # random signs: 1 bit each
    assert c["empirical_index_bits_per_sync"] < 0.5 * u["empirical_index_bits_per_sync"]
    assert c["empirical_value_bits_per_sync"] == 0 and c["empirical_floor_syncs"] == 200
    assert SentStatistics([n], [k], 1, torch.device("cpu")).figures() == {}


def test_quantisation_codes_cost_their_histogram_s_entropy_and_tables():
    import torch

    from distro_bench.train.optim.entropy import SentStatistics

    st = SentStatistics([16], [2], 2, torch.device("cpu"), levels=4, table_bits=128)
    idx = torch.tensor([[0, 1], [2, 3]])
    st.add([(idx, torch.ones(2, 2))], [torch.tensor([1, 1, 2, 2])])  # two of four codes, equally often: 1 bit
    assert st.figures()["empirical_value_bits_per_sync"] == pytest.approx(4 * 1.0 + 128)
