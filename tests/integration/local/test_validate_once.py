"""Issue 36: the scenario is validated in full once, when the run is opened; every worker reads the run folder's
resolved copy with the models' checks only (scenario/loading.py load_resolved): no trace, corpus or reference
re-check."""

from __future__ import annotations

import collections
import os
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest
import yaml

from distro_bench.errors import ScenarioError
from distro_bench.run.runner import RunOptions, run_scenario
from distro_bench.scenario import loading, problems
from distro_bench.scenario.loading import dump_for_run, load_resolved, scenario_from_dict
from tests.helpers import tiny_scenario_dict

# Loaded by every Python process the run starts (PYTHONPATH): counts, per process, each call of the scenario's
# validation entries into COUNT_DIR, one line per call.
COUNTER = textwrap.dedent('''
    import os
    from distro_bench.scenario import loading, problems

    def _counted(owner, name):
        inner = getattr(owner, name, None)
        if inner is None:
            return
        def wrapper(*a, **k):
            with open(os.path.join(os.environ["VALIDATE_ONCE_COUNT_DIR"], str(os.getpid())), "a") as f:
                f.write(name + "\\n")
            return inner(*a, **k)
        setattr(owner, name, wrapper)

    # loading's own entries and the checks it calls; the file checks that problems' reference_problems calls
    for _owner, _name in ((loading, "scenario_from_dict"), (loading, "load_scenario"), (loading, "load_resolved"),
                          (loading, "reference_problems"), (problems, "_trace_problems"), (problems, "_corpus_problems")):
        _counted(_owner, _name)
    if os.environ.get("VALIDATE_ONCE_PROJECTION") == "1":  # the worker imports it (and torch) anyway
        from distro_bench.train import projection
        _counted(projection, "comm_seconds")
''')


def _write_corpus_and_trace(folder):
    (folder / "corpus.txt").write_text("def f(x):\n    return x + 1\n" * 400)
    (folder / "up.csv").write_text("".join(f"{t},{10_000_000}\n" for t in range(0, 5000, 100)))


def test_workers_do_not_revalidate_the_scenario(tmp_path, monkeypatch, request):
    """A real 2-worker local run over a scenario with a corpus file and a trace: each worker loads the resolved
    copy once (load_resolved) and runs none of the file or reference checks, nor the projection that chooses
    DisTrO's `exchange: auto` (the lifecycle chose it once, into scenario.yaml)."""
    site, src = tmp_path / "site", tmp_path / "scen"
    for d in (site, src):
        d.mkdir()
    # The workers run as their run's own uid: their counts go where any uid writes (/tmp is 1777; tmp_path's
    # parents are 0700 and nothing but their own folder, their imports and their inputs is exposed to them).
    counts = Path(tempfile.mkdtemp(prefix="dbench-counts-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(counts, ignore_errors=True))
    os.chmod(counts, 0o777)
    (site / "sitecustomize.py").write_text(COUNTER)
    _write_corpus_and_trace(src)
    d = tiny_scenario_dict(workers=[{"count": 2, "hardware": "host", "link": "traced"}],
                           links={"traced": {"up_trace": "up.csv"}})
    d["data"] = {**d["data"], "corpus": "corpus.txt"}
    d["train"] = {"steps": 2, "eval_every": 2, "seed": 0}
    d["optimizers"] = {"adamw": {"lr": 3e-3}, "distro": {"lr": 3e-3, "topk": 4, "exchange": "auto"}}
    s = scenario_from_dict(d, base_dir=src)
    monkeypatch.setenv("VALIDATE_ONCE_COUNT_DIR", str(counts))
    monkeypatch.setenv("VALIDATE_ONCE_PROJECTION", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    result = run_scenario(s, RunOptions(backend="local", out=tmp_path / "runs", write_report=False,
                                        allow_unemulated=True))  # the trace is read, not followed, on loopback
    assert result.state == "complete"
    per_process = {p.name: collections.Counter(p.read_text().split()) for p in counts.iterdir()}
    workers = {pid: c for pid, c in per_process.items() if c["load_resolved"]}
    assert len(workers) == 4, per_process  # 2 ranks x 2 optimizers counted: the counter was live in them
    for pid, c in workers.items():
        # no scenario_from_dict, no trace/corpus/reference check, no projection (comm_seconds)
        assert c == {"load_resolved": 1}, (pid, c)
    assert yaml.safe_load((result.run_dir / "scenario.yaml").read_text())["optimizers"]["distro"]["exchange"] == "ring"


def test_from_resolved_reads_the_run_copy_without_file_checks(tmp_path, monkeypatch):
    src = tmp_path / "scen"
    src.mkdir()
    _write_corpus_and_trace(src)
    d = tiny_scenario_dict(workers=[{"count": 2, "hardware": "host", "link": "traced"}],
                           links={"traced": {"up_trace": "up.csv"}})
    d["data"] = {**d["data"], "corpus": "corpus.txt"}
    s = scenario_from_dict(d, base_dir=src)
    run = tmp_path / "run"
    run.mkdir()
    text, follows = dump_for_run(s, run)
    assert follows
    (run / "scenario.yaml").write_text(text)

    def refuse(*a, **k):
        raise AssertionError("a file or reference check ran")

    for owner, name in ((loading, "reference_problems"), (problems, "reference_problems"),
                        (problems, "_trace_problems"), (problems, "_corpus_problems")):
        monkeypatch.setattr(owner, name, refuse)
    r = load_resolved(run / "scenario.yaml")
    assert r.nodes()[0].link.up_trace == "traces/traced-up-up.csv"
    assert r.corpus_path() == str((run / "data" / "corpus.txt").resolve())  # the copy validation read (issue 51)
    assert r.budget() == s.budget() and r.resolved_model() == s.resolved_model()


def test_from_resolved_still_checks_the_models(tmp_path):
    """The models' own checks stay: a broken copy is a ScenarioError naming the file and the field."""
    bad = tmp_path / "scenario.yaml"
    bad.write_text("name: x\nworkers: [{count: 0}]\noptimizers: {adamw: {type: adamw}}\n")
    with pytest.raises(ScenarioError) as e:
        load_resolved(bad)
    assert str(bad) in str(e.value) and "workers[0].count" in str(e.value)
