"""Replay over real shaped links (issue 34): the wire bytes the interfaces counted match the prediction for the
same collectives, and the communication takes the time the links give it."""

from __future__ import annotations

import json

import pytest

from distro_bench.run.runner import RunOptions, run_scenario
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import netns_host, own_run_ids, tiny_scenario_dict

pytestmark = [pytest.mark.root, pytest.mark.slow]  # ~40 s: two optimizers on three namespaces


@pytest.fixture
def netns_caps(monkeypatch):
    caps = netns_host()
    for _ in own_run_ids(monkeypatch, "rp"):
        yield caps


def test_replayed_wire_bytes_match_the_prediction(tmp_path, netns_caps):
    s = scenario_from_dict(tiny_scenario_dict(
        name="replay-netns", workers=[{"count": 3, "hardware": "rtx3060", "link": "line"}],
        links={"line": {"up": "50Mbit", "down": "50Mbit"}}, model={"preset": "small"},
        train={"steps": 5, "seed": 0},
        replay={"fraction": {"adamw": 0.2}, "codec": {"adamw": 0.0, "distro": 0.0}},
        optimizers={"adamw": {"lr": 1e-3}, "distro": {"lr": 1e-3, "topk": 128, "values": "1bit", "bucket": True}}))
    result = run_scenario(s, RunOptions(backend="netns", out=tmp_path, measure_links=False))
    assert result.state == "complete"
    predicted = json.loads((result.run_dir / "prediction.json").read_text())["optimizers"]
    for name in ("adamw", "distro"):
        o = result.summary.to_dict()["optimizers"][name]
        wire, model = o["wire_tx_bytes_per_step"], predicted[name]["wire_tx_bytes"]
        # Measured (idle, 3 runs): adamw 1.004-1.012x; distro 1.013x with topk 128 (238 kB sent to each peer a
        # step), 1.042-1.044x at topk 32 (60 kB): the model leaves out each message's control traffic (~1 kB)
        # and pure ACKs. Below it too: 0.987x for distro on a hogged CI host, where the veth counted segments
        # merged by GSO (one header for several); never below the payload itself.
        assert o["payload_tx_bytes_per_step"] <= wire <= 1.05 * model, (name, wire, model)
    adamw = result.summary.to_dict()["optimizers"]["adamw"]
    # 1/5 of 14 MB of fp32 gradients in a 3-worker ring: 2 x 2/3 x 2.8 MB through 50 Mbit/s is ~0.6 s a step
    assert adamw["comm_s_mean"] >= 0.9 * predicted["adamw"]["transfer_s"]
