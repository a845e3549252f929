"""8 workers on the netns backend (scenarios/scale-32.yaml resized): the bytes each worker counted per step
against the projection's (harness/distro_bench/train/projection.py), through the same code as benchmarks/scale_workers.py, and
no namespace left behind. 16 and 32 workers run in the benchmark (`python benchmarks/scale_workers.py`): at 16
this test took 108-146 s of CI's 15 minutes (issue 38), and every bound below is as tight at 8.

Tolerances, from 4, 8 and 16 workers measured here (docs/projection.md, "Scale on one box"):
- payload: exact. The comm wrapper counts what the optimizer handed to its collectives, the projection sizes
  the same buffers with the same codec; any difference is a bug, not noise.
- AdamW wire (tx + rx on eth0): 0.95-1.03 of the ring's 4(N-1)/N*B with full-segment framing (1514 bytes per
  1448). Offloads stay on where no delay line runs and tbf passes segments up to its 62.5 kB burst whole, so
  eth0's counters see one set of headers per 1448 bytes at most and per ~62 kB at least: the framing factor
  lies between 1.0 and 1.0456 (1/1.0456 = 0.956); pure ACKs add under 2%. Measured 0.969-1.008 at 4-32
  workers. At 8 workers an exchange that moves 2B each way (not a ring) reads 2 / (2*7/8) = +14%, past
  the bound.
- DisTrO wire: above the prediction, by less than one full frame each way per message. Its packet (about
  1.4 kB at the tiny model) is near one segment, so each message's control traffic (gloo's preamble and
  ready notice, pure ACKs), which the projection leaves out, shows: measured about 1.6 kB per ring round and
  0.9 kB per direct peer (tx + rx), against the bound of 2 x 1514 bytes. A miscounted round or peer (N-2 or
  N messages instead of N-1) moves the figure by a whole packet, 2 x 1.5 kB, past the bound.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from distro_bench.scenario.loading import load_scenario, with_overrides
from distro_bench.train.projection import FRAME
from tests.helpers import load_script, netns_host, own_run_ids

pytestmark = [pytest.mark.root, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[3]
WORKERS = 8


def _bench():
    return load_script(REPO / "benchmarks" / "scale_workers.py")


@pytest.fixture
def run_ids(monkeypatch):
    netns_host()  # skips where namespaces or tbf are missing, saying which
    yield from own_run_ids(monkeypatch, "s")  # and asserts that none of this test's namespaces remain


def test_8_workers_count_the_projected_bytes(tmp_path, run_ids):
    bench = _bench()
    s = bench.with_workers(with_overrides(load_scenario(REPO / "scenarios" / "scale-32.yaml"), steps=3), WORKERS)
    assert s.world_size == WORKERS and all(n.link.delay == 0 for n in s.nodes())  # tbf only, no delay line
    rows = {r.optimizer: r for r in bench.measure(s, tmp_path, "netns")}
    assert set(rows) == {"adamw", "distro", "distro-direct"}

    for r in rows.values():
        assert r.payload == r.payload_pred, (r.optimizer, r.payload, r.payload_pred)
        assert r.wire is not None, f"{r.optimizer}: no wire bytes counted on eth0"
        assert r.max_rss_mib > 0, f"{r.optimizer}: no max_rss_bytes in the end records"

    adamw = rows["adamw"]
    assert 0.95 <= adamw.wire_ratio <= 1.03, f"adamw wire {adamw.wire:,.0f} vs ring {adamw.wire_pred:,.0f}"

    messages = {"distro": rows["distro"].rounds, "distro-direct": WORKERS - 1}  # per worker per step, each way
    assert messages["distro"] == WORKERS - 1 and rows["distro-direct"].rounds == 1
    for name, count in messages.items():
        r = rows[name]
        excess = (r.wire - r.wire_pred) / count  # tx + rx per message
        assert 0 < excess <= 2 * FRAME, f"{name}: {excess:,.0f} B per message beyond the projection's wire bytes"
