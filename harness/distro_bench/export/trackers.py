"""Export a stored run folder to an experiment tracker: MLflow (a local file store) or TensorBoard (event files).

One tracker run per optimizer, with the optimizer's options and the run's settings as parameters, per-step
metrics (mean over ranks; the step time is the slowest rank's, as in the summary) and the summary figures,
and the report, summary and scenario attached. Each tracker is an optional extra:
`pip install 'distro-bench[mlflow]'` / `'distro-bench[tensorboard]'`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from distro_bench.errors import CapabilityError, InputError

if TYPE_CHECKING:
    import pandas as pd

    from distro_bench.report.load import Run

# metric name -> (metrics.parquet column, how ranks of one step combine)
STEP_METRICS: dict[str, tuple[str, str]] = {
    "loss": ("loss", "mean"), "val_loss": ("val_loss", "mean"), "lr": ("lr", "mean"),
    "step_time_s": ("step_time_s", "max"), "compute_s": ("compute_s", "mean"), "comm_s": ("comm_s", "mean"),
    "payload_tx_bytes": ("payload_tx_bytes", "mean"), "payload_rx_bytes": ("payload_rx_bytes", "mean"),
    "wire_tx_bytes": ("wire_tx_bytes", "mean"), "wire_rx_bytes": ("wire_rx_bytes", "mean"),
}


@dataclass
class ExportResult:
    tracker: str
    dest: Path | str  # a folder, or for MLflow a tracking URI
    runs: dict[str, str] = field(default_factory=dict)  # optimizer -> tracker run id / log folder

    def to_dict(self) -> dict:
        return {"tracker": self.tracker, "dest": str(self.dest), "runs": self.runs}


def step_metrics(df: pd.DataFrame) -> dict[str, list[tuple[int, float]]]:
    """One optimizer's rows -> metric -> [(step, value)], NaN left out. Several seeds: their mean per step."""
    import pandas as pd

    keys = ["seed", "step"] if "seed" in df.columns and df["seed"].notna().any() else ["step"]
    out: dict[str, list[tuple[int, float]]] = {}
    for name, (col, how) in STEP_METRICS.items():
        if col not in df.columns:
            continue
        per = df.groupby(keys)[col].agg(how)
        if len(keys) > 1:
            per = per.groupby(level="step").mean()
        per = pd.to_numeric(per, errors="coerce").dropna()
        if len(per):
            out[name] = [(int(s), float(v)) for s, v in per.items()]
    return out


def params_of(run: Run, optimizer: str) -> dict[str, str]:
    """Flat string parameters: the optimizer's resolved options, then the run's settings."""
    sc = run.scenario
    opts = (sc.get("optimizers") or {}).get(optimizer) or {}
    params = {f"optimizer.{k}": v for k, v in opts.items()}
    params.update({
        "optimizer": optimizer, "baseline": run.summary.baseline, "scenario": sc.get("name"),
        "backend": run.summary.run.backend, "world_size": run.summary.run.world_size,
        "model": (sc.get("model") or {}).get("preset") or "custom",
        **{f"model.{k}": v for k, v in (sc.get("model") or {}).items() if k != "preset"},
        **{f"train.{k}": v for k, v in (sc.get("train") or {}).items()},
        **{f"data.{k}": v for k, v in (sc.get("data") or {}).items()},
        "run_dir": str(run.path),
    })
    return {k: str(v) for k, v in params.items() if v is not None}


def summary_metrics(run: Run, optimizer: str) -> dict[str, float]:
    s = run.summary.optimizers.get(optimizer)
    if s is None:
        return {}
    out = {}
    for k, v in s.to_dict().items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
            continue
        out[f"summary.{k}"] = float(v)
    return out


def attachments(run: Run) -> list[Path]:
    files = [run.path / n for n in ("report.md", "report.html", "summary.json", "summary.csv", "scenario.yaml",
                                    "environment.json")]
    return [p for p in files if p.is_file()] + sorted((run.path / "plots").glob("*.png"))


def _missing(extra: str, module: str) -> CapabilityError:
    return CapabilityError(f"export to {extra} needs the {module!r} package: pip install 'distro-bench[{extra}]'")


