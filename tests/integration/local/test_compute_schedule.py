"""A straggler that comes and goes (issue 18), end to end on the local backend: the worker follows its
hardware's compute_schedule by step, and the coordinator logs one `compute` row per node in events.parquet."""

from __future__ import annotations

import pandas as pd

from distro_bench.results.events import read_events
from distro_bench.run.runner import RunOptions, run_scenario
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import tiny_scenario_dict


def test_compute_scale_follows_its_step_schedule(tmp_path):
    s = scenario_from_dict(tiny_scenario_dict(
        workers=[{"count": 1, "hardware": "host"}, {"name": "slowpoke", "hardware": "flaky"}],
        hardware={"flaky": {"compute_scale": 1.0, "compute_schedule": [{"at_step": 3, "compute_scale": 0.5},
                                                                       {"at_step": 5, "compute_scale": 1.0}]}},
        train={"steps": 6, "eval_every": 3, "seed": 0}))
    res = run_scenario(s, RunOptions(backend="local", out=tmp_path, write_report=False))
    m = pd.read_parquet(res.run_dir / "metrics.parquet")
    slow = m[m["rank"] == 1].set_index("step")["stretch_s"]
    # scale 0.5 waits as long again as the compute took: only at steps 3 and 4
    assert (slow.loc[[3, 4]] > 0).all() and (slow.loc[[0, 1, 2, 5]] == 0).all(), slow
    assert (m[m["rank"] == 0]["stretch_s"] == 0).all()
    ev = read_events(res.run_dir)
    assert list(ev["kind"]) == ["compute", "compute"] and list(ev["node"]) == ["slowpoke", "slowpoke"]
    # logged when the heartbeat showed the step begun (polled: that step or a later one)
    assert list(ev["requested"]) == ["0.5", "1"] and ev["step"].iloc[0] >= 3 and ev["step"].iloc[1] >= 5
