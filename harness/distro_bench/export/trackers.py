"""Export a stored run folder to an experiment tracker: MLflow (a local file store), TensorBoard (event files) or
Weights & Biases (offline: a local run folder that `wandb sync` uploads later; nothing goes over the network).

One tracker run per optimizer and seed (`<run folder>/<optimizer>/seed<k>`), never merged with another run
folder's: each carries the run's context (`run_context`: run id, git commit, scenario hash, backend, whether the
network was emulated, every node's link rate, delay, jitter and loss, the hardware and the model) and the
optimizer's options as parameters or tags, that seed's per-step metrics (mean over ranks; the step time is the
slowest rank's, as in the summary) and the summary figures, with the report, summary and scenario attached.
Each tracker is an optional extra: `pip install 'distro-bench[mlflow]'` / `'[tensorboard]'` / `'[wandb]'`.
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
from distro_bench.results.history import scenario_hash  # the index's key too (issue 52)

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


def seed_runs(run: Run, optimizer: str) -> list[tuple[str, pd.DataFrame]]:
    """One optimizer's rows split by seed: [("seed0", rows), ...]; a folder without seeds in its metrics ran one,
    the scenario's train.seed."""
    rows = run.metrics[run.metrics["optimizer"] == optimizer]
    if "seed" not in rows.columns or not rows["seed"].notna().any():
        train = run.scenario.get("train")
        train = train if isinstance(train, dict) else {}
        return [(f"seed{train.get('seed', 0)}", rows)]
    return [(f"seed{int(k)}", part) for k, part in rows.groupby("seed", sort=True)]


LINK_FIELDS = ("up", "down", "delay", "jitter", "loss")


def run_context(run: Run) -> dict[str, str]:
    """What every tracker run of this run folder carries: the run id (the run folder's name), git commit and
    whether the tree was dirty, the scenario hash, the backend and whether the network was emulated, each node's
    link (rate up and down, delay, jitter, loss; `none` for an unshaped node), its hardware profile, and the host."""
    env, sc = run.environment, run.scenario
    net = env.get("network") if isinstance(env.get("network"), dict) else {}
    ctx: dict[str, object] = {
        "run_id": run.path.name, "git_commit": env.get("git_commit"), "git_dirty": env.get("git_dirty"),
        "scenario_hash": scenario_hash(sc), "backend": run.summary.run.backend or env.get("backend"),
        "network.emulated": (net or {}).get("network_emulated"), "host": env.get("host"),
        "harness_version": env.get("harness_version"), "torch": env.get("torch"),
    }
    raw_links, raw_hardware = sc.get("links"), sc.get("hardware")
    links = raw_links if isinstance(raw_links, dict) else {}
    hardware = raw_hardware if isinstance(raw_hardware, dict) else {}
    rank = 0
    for group in sc.get("workers") or []:
        if not isinstance(group, dict):
            continue
        link = links.get(group.get("link")) if isinstance(group.get("link"), str) else group.get("link")
        hw = group.get("hardware")
        spec = hardware.get(hw) if isinstance(hw, str) else hw
        for _ in range(int(group.get("count") or 1)):
            node = f"node{rank}"
            ctx[f"{node}.link"] = group.get("link") if isinstance(group.get("link"), str) else (
                "inline" if link else "none")
            for f in LINK_FIELDS:
                if isinstance(link, dict) and link.get(f) is not None:
                    ctx[f"{node}.link.{f}"] = link[f]
            ctx[f"{node}.hardware"] = hw if isinstance(hw, str) else "inline"
            for f in ("device", "tflops", "compute_scale"):
                if isinstance(spec, dict) and spec.get(f) is not None:
                    ctx[f"{node}.hardware.{f}"] = spec[f]
            rank += 1
    return {k: str(v) for k, v in ctx.items() if v is not None}


def params_of(run: Run, optimizer: str) -> dict[str, str]:
    """Flat string parameters: the optimizer's resolved options, the run's context (`run_context`), then the
    run's settings."""
    sc = run.scenario
    opts = (sc.get("optimizers") or {}).get(optimizer) or {}
    params: dict[str, object] = {f"optimizer.{k}": v for k, v in opts.items()}
    params.update(run_context(run))
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


