"""Issue 36: in the coordinating process the files a scenario names (trace files, the corpus) are checked once,
when it is loaded; with_overrides, the run folder's copy (dump_for_run) and its reload do not read, parse or
check them again."""

from __future__ import annotations

import collections

import pytest
import yaml

from distro_bench.errors import ScenarioError
from distro_bench.run.lifecycle import RunLifecycle
from distro_bench.scenario import loading, problems
from distro_bench.scenario.loading import load_scenario, with_overrides
from tests.helpers import tiny_scenario_dict


@pytest.fixture
def counted(monkeypatch):
    calls: collections.Counter = collections.Counter()
    # parse_trace is called from the checks (problems) and from the run folder's copy (loading): both counted
    for owner, name in ((problems, "_trace_problems"), (problems, "_corpus_problems"), (problems, "parse_trace"),
                        (loading, "parse_trace")):
        inner = getattr(owner, name)

        def wrapper(*a, _inner=inner, _name=name, **k):
            calls[_name] += 1
            return _inner(*a, **k)

        monkeypatch.setattr(owner, name, wrapper)
    return calls


@pytest.fixture
def traced_file(tmp_path):
    (tmp_path / "corpus.txt").write_text("def f(x):\n    return x + 1\n" * 400)
    (tmp_path / "up.csv").write_text("".join(f"{t},10000000\n" for t in range(0, 5000, 100)))
    d = tiny_scenario_dict(workers=[{"count": 2, "hardware": "host", "link": "traced"}],
                           links={"traced": {"up_trace": "up.csv"}})
    d["data"] = {**d["data"], "corpus": "corpus.txt"}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def test_files_checked_once_through_overrides_and_the_run_folder(traced_file, tmp_path, counted):
    s = load_scenario(traced_file)
    assert counted == {"_trace_problems": 1, "_corpus_problems": 1, "parse_trace": 1}
    o = with_overrides(s, steps=3, seed=4)
    assert (o.train.steps, o.train.seed) == (3, 4)
    life = RunLifecycle(o, "local")
    try:
        run_dir = life.open(tmp_path / "runs")
    finally:
        life.release()
    # not again: not by with_overrides, not by dump_for_run's copy, not by the reload of the folder's copy
    assert counted == {"_trace_problems": 1, "_corpus_problems": 1, "parse_trace": 1}
    # the run folder's copy holds the trace bytes validation read, and the reloaded scenario follows it
    assert (run_dir / "traces" / "traced-up-up.csv").read_bytes() == (traced_file.parent / "up.csv").read_bytes()
    assert life.scenario.nodes()[0].link.up_trace == "traces/traced-up-up.csv"
    assert life.scenario.train.steps == 3


def test_overrides_still_run_every_other_check(traced_file):
    s = load_scenario(traced_file)
    with pytest.raises(ScenarioError) as e:
        with_overrides(s, tokens="1000T")  # a budget too long: a reference check, still made
    assert "train.tokens" in str(e.value)
