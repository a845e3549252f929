"""The delay line's scheduling logic (pure, no root) and its controller's contract."""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path

import pytest

from distro_bench.errors import InputError
from distro_bench.net.delayline import DelayLine, Impairment, Schedule
from distro_bench.net.ns import ENTER_SCRIPT


def frames(n: int, size: int = 100) -> list[bytes]:
    return [i.to_bytes(4, "big") + bytes(size - 4) for i in range(n)]


def drain(s: Schedule, until: float) -> list[tuple[float, bytes]]:
    out = []
    while (item := s.pop_due(until)) is not None:
        out.append(item)
    return out


@pytest.mark.parametrize(
    "kwargs",
    [{"delay_s": -0.001}, {"delay_s": 0.01, "jitter_s": -1}, {"delay_s": 0, "loss": 1.5}, {"delay_s": 0, "loss": -0.1}],
)
def test_impairment_rejects_bad_values(kwargs):
    with pytest.raises(InputError, match="impairment"):
        Impairment(**kwargs)


def test_delay_without_jitter_is_exact_and_fifo():
    s = Schedule(Impairment(delay_s=0.040))
    for i, f in enumerate(frames(10)):
        assert s.admit(i * 0.001, f) == pytest.approx(i * 0.001 + 0.040)
    assert s.pop_due(0.0395) is None  # nothing before its time
    out = drain(s, 1.0)
    assert [f for _, f in out] == frames(10)
    assert len(s) == 0 and s.queued_bytes == 0


def test_jitter_keeps_order_by_default():
    # Jitter far above the spacing between frames: netem would reorder most of them.
    s = Schedule(Impairment(delay_s=0.010, jitter_s=0.008, seed=3))
    arrivals = [i * 0.0002 for i in range(2000)]
    releases = [s.admit(t, f) for t, f in zip(arrivals, frames(2000))]
    assert releases == sorted(releases)
    assert all(r >= t + 0.010 - 0.008 for t, r in zip(arrivals, releases))
    assert [f for _, f in drain(s, 10.0)] == frames(2000)


def test_jitter_reorders_lets_frames_pass():
    s = Schedule(Impairment(delay_s=0.010, jitter_s=0.008, jitter_reorders=True, seed=3))
    for i, f in enumerate(frames(500)):
        s.admit(i * 0.0002, f)
    out = drain(s, 10.0)
    order = [int.from_bytes(f[:4], "big") for _, f in out]
    assert sorted(order) == list(range(500))
    assert sum(a > b for a, b in itertools.pairwise(order)) > 50  # many inversions
    assert [r for r, _ in out] == sorted(r for r, _ in out)  # still released by time


def test_sparse_jitter_is_centred_on_the_delay():
    # Frames far apart never wait for each other, so the mean is the configured delay
    # (uniform jitter, as netem's default) and the spread is the jitter.
    s = Schedule(Impairment(delay_s=0.015, jitter_s=0.003, seed=1))
    delays = [s.admit(i * 1.0, b"x") - i * 1.0 for i in range(4000)]
    assert sum(delays) / len(delays) == pytest.approx(0.015, abs=0.0002)
    assert min(delays) >= 0.012 - 1e-9 and max(delays) <= 0.018 + 1e-9
    assert max(delays) - min(delays) > 0.0055


def test_jitter_never_makes_delay_negative():
    s = Schedule(Impairment(delay_s=0.001, jitter_s=0.005, jitter_reorders=True, seed=2))
    assert all(s.admit(float(i), b"x") >= float(i) for i in range(1000))


def test_loss_rate_is_seeded_and_independent_per_direction():
    def pattern(seed: int, direction: int) -> list[bool]:
        s = Schedule(Impairment(delay_s=0.0, loss=0.1, seed=seed), direction)
        return [s.admit(0.0, b"x") is None for _ in range(20000)]

    up = pattern(7, 0)
    assert 0.09 < sum(up) / len(up) < 0.11
    assert pattern(7, 0) == up  # reproducible
    assert pattern(7, 1) != up  # the two directions of one link do not drop in lockstep
    assert pattern(8, 0) != up


def test_loss_counts_and_overflow_bound():
    s = Schedule(Impairment(delay_s=1.0, loss=1.0))
    assert s.admit(0.0, b"x") is None and s.dropped_loss == 1 and len(s) == 0
    s = Schedule(Impairment(delay_s=1.0), limit_bytes=1000)
    admitted = [s.admit(0.0, bytes(300)) is not None for _ in range(5)]
    assert admitted == [True, True, True, False, False]
    assert s.dropped_overflow == 2 and s.queued_bytes == 900


