"""The emulated slowdown's own accounting, exactly: after t seconds of real compute a worker of
compute_scale s waits t * (1/s - 1) and records that wait. (How close the end-to-end ratio comes to 1/s
on a busy host is a benchmark figure: benchmarks/heterogeneous_slowdown.py.)"""

from __future__ import annotations

import pytest

from distro_bench.train import loop


@pytest.fixture
def sleeps(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(loop.time, "sleep", slept.append)
    return slept


@pytest.mark.parametrize("t", [0.0, 1e-4, 0.0137, 0.25, 3.0])
@pytest.mark.parametrize("scale", [0.5, 0.25, 0.1, 51 / 165])
def test_stretch_is_t_times_one_over_scale_minus_one(sleeps, t, scale):
    stretch = loop.stretch_compute(t, scale)
    assert stretch == t * (1.0 / scale - 1.0)
    assert sleeps == ([stretch] if stretch > 0 else [])
    # What the record adds up to: measured compute + stretch = t / scale.
    assert t + stretch == pytest.approx(t / scale, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("scale", [1.0, 2.0])
def test_native_or_faster_profile_never_waits(sleeps, scale):
    assert loop.stretch_compute(0.2, scale) == 0.0
    assert sleeps == []
