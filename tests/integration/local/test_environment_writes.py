"""Issue 36: environment.json is written once with the host's facts, then once more when the network is known
and measured; not a third time with nothing new."""

from __future__ import annotations

import copy
import json

from distro_bench.run.lifecycle import RunLifecycle
from distro_bench.run.runner import RunOptions, run_scenario
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import tiny_scenario_dict


def test_environment_written_twice_each_time_with_something_new(tmp_path, monkeypatch):
    writes: list[dict] = []
    original = RunLifecycle.write_environment

    def recording(self, env):
        writes.append(copy.deepcopy(env))
        original(self, env)

    monkeypatch.setattr(RunLifecycle, "write_environment", recording)
    s = scenario_from_dict(tiny_scenario_dict(train={"steps": 2, "eval_every": 2, "seed": 0}))
    result = run_scenario(s, RunOptions(backend="local", out=tmp_path, write_report=False))
    assert result.state == "complete"
    assert len(writes) == 2, [sorted(w) for w in writes]
    first, second = writes
    assert first["backend"] == "local" and first["torch"] and "network" not in first  # the host, before any node
    assert second["network"]["link_measurement"]["measured"] is False  # the network, with how it was measured
    assert {k: v for k, v in second.items() if k != "network"} == first
    assert json.loads((result.run_dir / "environment.json").read_text()) == second
