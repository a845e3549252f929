"""`links` says what each emulated direction holds before it drops (issue 37): netem's limit as read back beside
the bandwidth-delay product of its delay, and the delay line's queue. The netem entries are in the shape
`tc -j qdisc show` prints them (iproute2's q_netem.c: delay and jitter in seconds under `delay`)."""

from __future__ import annotations

from distro_bench.net.linktest import queue_notes
from distro_bench.net.shaping import QdiscPlan


def _node(name: str, rate_bps: int | None, delay_s: float, jitter_s: float = 0.0, *, line: bool = False) -> dict:
    plan = QdiscPlan(rate_bps=rate_bps, delay_s=delay_s, jitter_s=jitter_s)
    netem = {"kind": "netem", "options": {"limit": plan.netem_limit_packets,
                                          "delay": {"delay": delay_s, "jitter": jitter_s}}}
    direction = {"plan": plan.to_dict(), "qdiscs": [{"kind": "tbf", "options": {}}, netem]}
    return {"name": name, "applied": {"up": direction, "down": direction,
                                      "delay_line": {"namespace": "x"} if line else None}}


def test_a_gigabit_100ms_path_is_held_where_netem_s_default_would_drop():
    (up, down) = queue_notes([_node("n0", 1_000_000_000, 0.1)])
    # 1 Gbit/s x 100 ms = 12.5 MB = 8,256 frames of 1514 bytes: over netem's default 1000
    assert up.startswith("n0 up: netem holds up to 16513 packets, ")
    assert "2.0x the 8,256 frames in flight at 1Gbit x 100 ms" in up and "would drop" in up
    assert down.startswith("n0 down:")


def test_a_home_line_is_held_by_the_default_too_and_jitter_counts_as_held_time():
    (up, _) = queue_notes([_node("n1", 10_000_000, 0.015, 0.005)])
    assert "netem holds up to 1000 packets" in up  # the floor: 2 x 17 frames is below it
    assert "17 frames in flight" in up and "x 20 ms" in up and "would hold them" in up


def test_without_a_rate_or_delay_it_says_what_it_holds_and_the_delay_line_says_its_queue():
    notes = queue_notes([_node("n0", None, 0.01), _node("n1", 5_000_000, 0.01, line=True)])
    # 10 Gbit/s x 10 ms, twice: 16513 frames
    assert notes[0] == "n0 up: netem holds up to 16513 packets (no rate on this direction: sized for 10 Gbit/s)"
    assert notes[-1] == "delay line: each direction queues up to 64 MB (0.54 s at 1 Gbit/s), then drops"
    assert queue_notes([{"name": "n0", "applied": {"delay_line": None}}]) == []