def to_mlflow(run: Run, dest: Path | str) -> ExportResult:
    try:
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise _missing("mlflow", "mlflow") from None

    uri = str(dest) if "://" in str(dest) else None  # a tracking server or database, e.g. sqlite:///mlflow.db
    if uri is None:
        Path(dest).mkdir(parents=True, exist_ok=True)
        uri = Path(dest).resolve().as_uri()
        # MLflow 3 keeps the file store (the one tracker store that needs no server or database) behind a flag.
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=uri)
    name = run.summary.run.scenario or run.path.name
    exp = client.get_experiment_by_name(name)
    exp_id = exp.experiment_id if exp else client.create_experiment(name)
    result = ExportResult("mlflow", dest)
    files = attachments(run)
    for opt in run.optimizers:
        rows = run.metrics[run.metrics["optimizer"] == opt]
        r = client.create_run(exp_id, run_name=f"{run.path.name}/{opt}",
                              tags={"distro_bench.run_dir": str(run.path), "distro_bench.optimizer": opt,
                                    "distro_bench.state": run.state})
        rid = r.info.run_id
        ts = r.info.start_time
        params = [Param(k, v[:6000]) for k, v in params_of(run, opt).items()]
        metrics = [Metric(k, v, ts, step) for k, series in step_metrics(rows).items() for step, v in series]
        metrics += [Metric(k, v, ts, 0) for k, v in summary_metrics(run, opt).items()]
        for i in range(0, max(len(params), len(metrics), 1), 900):  # MLflow caps a batch at 1000 entries
            client.log_batch(rid, metrics=metrics[i:i + 900], params=params[i:i + 100] if i < len(params) else [],
                             tags=[RunTag("distro_bench.baseline", str(run.summary.baseline))] if i == 0 else [])
        for p in params[900:]:
            client.log_param(rid, p.key, p.value)
        for f in files:
            client.log_artifact(rid, str(f), artifact_path="plots" if f.suffix == ".png" else None)
        client.set_terminated(rid, "FINISHED" if run.state == "complete" else "FAILED")
        result.runs[opt] = rid
    return result


def to_tensorboard(run: Run, dest: Path | str) -> ExportResult:
    if not isinstance(dest, Path):  # a URI: event files need a folder (`dest / opt` would raise TypeError)
        raise InputError(f"--dest: tensorboard writes event files to a folder, not to {dest!r}")
    try:
        import tensorboard  # noqa: F401  (torch's writer needs it)
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise _missing("tensorboard", "tensorboard") from None

    result = ExportResult("tensorboard", dest)
    report = run.path / "report.md"
    plots = sorted((run.path / "plots").glob("*.png"))
    for opt in run.optimizers:
        rows = run.metrics[run.metrics["optimizer"] == opt]
        logdir = dest / opt
        with SummaryWriter(log_dir=str(logdir)) as w:
            for k, series in step_metrics(rows).items():
                for step, v in series:
                    w.add_scalar(k, v, step)
            params = params_of(run, opt)
            w.add_text("parameters", "\n".join(f"    {k}: {v}" for k, v in params.items()))
            w.add_text("summary", "    " + json.dumps(run.summary.optimizers[opt].to_dict() if opt in
                                                    run.summary.optimizers else {}, indent=2).replace("\n", "\n    "))
            if report.is_file():
                w.add_text("report", report.read_text())
            for p in plots:
                import matplotlib.image as mpimg

                w.add_image(f"plots/{p.stem}", mpimg.imread(p)[..., :3], dataformats="HWC")
            w.add_hparams({k: v for k, v in params.items() if k.startswith(("optimizer", "model", "train"))},
                          dict(summary_metrics(run, opt)), run_name=".")
        result.runs[opt] = str(logdir)
    return result


EXPORTERS: dict[str, tuple[Callable[[Run, Path | str], ExportResult], str]] = {
    "mlflow": (to_mlflow, "mlruns"),
    "tensorboard": (to_tensorboard, "tensorboard"),
}


def export_run(run: Run, to: str, dest: Path | str | None = None) -> ExportResult:
    if to not in EXPORTERS:
        raise InputError(f"--to: unknown tracker {to!r}; one of {', '.join(EXPORTERS)}")
    fn, default = EXPORTERS[to]
    if not len(run.metrics):
        raise InputError(f"{run.path}: no metrics recorded; nothing to export")
    if dest is None:
        dest = run.path / default
    elif "://" not in str(dest):
        dest = Path(dest)
    return fn(run, dest)