def summary_metrics(run: Run, optimizer: str, seed: str | None = None) -> dict[str, float]:
    """The summary figures of one optimizer (`summary.<key>`), of one seed where `per_seed` has it ("seed2")."""
    s = run.summary.optimizers.get(optimizer)
    if s is None:
        return {}
    figures = s.to_dict()
    per = figures.get("per_seed") or {}
    if seed is not None and isinstance(per.get(seed.removeprefix("seed")), dict):
        figures = per[seed.removeprefix("seed")]
    out = {}
    for k, v in figures.items():
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

    ctx = run_context(run)
    for opt, seed, rows in _series(run):
        r = client.create_run(exp_id, run_name=f"{run.path.name}/{opt}/{seed}",
                              tags={"distro_bench.run_dir": str(run.path), "distro_bench.optimizer": opt,
                                    "distro_bench.seed": seed, "distro_bench.state": run.state,
                                    **{f"distro_bench.{k}": ctx[k] for k in TAGGED if k in ctx}})
        rid = r.info.run_id
        ts = r.info.start_time
        params = [Param(k, v[:6000]) for k, v in {**params_of(run, opt), "seed": seed}.items()]
        metrics = [Metric(k, v, ts, step) for k, series in step_metrics(rows).items() for step, v in series]
        metrics += [Metric(k, v, ts, 0) for k, v in summary_metrics(run, opt, seed).items()]
        for i in range(0, max(len(params), len(metrics), 1), 900):  # MLflow caps a batch at 1000 entries
            client.log_batch(rid, metrics=metrics[i:i + 900], params=params[i:i + 100] if i < len(params) else [],
                             tags=[RunTag("distro_bench.baseline", str(run.summary.baseline))] if i == 0 else [])
        for p in params[900:]:
            client.log_param(rid, p.key, p.value)
        for f in files:
            client.log_artifact(rid, str(f), artifact_path="plots" if f.suffix == ".png" else None)
        client.set_terminated(rid, "FINISHED" if run.state == "complete" else "FAILED")
        result.runs[f"{opt}/{seed}"] = rid


# Context that also goes into tags (searchable in every tracker's run list)
TAGGED = ("run_id", "git_commit", "scenario_hash", "backend", "network.emulated")


def _series(run: Run) -> list[tuple[str, str, pd.DataFrame]]:
    """(optimizer, "seed<k>", rows) for every optimizer and seed of the run."""
    return [(opt, seed, rows) for opt in run.optimizers for seed, rows in seed_runs(run, opt)]


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
    # One folder per run folder, optimizer and seed (<run>/<optimizer>/seed<k>): two runs exported to one `dest`
    # never share a series (they did when the folder was <optimizer>: tb/adamw held both runs' points).
    series = _series(run)
    logdirs = {(opt, seed): runfiles.safe_join(dest, run.path.name, opt, seed, what="run, optimizer or seed")
               for opt, seed, _ in series}
    result = ExportResult("tensorboard", dest)
    files = dict(attachments(run))
    report = files.get(PurePath("report.md"))
    plots = [(rel, data) for rel, data in files.items() if rel.parent == PurePath("plots")]
    for opt, seed, rows in series:
        logdir = logdirs[(opt, seed)]
        dest.mkdir(parents=True, exist_ok=True)  # the folder the user named (or the run folder's, made no-follow)
        # every level made here, refused if a link (results/runfiles.py)
        os.close(runfiles.open_dir(dest, logdir.relative_to(dest), create=True))
        with SummaryWriter(log_dir=str(logdir)) as w:
            for k, points in step_metrics(rows).items():
                for step, v in points:
                    w.add_scalar(k, v, step)
            params = {**params_of(run, opt), "seed": seed}
            w.add_text("parameters", "\n".join(f"    {k}: {v}" for k, v in params.items()))
            w.add_text("summary", "    " + json.dumps(run.summary.optimizers[opt].to_dict() if opt in
                                                    run.summary.optimizers else {}, indent=2).replace("\n", "\n    "))
            if report is not None:
                w.add_text("report", report.decode("utf-8", "replace"))
            for rel, data in plots:
                w.add_image(f"plots/{rel.stem}", _png(run.path / rel, data)[..., :3], dataformats="HWC")
            w.add_hparams({k: v for k, v in params.items() if k.startswith(("optimizer", "model", "train", "node"))
                           or k in run_context(run) or k == "seed"},
                          dict(summary_metrics(run, opt, seed)), run_name=".")
        result.runs[f"{opt}/{seed}"] = str(logdir)
    return result


