"""`distro-bench export`: a run folder into MLflow (local file store) and TensorBoard (event files), read back
offline. Each tracker is an optional extra; its test skips only where the package is not installed."""

from __future__ import annotations

import json

import pytest

from distro_bench import api
from distro_bench.export.trackers import step_metrics
from tests.helpers import make_run


@pytest.fixture
def run_dir(tmp_path):
    path = make_run(tmp_path, steps=12)
    api.report(path)  # the report is attached to every tracker run
    return path


def test_step_metrics_are_per_step_means_with_the_slowest_rank_time(run_dir):
    run = api.load_run(run_dir)
    rows = run.metrics[run.metrics["optimizer"] == "distro"]
    m = step_metrics(rows)
    assert [s for s, _ in m["loss"]] == list(range(12))
    step3 = rows[rows["step"] == 3]
    assert dict(m["loss"])[3] == pytest.approx(step3["loss"].mean())
    assert dict(m["step_time_s"])[3] == pytest.approx(step3["step_time_s"].max())
    assert len(m["val_loss"]) == rows.dropna(subset=["val_loss"])["step"].nunique()


def test_mlflow_export_reads_back(run_dir, tmp_path, cli):
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    from mlflow.tracking import MlflowClient

    dest = tmp_path / "mlruns"
    result = cli("export", run_dir, "--to", "mlflow", "--dest", dest, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert set(out["runs"]) == {"adamw/seed0", "distro/seed0"}  # one tracker run per optimizer and seed
    client = MlflowClient(tracking_uri=dest.resolve().as_uri())
    run = api.load_run(run_dir)
    for key, rid in out["runs"].items():
        opt = key.split("/")[0]
        r = client.get_run(rid)
        assert r.data.params["optimizer"] == opt and r.data.params["scenario"] == "synth"
        _has_context(r.data.params, run)
        assert r.data.tags["distro_bench.git_commit"] == "a" * 40 and r.data.tags["distro_bench.seed"] == "seed0"
        assert r.data.params["optimizer.lr"] == str(run.scenario["optimizers"][opt]["lr"])
        history = client.get_metric_history(rid, "loss")
        assert sorted(m.step for m in history) == list(range(12))
        assert r.data.metrics["summary.step_time_s_mean"] == pytest.approx(
            run.summary.optimizers[opt].step_time_s_mean)
        artifacts = {a.path for a in client.list_artifacts(rid)}
        assert {"report.md", "report.html", "summary.json", "plots"} <= artifacts
        assert client.list_artifacts(rid, "plots")


def test_tensorboard_export_reads_back(run_dir, tmp_path):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    result = api.export(run_dir, "tensorboard", tmp_path / "tb")
    run = api.load_run(run_dir)
    for opt in ("adamw", "distro"):
        assert result.runs[f"{opt}/seed0"] == str(tmp_path / "tb" / "synth" / opt / "seed0")
        acc = EventAccumulator(result.runs[f"{opt}/seed0"], size_guidance={"images": 0, "scalars": 0, "tensors": 0})
        acc.Reload()
        loss = acc.Scalars("loss")
        assert [e.step for e in loss] == list(range(12))
        expected = run.metrics[(run.metrics["optimizer"] == opt) & (run.metrics["step"] == 5)]["loss"].mean()
        assert loss[5].value == pytest.approx(expected, rel=1e-6)
        tags = acc.Tags()
        assert "report/text_summary" in tags["tensors"] and "parameters/text_summary" in tags["tensors"]
        assert any(t.startswith("plots/") for t in tags["images"])


def test_two_runs_in_one_tensorboard_folder_stay_apart(tmp_path):
    # Issue 52: two runs exported into one folder merged (tb/adamw held 12 + 4 loss points of both)
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    a, b = make_run(tmp_path, "a", steps=12), make_run(tmp_path, "b", steps=4)
    ra, rb = api.export(a, "tensorboard", tmp_path / "tb"), api.export(b, "tensorboard", tmp_path / "tb")
    for result, steps in ((ra, 12), (rb, 4)):
        for logdir in result.runs.values():
            acc = EventAccumulator(logdir, size_guidance={"scalars": 0})
            acc.Reload()
            assert [e.step for e in acc.Scalars("loss")] == list(range(steps)), logdir
    assert len({*ra.runs.values(), *rb.runs.values()}) == 4


def test_every_seed_is_its_own_series(tmp_path):
    from distro_bench.export.trackers import seed_runs, summary_metrics
    from tests.unit.runfolders import make_run as make_seeded_run

    run = api.load_run(make_seeded_run(tmp_path, seeds=3, steps=6))
    parts = seed_runs(run, "distro")
    assert [k for k, _ in parts] == ["seed0", "seed1", "seed2"]
    assert all(set(rows["seed"]) == {i} and len(rows) == 6 * 2 for i, (_, rows) in enumerate(parts))
    per = run.summary.optimizers["distro"].per_seed or {}
    assert summary_metrics(run, "distro", "seed2")["summary.final_loss"] == pytest.approx(per["2"]["final_loss"])


def _has_context(params: dict, run) -> None:
    """The run's context in a tracker run's parameters (issue 52): run id, commit, scenario hash, each node's link,
    emulated or not, the backend, hardware and model."""
    from distro_bench.export.trackers import scenario_hash

    assert params["run_id"] == run.path.name and params["git_commit"] == run.environment["git_commit"]
    assert params["scenario_hash"] == scenario_hash(run.scenario)
    assert params["backend"] == "netns" and params["network.emulated"] == "True"
    link = run.scenario["links"][run.scenario["workers"][0]["link"]]
    for rank in range(4):
        for f in ("up", "down", "delay", "jitter", "loss"):
            assert params[f"node{rank}.link.{f}"] == str(link[f]), (rank, f)
        assert params[f"node{rank}.hardware"] == run.scenario["workers"][0]["hardware"]
    assert params["model"] == "tiny"


def test_wandb_offline_export_reads_back_two_runs(tmp_path, cli):
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    from tests.unit.wandb_offline import read_offline_runs

    a, b = make_run(tmp_path, "a", steps=12), make_run(tmp_path, "b", steps=4, env={"git_commit": "b" * 40})
    dest = tmp_path / "wb"
    for run_dir in (a, b):
        result = cli("export", run_dir, "--to", "wandb", "--dest", dest, "--json")
        assert result.exit_code == 0, result.output
        assert set(json.loads(result.stdout)["runs"]) == {"adamw/seed0", "distro/seed0"}
    found = read_offline_runs(dest)  # what wandb wrote, read back from its offline run folders
    assert sorted(r["name"] for r in found) == ["a/adamw/seed0", "a/distro/seed0", "b/adamw/seed0", "b/distro/seed0"]
    for r in found:
        run = api.load_run(a if r["name"].startswith("a/") else b)
        assert r["config"]["git_commit"] == run.environment["git_commit"]  # a's "a" * 40, b's "b" * 40
        _has_context({k: str(v) for k, v in r["config"].items()}, run)
        steps = 12 if r["name"].startswith("a/") else 4
        assert [row["_step"] for row in r["history"] if "loss" in row] == list(range(steps))
        opt = r["name"].split("/")[1]
        assert r["summary"]["summary.step_time_s_mean"] == pytest.approx(run.summary.optimizers[opt].step_time_s_mean)


def test_unknown_tracker_is_a_choice_error(run_dir, cli):
    result = cli("export", run_dir, "--to", "comet")
    assert result.exit_code == 2 and "comet" in result.output


def _tree(root) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("where", ["metrics", "summary"])
@pytest.mark.parametrize("forged", ["ABS", "../../../../../../../../ESCAPE/x", "..", "a/b", "a\x1b]0;pwned\x07b",
                                    "\u202etxt.exe", ""])
def test_export_on_forged_optimizer_names_writes_nothing_outside_its_destination(tmp_path, forged, where, cli):
    # Issue 51 item 3: optimizer names from a forged metrics.parquet or summary.json became folder names:
    # event files went to an absolute path and to RUN/tensorboard/../../../../../tmp/...
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    import pandas as pd

    runs = tmp_path / "runs"
    run_dir = make_run(runs, steps=4)
    outside = tmp_path / "outside"
    outside.mkdir()
    name = (str(outside / "abs") if forged == "ABS"
            else forged.replace("ESCAPE", str(outside.relative_to("/"))))  # `..` enough to reach / and back down
    if where == "metrics":
        df = pd.read_parquet(run_dir / "metrics.parquet")
        df["optimizer"] = df["optimizer"].replace("distro", name)
        df.to_parquet(run_dir / "metrics.parquet", index=False)
    else:
        summary = json.loads((run_dir / "summary.json").read_text())
        summary["optimizers"] = {(name if k == "distro" else k): v for k, v in summary["optimizers"].items()}
        (run_dir / "summary.json").write_text(json.dumps(summary))
    before = _tree(tmp_path)
    result = cli("export", run_dir, "--to", "tensorboard")
    assert result.exit_code == 2, result.output
    assert "not usable as a file or folder name" in result.output and "\x1b" not in result.output
    assert _tree(outside) == set()
    assert _tree(tmp_path) - before <= {str((run_dir / "tensorboard").relative_to(tmp_path))}  # made, left empty


def test_wandb_export_refuses_a_forged_optimizer_name_before_writing(tmp_path, cli):
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    import pandas as pd

    run_dir = make_run(tmp_path / "runs", steps=4)
    df = pd.read_parquet(run_dir / "metrics.parquet")
    df["optimizer"] = df["optimizer"].replace("distro", "../../escape")
    df.to_parquet(run_dir / "metrics.parquet", index=False)
    result = cli("export", run_dir, "--to", "wandb", "--dest", tmp_path / "wb")
    assert result.exit_code == 2 and "not usable as a file or folder name" in result.output, result.output
    assert not (tmp_path / "wb").exists()
