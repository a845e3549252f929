"""A sweep over a link's rate on the netns backend: real shaping, the crossing plot, the projection beside it."""

from __future__ import annotations

import json

import pytest

from tests.helpers import netns_host, own_run_ids, tiny_scenario_dict

pytestmark = [pytest.mark.root, pytest.mark.slow]  # trains at several rates (~75 s)


@pytest.fixture
def netns_caps(monkeypatch):
    caps = netns_host()
    for _ in own_run_ids(monkeypatch, "s"):  # teardown checks no namespace of ours remains
        yield caps


def test_rate_sweep_draws_measured_and_projected_curves(cli, write_scenario, tmp_path, netns_caps):
    # ~27k parameters (107 KB of fp32 gradients): AdamW's all-reduce takes ~0.4 s at 2 Mbit, ~0.04 s at 20 Mbit.
    scen = write_scenario(tiny_scenario_dict(
        name="rate-sweep", workers=[{"count": 2, "hardware": "host", "link": "line"}],
        links={"line": {"up": "20Mbit"}},
        model={"preset": None, "dim": 32, "n_layers": 1, "n_heads": 2, "ffn_dim": 64},
        train={"steps": 4, "eval_every": 2, "seed": 0},
        optimizers={"adamw": {"lr": 3e-3}, "distro": {"lr": 3e-3, "topk": 4, "values": "1bit", "bucket": True}}))
    r = cli("sweep", scen, "--set", "links.line.up=2Mbit,20Mbit", "--backend", "netns", "--out", tmp_path / "out")
    assert r.exit_code == 0, r.output
    (d,) = (tmp_path / "out").iterdir()
    sweep = json.loads((d / "sweep.json").read_text())
    assert [p["state"] for p in sweep["points"]] == ["complete", "complete"]
    # the rate was really applied: AdamW's communication (not its step, which a busy CPU dominates) is ~10x longer
    slow, fast = (p["optimizers"]["adamw"]["comm_s_mean"] for p in sweep["points"])
    assert slow > 3 * fast, (slow, fast)
    png = d / "plots" / "sweep_crossing.png"
    assert png.is_file() and png.stat().st_size > 0
    crossing = json.loads((d / "crossing.json").read_text())
    assert crossing["metric"] in ("time_to_common_target_s", "step_time_s_mean") and "predicted_error" not in crossing
    env = json.loads((d / sweep["points"][0]["run_dir"] / "environment.json").read_text())
    assert env["network"]["network_emulated"] is True