def test_command_runs_the_module_inside_the_namespace():
    up, down = Impairment(0.005, 0.001, 0.01, seed=4), Impairment(0.015)
    line = DelayLine("dbench-x-l0", "a", "b", up, down)
    cmd = line.command(stats_path=Path("/tmp/s.json"))
    # harness/distro_bench/net/enter.py enters the namespace: no `ip` or `nsenter` binary.
    i = cmd.index("--")
    assert cmd[:i] == [sys.executable, "-I", ENTER_SCRIPT, "--net", "/run/netns/dbench-x-l0"]
    assert cmd[i + 1:i + 4] == [sys.executable, "-m", "distro_bench.net.delayline"]
    assert Impairment(**json.loads(cmd[cmd.index("--a-to-b") + 1])) == up
    assert Impairment(**json.loads(cmd[cmd.index("--b-to-a") + 1])) == down
    assert cmd[cmd.index("--parent-pid") + 1] == str(os.getpid())
    by_path = DelayLine("/proc/123/ns/net", "a", "b", up, down).command(Path("/tmp/s.json"))
    i = by_path.index("--")
    assert by_path[3:5] == ["--net", "/proc/123/ns/net"] and by_path[i + 2:i + 4] == ["-m", "distro_bench.net.delayline"]


def test_stop_and_stats_before_start_are_harmless():
    line = DelayLine("dbench-x-l0", "a", "b", Impairment(0.01), Impairment(0.01))
    assert line.stats() == {}
    line.stop()
    line.stop()
    assert not line.running()


def test_available_says_why():
    ok, why = DelayLine.available()
    assert isinstance(ok, bool) and why
    if os.geteuid() != 0:
        assert not ok and "root" in why


def test_duplicate_queues_a_seeded_fraction_twice():
    s = Schedule(Impairment(delay_s=0.010, duplicate=0.2, seed=9))
    for i, f in enumerate(frames(5000)):
        assert s.admit(i * 0.001, f) == pytest.approx(i * 0.001 + 0.010)
    out = [f for _, f in drain(s, 100.0)]
    assert len(out) == 5000 + s.duplicated  # every extra frame released is a counted duplicate
    assert 0.17 < s.duplicated / 5000 < 0.23
    seqs = [int.from_bytes(f[:4], "big") for f in out]
    assert seqs == sorted(seqs) and max(seqs.count(x) for x in set(seqs)) == 2  # the copy follows its original
    again = Schedule(Impairment(delay_s=0.010, duplicate=0.2, seed=9))
    for i, f in enumerate(frames(5000)):
        again.admit(i * 0.001, f)
    assert again.duplicated == s.duplicated  # reproducible


def test_no_duplication_leaves_the_other_draws_as_they_were():
    # Loss and jitter draw from the same stream: a zero duplicate rate must not consume draws.
    def releases(**extra):
        s = Schedule(Impairment(delay_s=0.010, jitter_s=0.004, loss=0.1, seed=4, **extra))
        return [s.admit(i * 0.01, b"x") for i in range(500)]

    assert releases() == releases(duplicate=0.0)
    assert releases() != releases(duplicate=0.5)


def test_impairment_rejects_a_duplicate_rate_outside_0_1():
    with pytest.raises(InputError, match="duplicate is a fraction"):
        Impairment(duplicate=1.5)


def test_a_delay_line_waits_for_its_start_longer_on_a_busy_host(monkeypatch, tmp_path):
    """The start deadline is the idle base times the host's load factor (issue 38: a hogged host took over 10 s
    to start one forwarder), and running out says how long it waited and the load."""
    import time

    from distro_bench.errors import HarnessError
    from distro_bench.net.delayline import controller
    from distro_bench.net.link import Impairment

    monkeypatch.setattr(controller.DelayLine, "available", staticmethod(lambda: (True, "test")))
    monkeypatch.setattr(controller.DelayLine, "command", lambda self, stats: ["sleep", "30"])  # never writes stats
    monkeypatch.setattr(controller.DelayLine, "START_TIMEOUT_S", 0.1)
    monkeypatch.setattr(controller, "timeout_scale", lambda: 5.0)
    line = controller.DelayLine("ns", "a", "b", Impairment(), Impairment(), log_path=tmp_path / "line.log")
    start = time.monotonic()
    with pytest.raises(HarnessError, match=r"did not start within 0s \(host load average"):
        line.start()
    assert time.monotonic() - start >= 0.5  # 0.1 s x 5, not the idle 0.1 s
    assert line.pid is None
