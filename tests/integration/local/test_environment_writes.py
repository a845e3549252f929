"""Issue 36: environment.json is written once with the host's facts, then once more when the network is known
and measured (and, as root, once more with the uid the workers ran as); never a write with nothing new."""

from __future__ import annotations

import copy
import json
import os

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
    # Twice, or a third time as root, when the workers' uid is known (issue 51: who they ran as), each write new.
    assert len(writes) == (3 if os.geteuid() == 0 else 2), [sorted(w) for w in writes]
    first, second = writes[:2]
    assert first["backend"] == "local" and first["torch"] and "network" not in first  # the host, before any node
    assert second["network"]["link_measurement"]["measured"] is False  # the network, with how it was measured
    assert {k: v for k, v in second.items() if k != "network"} == first
    if len(writes) == 3:
        assert {k: v for k, v in writes[2].items() if k != "workers_user"} == second
        assert writes[2]["workers_user"]["uid"] != 0, writes[2]["workers_user"]
    assert json.loads((result.run_dir / "environment.json").read_text()) == writes[-1]
