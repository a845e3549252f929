"""Synthetic run folders (fast, no training) for the report and check tests, and tests of the numbers behind plots."""

from __future__ import annotations

import json

import pytest
import yaml

from distro_bench.results.rundir import atomic_write_json
from tests.helpers import make_run


@pytest.fixture
def synth_run(tmp_path):
    return make_run(tmp_path)


def test_fixture_is_a_loadable_run_with_a_reduction(synth_run):
    from distro_bench.report.load import load_for_report

    run = load_for_report(synth_run)
    assert run.state == "complete" and run.optimizers == ["adamw", "distro"]
    assert run.summary.to_dict() == run.data.summary  # the typed view reports read holds what the folder holds
    assert run.summary.optimizers["distro"].reduction_vs_baseline == pytest.approx(1000, rel=0.01)


def test_breakdown_adds_up_to_the_step_time(synth_run):
    from distro_bench.report import analysis
    from distro_bench.report.load import load_for_report

    df = load_for_report(synth_run).data.metrics
    adamw = df[df["optimizer"] == "adamw"]
    parts = analysis.breakdown(adamw)
    assert sum(parts.values()) == pytest.approx(analysis.steady(adamw)["step_time_s"].mean(), rel=1e-6)
    assert all(v >= 0 for v in parts.values())


def test_per_rank_breakdown_shows_the_straggler(tmp_path):
    from distro_bench.report import analysis
    from distro_bench.report.load import load_for_report

    df = load_for_report(make_run(tmp_path, straggler=2)).data.metrics
    t = analysis.rank_breakdown(df[df["optimizer"] == "adamw"])
    assert int(t["compute"].idxmax()) == 2
    assert int(t["wait for slowest"].idxmin()) == 2  # everyone else waits for it
    assert t["wait for slowest"].drop(index=2).min() > 0.1


def test_time_to_target_uses_the_worst_final_val_loss(synth_run):
    from distro_bench.report import analysis
    from distro_bench.report.load import load_for_report

    run = load_for_report(synth_run)
    frames = {n: analysis.per_step(run.data.metrics[run.data.metrics["optimizer"] == n]) for n in run.optimizers}
    result = analysis.time_to_target(frames)
    worst = max(run.data.summary["optimizers"][n]["final_val_loss"] for n in run.optimizers)
    assert result.target == pytest.approx(worst)
    assert result.basis == "validation loss" and "distro" in result.explanation
    assert all(v is not None for v in result.reached.values())
    # adamw ends lower, so it reaches distro's final loss no later than its own last evaluation.
    assert result.reached["adamw"][1] < result.reached["distro"][1]


def test_crashed_run_without_summary_is_rebuilt_from_worker_records(tmp_path):
    """A harness killed before finalize leaves only scenario.yaml and workers/*.jsonl (status 'running')."""
    from distro_bench.report.load import load_for_report

    run = tmp_path / "crashed"
    (run / "workers" / "adamw").mkdir(parents=True)
    (run / "scenario.yaml").write_text(yaml.safe_dump({"name": "crashed", "baseline": "adamw",
                                                       "optimizers": {"adamw": {"lr": 1e-3}}, "workers": [{"count": 2}]}))
    atomic_write_json(run / "status.json", {"state": "running", "reason": None})
    for r in range(2):
        lines = [json.dumps({"type": "step", "optimizer": "adamw", "rank": r, "step": s, "loss": 3.0 - s / 10,
                             "step_time_s": 0.1, "compute_s": 0.05, "comm_s": 0.04, "t_start": 100.0 + s / 10,
                             "t_ready": 100.05 + s / 10, "payload_tx_bytes": 10, "payload_rx_bytes": 10,
                             "collectives": 1, "tokens": 8, "data_s": 0.0, "stretch_s": 0.0, "compress_s": 0.0,
                             "apply_s": 0.01, "lr": 0.001}) for s in range(3)]
        (run / "workers" / "adamw" / f"rank{r}.jsonl").write_text("\n".join(lines) + "\n{\"type\": \"st")
    loaded = load_for_report(run)
    assert loaded.state == "running" and "did not finish" in loaded.state_note()
    assert loaded.notes and "rebuilt" in loaded.notes[0]
    assert len(loaded.data.metrics) == 6
    assert not (run / "summary.json").exists()  # reports never write into a run's data files


def test_a_rebuilt_summary_is_built_by_the_same_builder_as_finalize(tmp_path):
    # issue 35: the summary rebuilt for a crashed run lacked the budget, the seeds and the costs; it now comes
    # from results/build.py's build_summary, as finalize's does
    from distro_bench.report.load import load_for_report
    from distro_bench.results import metrics
    from distro_bench.results.build import build_summary
    from tests.unit.results.test_fair import records

    run = tmp_path / "crashed"
    recs = []
    for seed in (0, 1, 2):
        recs += records("adamw", seed, [3.0, 2.6]) + records("distro", seed, [3.2, 2.7])
    for opt in ("adamw", "distro"):
        for seed in (0, 1, 2):
            folder = run / "workers" / opt / f"seed{seed}"
            folder.mkdir(parents=True)
            for r in range(2):
                mine = [x for x in recs if x["optimizer"] == opt and x["seed"] == seed and x["rank"] == r]
                start = {"type": "start", "rank": r, "world_size": 2, "device": "cpu", "optimizer": opt, "seed": seed}
                (folder / f"rank{r}.jsonl").write_text("\n".join(json.dumps(x) for x in [start, *mine]) + "\n")
    scen = {"name": "crashed", "baseline": "adamw", "workers": [{"count": 2, "hardware": "host"}],
            "train": {"steps": 10, "eval_every": 5, "seeds": [0, 1, 2]},
            "optimizers": {"adamw": {"lr": 1e-3}, "distro": {"lr": 1e-3}},
            "checks": {"target_val_loss": 2.8}, "costs": {"egress_usd_per_gb": 0.09}}
    (run / "scenario.yaml").write_text(yaml.safe_dump(scen))
    atomic_write_json(run / "status.json", {"state": "running", "reason": None})
    loaded = load_for_report(run)
    s = loaded.data.summary
    assert loaded.summary.optimizers["distro"].seeds == 3 and loaded.summary.run.world_size == 2  # typed as well
    assert s["run"]["budget"]["kind"] == "steps" and s["run"]["budget"]["value"] == 10 and s["run"]["seeds"] == [0, 1, 2]
    assert s["target"] == {"val_loss": 2.8, "how": "checks.target_val_loss in the scenario", "post_hoc": False}
    assert s["costs"]["egress_usd_per_gb"] == 0.09 and s["run"]["world_size"] == 2
    assert s["optimizers"]["distro"]["seeds"] == 3 and "egress_usd_to_target" in s["optimizers"]["distro"]
    df, events = metrics.read_worker_records(run / "workers")
    again = build_summary(df, events, schema_version=s["schema_version"], run=s["run"], baseline="adamw",
                          target_val_loss=2.8, target_how="checks.target_val_loss in the scenario",
                          costs={"egress_usd_per_gb": 0.09, "gpu_usd_per_hour": None})
    assert again["optimizers"]["distro"]["time_to_target_s"] == s["optimizers"]["distro"]["time_to_target_s"]
