"""The projection model: bytes from real shapes and codecs, ring timing, the paper's accounting."""

from __future__ import annotations

import json
import math

import pytest

from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.scenario.presets import MODELS
from distro_bench.train.model import ModelConfig, parameter_shapes
from distro_bench.train.optim import STRATEGIES, Collective
from distro_bench.train.projection import WIRE_FACTOR, collective_time, nodes_like, paper_accounting, project
from tests.helpers import tiny_scenario_dict


def _scenario(**kw):
    return scenario_from_dict(tiny_scenario_dict(**kw))


def test_bytes_come_from_each_strategy_accounting():
    s = _scenario(workers=[{"count": 4, "link": "dsl"}])
    shapes = parameter_shapes(ModelConfig(**s.resolved_model()))
    (p,) = project(s)
    tx, rx = STRATEGIES["adamw"].predict_payload_bytes(s.optimizer_configs()["adamw"], shapes, 4)
    assert (p.payload_tx_bytes, p.payload_rx_bytes) == (tx, rx)
    assert p.params == sum(math.prod(v) for v in shapes.values())
    # ring all-reduce moves 2(N-1)/N of the buffer each way, framed
    assert p.wire_tx_bytes == pytest.approx(2 * 3 / 4 * tx * WIRE_FACTOR)


def test_ring_time_on_a_known_link():
    s = _scenario(links={"l": {"up": "10Mbit", "down": "40Mbit", "delay": "10ms"}}, workers=[{"count": 4, "link": "l"}])
    nodes = s.nodes()
    rounds, latency, transfer = collective_time(Collective("all_reduce", 4_000_000), nodes)
    assert rounds == 6
    assert latency == pytest.approx(6 * 0.040)  # a round trip per round: gloo's receiver-ready notice, then the data
    assert transfer == pytest.approx(6 * 1_000_000 * WIRE_FACTOR * 8 / 10e6)  # the 10 Mbit uplink is the bottleneck
    rounds, latency, transfer = collective_time(Collective("all_gather", 1000), nodes)
    assert rounds == 3 and transfer == pytest.approx(3 * 1000 * WIRE_FACTOR * 8 / 10e6)


def test_slowest_node_bounds_each_round():
    s = _scenario(links={"fast": {"up": "100Mbit", "down": "100Mbit"}, "slow": {"up": "1Mbit", "down": "100Mbit"}},
                  workers=[{"count": 3, "link": "fast"}, {"count": 1, "link": "slow"}])
    _, _, transfer = collective_time(Collective("all_gather", 125_000), s.nodes())
    assert transfer == pytest.approx(3 * 125_000 * WIRE_FACTOR * 8 / 1e6)


def test_paper_scale_baseline_accounting_matches_the_report():
    s = _scenario(model={"preset": "llama-1.2b"}, data={"seq_len": 128, "batch_size": 1})
    (p,) = project(s, nodes=nodes_like(s, 32))
    acc = paper_accounting(p, "adamw")
    assert acc["paper_style"] == pytest.approx(74.4e9, rel=0.01)  # 1.2B x bf16 x 31 peers
    assert p.payload_tx_bytes == pytest.approx(4 * 1.2e9, rel=0.01)  # our fp32 ring all-reduce


def test_distro_projection_is_far_below_adamw_at_paper_scale():
    s = _scenario(model={"preset": "llama-1.2b"}, data={"seq_len": 128, "batch_size": 1},
                  optimizers={"adamw": {"lr": 1e-3}, "distro": {"lr": 1e-3, "topk": 4, "values": "1bit", "exchange": "ring"}})
    by = {p.optimizer: p for p in project(s, nodes=nodes_like(s, 32))}
    shapes = parameter_shapes(ModelConfig(**MODELS["llama-1.2b"]))
    tx, rx = STRATEGIES["distro"].predict_payload_bytes(s.optimizer_configs()["distro"], shapes, 32)
    assert by["distro"].payload_tx_bytes == tx and by["distro"].payload_rx_bytes == rx
    # DESIGN.md's rule of thumb: about topk * 2.125 bytes per 4096 parameters
    assert tx == pytest.approx(by["distro"].params / 4096 * 4 * 2.125, rel=0.15)
    assert by["adamw"].comm_s > 100 * by["distro"].comm_s or by["adamw"].transfer_s > 100 * by["distro"].transfer_s


def test_project_cli_writes_table_json_and_plots(cli, write_scenario, tmp_path):
    path = write_scenario(tiny_scenario_dict(workers=[{"count": 4, "link": "dsl"}],
                                             optimizers={"adamw": {"lr": 1e-3}, "distro": {"lr": 1e-3, "topk": 4}}))
    out = tmp_path / "proj"
    result = cli("project", path, "--model", "llama-1.2b", "-n", "4", "-n", "32", "--out", out)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "projection.json").read_text())
    assert set(data["projections"]) == {"4", "32"}
    for name in data["plots"]:
        assert (out / name).stat().st_size > 5000
    assert cli("project", path, "--model", "nope").exit_code == 2


@pytest.mark.parametrize("bucket", [True, False])
def test_predicted_collectives_add_up_to_predicted_bytes(bucket):
    from distro_bench.train.optim.distro import DisTrOConfig

    shapes = parameter_shapes(ModelConfig(**MODELS["small"]))
    cfg = DisTrOConfig(lr=1e-3, topk=4, values="1bit", bucket=bucket, exchange="ring")
    colls = STRATEGIES["distro"].predict_collectives(cfg, shapes, 4)
    assert len(colls) == (1 if bucket else 2 * len(shapes))
    assert sum(c.nbytes for c in colls) == STRATEGIES["distro"].predict_payload_bytes(cfg, shapes, 4)[0]


def test_published_layouts_move_what_those_systems_move():
    """A gather through object storage (Covenant-72B) puts one packet and gets N-1; prime's int8 all-reduce
    (INTELLECT-1) rings one int8 buffer where our int8 all-gather receives N-1 of them."""
    from distro_bench.train.projection import wire_bytes

    s = _scenario(links={"l": {"up": "100Mbit", "down": "500Mbit", "delay": "10ms"}}, workers=[{"count": 5, "link": "l"}])
    nodes, c = s.nodes(), Collective("all_gather", 1_000_000)
    rounds, latency, transfer = collective_time(c, nodes, "via_store")
    assert rounds == 1 and latency == pytest.approx(0.040)
    assert transfer == pytest.approx(1e6 * WIRE_FACTOR * 8 * (1 / 100e6 + 4 / 500e6))
    assert wire_bytes(c, 5, "via_store") == pytest.approx((1e6 * WIRE_FACTOR, 4e6 * WIRE_FACTOR))
    assert collective_time(c, nodes, "int8_ring") == collective_time(Collective("all_reduce", 1_000_000), nodes)
    assert wire_bytes(c, 5, "int8_ring")[1] == pytest.approx(2 * 4 / 5 * 1e6 * WIRE_FACTOR)
    assert wire_bytes(c, 5)[1] == pytest.approx(4e6 * WIRE_FACTOR)  # ours: a ring all-gather receives N-1 packets
    with pytest.raises(ValueError, match="layout: 'mesh' is not one of ring"):
        project(s, layout="mesh")
