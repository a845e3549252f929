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
    assert set(out["runs"]) == {"adamw", "distro"}
    client = MlflowClient(tracking_uri=dest.resolve().as_uri())
    run = api.load_run(run_dir)
    for opt, rid in out["runs"].items():
        r = client.get_run(rid)
        assert r.data.params["optimizer"] == opt and r.data.params["scenario"] == "synth"
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
        acc = EventAccumulator(result.runs[opt], size_guidance={"images": 0, "scalars": 0, "tensors": 0})
        acc.Reload()
        loss = acc.Scalars("loss")
        assert [e.step for e in loss] == list(range(12))
        expected = run.metrics[(run.metrics["optimizer"] == opt) & (run.metrics["step"] == 5)]["loss"].mean()
        assert loss[5].value == pytest.approx(expected, rel=1e-6)
        tags = acc.Tags()
        assert "report/text_summary" in tags["tensors"] and "parameters/text_summary" in tags["tensors"]
        assert any(t.startswith("plots/") for t in tags["images"])


def test_unknown_tracker_is_a_choice_error(run_dir, cli):
    result = cli("export", run_dir, "--to", "wandb")
    assert result.exit_code == 2 and "wandb" in result.output


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