def to_wandb(run: Run, dest: Path | str) -> ExportResult:
    """Weights & Biases in offline mode: one W&B run per optimizer and seed under `dest`/wandb/offline-run-*/
    (config: the parameters and context; history: the per-step metrics; summary: the summary figures; the
    report and summary attached as files). Nothing is sent: `wandb sync DEST/wandb/offline-run-*` uploads later."""
    if not isinstance(dest, Path):
        raise InputError(f"--dest: wandb offline writes to a folder, not to {dest!r}")
    try:
        import wandb
    except ImportError:
        raise _missing("wandb", "wandb") from None

    attached = attachments(run)  # read (and refused) before the tracker is touched
    for opt, seed, _ in _series(run):  # names from the run folder: refused before any is written
        runfiles.safe_join(dest, run.path.name, opt, seed, what="run, optimizer or seed")
    dest.mkdir(parents=True, exist_ok=True)
    ctx = run_context(run)
    project = runfiles.safe_name(run.summary.run.scenario or run.scenario.get("name") or "distro-bench", "scenario")
    result = ExportResult("wandb", dest)
    # W&B's own folders (settings, cache, artifacts' staging) inside `dest`, not the user's home
    env = {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DIR": str(dest),
           "WANDB_CONFIG_DIR": str(dest / ".config"), "WANDB_CACHE_DIR": str(dest / ".cache"),
           "WANDB_DATA_DIR": str(dest / ".data"), "WANDB_DISABLE_GIT": "true", "WANDB_DISABLE_CODE": "true"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with tempfile.TemporaryDirectory(prefix="distro-bench-export-") as staged:
            files = []
            for rel, data in attached:
                if rel.parent == PurePath("plots"):
                    continue  # plots go in as images, below
                (Path(staged) / rel).write_bytes(data)
                files.append(Path(staged) / rel)
            plots = [(rel, data) for rel, data in attached if rel.parent == PurePath("plots")]
            for opt, seed, rows in _series(run):
                settings = wandb.Settings(mode="offline", silent=True, save_code=False, disable_git=True,
                                          x_disable_stats=True, x_disable_meta=True)
                w = wandb.init(dir=str(dest), project=project, name=f"{run.path.name}/{opt}/{seed}",
                               group=run.path.name, job_type=opt,
                               tags=[f"{k}={ctx[k]}"[:64] for k in TAGGED if k in ctx] + [opt, seed],
                               config={**params_of(run, opt), "seed": seed}, settings=settings, reinit="create_new")
                try:
                    for step, figures in sorted(_by_step(step_metrics(rows)).items()):
                        w.log(figures, step=step)
                    if plots:
                        w.log({f"plots/{rel.stem}": wandb.Image(_png(run.path / rel, data)[..., :3])
                               for rel, data in plots})
                    w.summary.update(summary_metrics(run, opt, seed))
                    for f in files:
                        w.save(str(f), base_path=staged, policy="now")
                    result.runs[f"{opt}/{seed}"] = str(Path(w.dir).parent)
                finally:
                    w.finish(exit_code=0 if run.state == "complete" else 1)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return result


def _by_step(metrics: dict[str, list[tuple[int, float]]]) -> dict[int, dict[str, float]]:
    """metric -> [(step, value)] as step -> {metric: value} (W&B logs one row per step)."""
    out: dict[int, dict[str, float]] = {}
    for name, points in metrics.items():
        for step, v in points:
            out.setdefault(step, {})[name] = v
    return out


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
    "wandb": (to_wandb, "wandb"),
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
