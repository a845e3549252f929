"""Churn, counted on the wire (netns backend, rate-shaped links): a worker that is away sends and receives only
rank 0's control messages (a few hundred bytes a step), not the optimizer's traffic, which its present peers
carry meanwhile. The counters are the away worker's own eth0, read when it comes back."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from distro_bench.run.runner import RunOptions, run_scenario
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import netns_host, own_run_ids, tiny_scenario_dict

pytestmark = [pytest.mark.root, pytest.mark.slow]

# One control message per step of (world + 1) int64s, plus gloo's framing and TCP's ACKs each way: under 1 kB
# a step was measured; 2 kB leaves room for a retransmit, and AdamW's all-reduce moves ~2 MB a step here.
CONTROL_BYTES_PER_STEP = 2048


@pytest.fixture
def run_ids(monkeypatch):
    netns_host()  # skips where namespaces or tbf are missing, saying which
    yield from own_run_ids(monkeypatch, "c")


def test_an_away_worker_carries_only_control_messages(tmp_path, run_ids):
    s = scenario_from_dict(tiny_scenario_dict(
        workers=[{"count": 3, "hardware": "host", "link": {"up": "1Gbit", "down": "1Gbit"}}],
        train={"time_budget": "4s", "eval_every": 5, "seed": 0},
        churn={"events": [{"worker": 2, "leave": "1s", "back": "3s"}]}))
    result = run_scenario(s, RunOptions(backend="netns", out=tmp_path, write_report=False))
    assert result.state == "complete"
    records = [json.loads(line) for line in (result.run_dir / "workers" / "adamw" / "rank2.jsonl").read_text().splitlines()]
    (leave,) = [r for r in records if r["type"] == "churn" and r["event"] == "leave"]
    (join,) = [r for r in records if r["type"] == "churn" and r["event"] == "join"]
    away_steps = join["step"] - leave["step"]
    assert away_steps >= 2
    away = join["away_wire_tx_bytes"] + join["away_wire_rx_bytes"]
    assert 0 < away <= CONTROL_BYTES_PER_STEP * away_steps, (away, away_steps)
    # Meanwhile the present workers' eth0 carried the all-reduce: more per step than the away one in all.
    df = pd.read_parquet(result.run_dir / "metrics.parquet")
    during = df[(df["rank"] == 1) & (df["step"] >= leave["step"]) & (df["step"] < join["step"])]
    assert len(during) == away_steps
    assert (during["wire_tx_bytes"] + during["wire_rx_bytes"]).min() > 10 * away
