"""Export a stored run folder to an experiment tracker: MLflow (a local file store) or TensorBoard (event files).

One tracker run per optimizer, with the optimizer's options and the run's settings as parameters, per-step
metrics (mean over ranks; the step time is the slowest rank's, as in the summary) and the summary figures,
and the report, summary and scenario attached. Each tracker is an optional extra:
`pip install 'distro-bench[mlflow]'` / `'distro-bench[tensorboard]'`.
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import TYPE_CHECKING

import numpy as np

from distro_bench.errors import CapabilityError, InputError
from distro_bench.results import runfiles

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


ATTACHED = {"report.md": "report.md", "report.html": "report.html", "summary.json": "summary.json",
            "summary.csv": "summary.csv", "scenario.yaml": "scenario.yaml", "environment.json": "environment.json"}


def attachments(run: Run) -> list[tuple[PurePath, bytes]]:
    """(path in the run folder, its bytes) of each file a tracker gets: read without following a link,
    regular files only, capped (harness/distro_bench/results/runfiles.py), never copied by name."""
    out = []
    for name, kind in ATTACHED.items():
        try:
            out.append((PurePath(name), runfiles.read_bytes(run.path, name, kind)))
        except FileNotFoundError:
            continue
    for rel in runfiles.iter_files(run.path, "plots", "*.png"):
        if len(rel.parts) == 2:  # plots/<name>.png, as `report` writes them
            out.append((rel, runfiles.read_bytes(run.path, rel, "plot.png")))
    return out


def _missing(extra: str, module: str) -> CapabilityError:
    return CapabilityError(f"export to {extra} needs the {module!r} package: pip install 'distro-bench[{extra}]'")


def to_mlflow(run: Run, dest: Path | str) -> ExportResult:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise _missing("mlflow", "mlflow") from None

    attached = attachments(run)  # read (and refused) before the tracker is touched

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
    with tempfile.TemporaryDirectory(prefix="distro-bench-export-") as staged:  # our copies, logged by name
        files = []
        for rel, data in attached:
            (Path(staged) / rel.parent).mkdir(parents=True, exist_ok=True)
            (Path(staged) / rel).write_bytes(data)
            files.append(Path(staged) / rel)
        _mlflow_runs(run, client, exp_id, files, result)
    return result


def _mlflow_runs(run: Run, client, exp_id: str, files: list[Path], result: ExportResult) -> None:
    from mlflow.entities import Metric, Param, RunTag

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


def to_tensorboard(run: Run, dest: Path | str) -> ExportResult:
    if not isinstance(dest, Path):  # a URI: event files need a folder (`dest / opt` would raise TypeError)
        raise InputError(f"--dest: tensorboard writes event files to a folder, not to {dest!r}")
    try:
        import tensorboard  # noqa: F401  (torch's writer needs it)
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise _missing("tensorboard", "tensorboard") from None

    # Optimizer names come from the run folder (metrics.parquet, summary.json), which anyone may forge: each
    # becomes one folder below `dest` only through runfiles.safe_join (no separator, `..`, absolute path or
    # control character), all of them checked before anything is written.
    logdirs = {opt: runfiles.safe_join(dest, opt, what="optimizer") for opt in run.optimizers}
    result = ExportResult("tensorboard", dest)
    files = dict(attachments(run))
    report = files.get(PurePath("report.md"))
    plots = [(rel, data) for rel, data in files.items() if rel.parent == PurePath("plots")]
    for opt in run.optimizers:
        rows = run.metrics[run.metrics["optimizer"] == opt]
        logdir = logdirs[opt]
        dest.mkdir(parents=True, exist_ok=True)  # the folder the user named (or the run folder's, made no-follow)
        os.close(runfiles.open_dir(dest, opt, create=True))  # made here, refused if a link (results/runfiles.py)
        with SummaryWriter(log_dir=str(logdir)) as w:
            for k, series in step_metrics(rows).items():
                for step, v in series:
                    w.add_scalar(k, v, step)
            params = params_of(run, opt)
            w.add_text("parameters", "\n".join(f"    {k}: {v}" for k, v in params.items()))
            w.add_text("summary", "    " + json.dumps(run.summary.optimizers[opt].to_dict() if opt in
                                                    run.summary.optimizers else {}, indent=2).replace("\n", "\n    "))
            if report is not None:
                w.add_text("report", report.decode("utf-8", "replace"))
            for rel, data in plots:
                w.add_image(f"plots/{rel.stem}", _png(run.path / rel, data)[..., :3], dataformats="HWC")
            w.add_hparams({k: v for k, v in params.items() if k.startswith(("optimizer", "model", "train"))},
                          dict(summary_metrics(run, opt)), run_name=".")
        result.runs[opt] = str(logdir)
    return result


def _png(path: Path, data: bytes):
    """A PNG's pixels (H, W, channels) from its bytes; RunFileError naming the file when it is not one."""
    import matplotlib.image as mpimg

    try:
        img = mpimg.imread(io.BytesIO(data), format="png")
    except Exception:  # Pillow's and matplotlib's errors for a broken image vary
        raise runfiles.RunFileError(f"{path}: not a PNG image") from None
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    return img


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
    if dest is None:  # a folder of the run folder: made without following a link (results/runfiles.py)
        dest = run.path / default
        try:
            os.close(runfiles.open_dir(run.path, default, create=True))
        except OSError as e:
            raise InputError(f"{dest}: cannot be made ({(e.strerror or type(e).__name__).lower()})") from None
    elif "://" not in str(dest):
        dest = Path(dest)
    return fn(run, dest)
