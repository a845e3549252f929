"""Scale on one box without running it: benchmarks/scale_workers.py resizes scenarios/scale-32.yaml, the projection
it compares against follows the closed forms at every worker count, and the workers' peak memory is recorded
and read back. The runs themselves: tests/integration/netns/test_scale.py (16 workers) and the benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distro_bench.scenario.loading import load_scenario
from distro_bench.train.models import parameter_count
from distro_bench.train.projection import FRAME, MSS, project
from tests.helpers import load_script

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def bench():
    return load_script(REPO / "benchmarks" / "scale_workers.py")


@pytest.fixture(scope="module")
def base():
    return load_scenario(REPO / "scenarios" / "scale-32.yaml")


@pytest.mark.parametrize("n", [4, 16, 32])
def test_resized_scenario_keeps_rate_only_links(bench, base, n):
    s = bench.with_workers(base, n)
    assert s.world_size == n and len(s.nodes()) == n
    # tbf alone: a delay, jitter or loss would start a userspace delay line per node.
    assert all(x.link.up and x.link.down and not (x.link.delay or x.link.jitter or x.link.loss) for x in s.nodes())
    assert set(s.optimizers) == {"adamw", "distro", "distro-direct"}


@pytest.mark.parametrize("n", [4, 8, 16, 32])
def test_projection_follows_the_ring_and_direct_closed_forms(bench, base, n):
    s = bench.with_workers(base, n)
    p = {x.optimizer: x for x in project(s)}
    b = parameter_count(s.resolved_model()) * 4  # fp32 gradients
    framing = FRAME / MSS
    adamw = p["adamw"]
    assert adamw.payload_tx_bytes + adamw.payload_rx_bytes == 2 * b  # B sent, B received, whatever N
    assert adamw.wire_tx_bytes + adamw.wire_rx_bytes == pytest.approx(4 * (n - 1) / n * b * framing, rel=1e-9)
    ring, direct = p["distro"], p["distro-direct"]
    s_bytes = ring.payload_tx_bytes  # one worker's packet
    assert ring.payload_rx_bytes == (n - 1) * s_bytes and ring.rounds == n - 1
    assert direct.payload_tx_bytes == direct.payload_rx_bytes == (n - 1) * s_bytes and direct.rounds == 1
    for x in (ring, direct):
        assert x.wire_tx_bytes + x.wire_rx_bytes == pytest.approx(2 * (n - 1) * s_bytes * framing, rel=1e-9)


def test_max_rss_bytes_is_this_process_peak():
    from distro_bench.train.loop import max_rss_bytes

    status = Path("/proc/self/status").read_text()
    hwm = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) * 1024
    # The kernel updates both high-water marks lazily (they read a few pages apart): within 5% of each other,
    # and in bytes, not the KiB getrusage reports.
    assert max_rss_bytes() == pytest.approx(hwm, rel=0.05)


def test_peak_rss_reads_each_rank_end_record(bench, tmp_path):
    opt = tmp_path / "workers" / "adamw"
    opt.mkdir(parents=True)
    for rank, rss in enumerate([300 << 20, 350 << 20]):
        lines = [{"type": "step", "rank": rank, "step": 0}, {"type": "end", "rank": rank, "max_rss_bytes": rss}]
        (opt / f"rank{rank}.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    (opt / "rank2.jsonl").write_text(json.dumps({"type": "end", "rank": 2}) + "\n")  # an older worker: no figure
    assert sorted(bench.peak_rss(tmp_path, "adamw")) == [300 << 20, 350 << 20]
