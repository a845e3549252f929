"""The run folder: a new folder per run, files written atomically, and loading for report and check.

Layout (DESIGN.md): scenario.yaml, environment.json, metrics.parquet, summary.json, summary.csv,
status.json (complete / incomplete / failed, and why), workers/<optimizer>/rank<R>.jsonl and .log
(workers/<optimizer>/seed<S>/... when the run repeats each optimizer over several seeds),
report.md, report.html, plots/*.png.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import yaml
from pydantic import ValidationError

from distro_bench.errors import InputError, RunFolderWriteError
from distro_bench.results import runfiles
from distro_bench.results.metrics import METRIC_COLUMNS
from distro_bench.results.summary import Summary
from distro_bench.scenario.model import Scenario
from distro_bench.scenario.loading import UniqueKeyLoader

# 2: repeats (`seed` column, workers/<optimizer>/seed<S>/), budgets, `target`, per-optimizer `ci95`, time to
# target and loss at equal time/steps. Version 1 folders load unchanged (one seed, no intervals).
SCHEMA_VERSION = 2


def atomic_write_bytes(path: Path, data: bytes, *, root: Path | None = None) -> None:
    """Write then rename: a reader never sees half a file, a crash never leaves one. Nothing below `root`
    (default: the file's folder) is followed: a link there, or at the file itself, is refused (RunFileError,
    exit 2), never written through (harness/distro_bench/results/runfiles.py). A failed write raises
    RunFolderWriteError ("no space left on device writing <path>"), never a bare OSError."""
    path = Path(path)
    base = Path(root) if root is not None else path.parent
    try:
        rel = path.relative_to(base)
    except ValueError:
        raise ValueError(f"{path} is not inside {base}") from None
    runfiles.write_bytes(base, rel, data)


def atomic_write_text(path: Path, text: str, *, root: Path | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), root=root)


def atomic_write_json(path: Path, obj, *, root: Path | None = None) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n", root=root)


def atomic_write_parquet(path: Path, df: pd.DataFrame, *, root: Path | None = None) -> None:
    buf = io.BytesIO()
    try:
        df.to_parquet(buf, index=False)
    except OSError as e:
        raise RunFolderWriteError.of(e, path) from None
    atomic_write_bytes(path, buf.getvalue(), root=root)


def write_status(run_dir: Path, state: str, reason: str | None) -> None:
    """status.json, atomically; on a full disk (a new file needs a block the old one still holds) it is
    overwritten in place instead, so the folder never keeps saying "running" after the run ended."""
    path = run_dir / "status.json"
    data = (json.dumps({"state": state, "reason": reason}, indent=2) + "\n").encode()
    try:
        atomic_write_bytes(path, data)
    except RunFolderWriteError:
        with open(path, "r+b" if path.exists() else "wb") as f:  # truncating frees the block it rewrites
            f.truncate(0)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


def new_run_dir(out: Path, scenario_name: str) -> Path:
    """results/<scenario>-<YYYYmmdd-HHMMSS>, never an existing folder (a suffix is added instead)."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _bad_out(out, e) from None
    for i in range(1000):
        path = out / (f"{scenario_name}-{stamp}" + (f"-{i + 1}" if i else ""))
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
        except OSError as e:  # /proc, a read-only mount, a folder that is not ours
            raise _bad_out(out, e) from None
    raise InputError(f"--out: cannot create a new run folder under {out}")


def ensure_out_dir(out: Path, what: str = "write its files") -> Path:
    """`out` as a folder that exists (made if need be), or InputError naming it and why: for commands that
    write into --out itself (report, project)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = tempfile.TemporaryFile(dir=out)  # as root, only a write tells a read-only mount or /proc apart
        probe.close()
    except OSError as e:
        raise _bad_out(out, e, what) from None
    return out


REPORT_FILES = ("report.md", "report.html", "plots")


def ensure_report_dir(out: Path) -> Path:
    """The folder a report is written into, made if need be, with no link where the report's files go
    (report.md, report.html, plots/ and anything in it): RunFileError naming it, before anything is written."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _bad_out(out, e, "write the report") from None
    runfiles.refuse_links(out, only=REPORT_FILES)
    return out


def _bad_out(out: Path, e: OSError, what: str = "create a run folder") -> InputError:
    """--out that cannot hold a run folder: an input error naming the path and why, not a bug report."""
    blocker = next((p for p in (out, *out.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        why = f"{blocker} is a file, not a folder"
    else:
        why = (os.strerror(e.errno) if e.errno else str(e)).lower()
    return InputError(f"--out {out}: cannot {what} there ({why}); give a folder you can write to")


@dataclass
class RunData:
    """A loaded run folder, as report and check see it."""

    path: Path
    scenario: dict
    environment: dict
    summary: dict  # {"schema_version", "run": {...}, "baseline", "optimizers": {name: {...}}}
    metrics: pd.DataFrame
    status: dict = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.status.get("state") == "complete"

    @property
    def name(self) -> str:
        return self.path.name


def load_run(path: str | Path) -> RunData:
    """Load a run folder; raises InputError (exit 2) naming the missing, refused or broken file.

    Every file is read through harness/distro_bench/results/runfiles.py (no link followed, regular files only,
    a cap per kind) and validated with the models the run wrote it from: summary.json with the Summary model,
    scenario.yaml with the scenario models. Errors name the file and where, never quote its contents."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"{path}: not a run folder (no such directory)")
    runfiles.refuse_links(path)
    summary = read_summary(path)
    if summary is None:
        raise IncompleteRunFolder(f"{path}: not a complete run folder (summary.json is missing)")
    scenario = read_scenario(path)
    if scenario is None:
        raise IncompleteRunFolder(f"{path}: not a complete run folder (scenario.yaml is missing)")
    metrics = read_parquet(path, METRICS_FILE)
    if metrics is None:
        raise IncompleteRunFolder(f"{path}: not a complete run folder ({METRICS_FILE} is missing)")
    return RunData(path=path, scenario=scenario, environment=read_mapping(path, "environment.json") or {},
                   summary=upgrade_summary(summary), metrics=check_metrics(upgrade_metrics(metrics), path / METRICS_FILE),
                   status=read_status(path) or {"state": "unknown"})


METRICS_FILE = "metrics.parquet"


def predicted_optimizers(run_dir: Path) -> dict:
    """prediction.json's per-optimizer figures; {} where the run has none (a strategy without a byte model)."""
    try:
        pred = runfiles.read_json(run_dir, "prediction.json")
    except FileNotFoundError:
        return {}
    optimizers = pred.get("optimizers") if isinstance(pred, dict) else None
    return optimizers if isinstance(optimizers, dict) else {}


class IncompleteRunFolder(InputError):
    """A run folder without summary.json, scenario.yaml or metrics.parquet (a report rebuilds what it can)."""


def _problem(e, path: Path) -> str:
    """A pydantic error's first problem as `location: message` (the message, not the value it refused)."""
    first = e.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or "(top level)"
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    return f"{path}: {loc}: {first['msg']}{more}"


def read_mapping(run_dir: Path, name: str) -> dict | None:
    """A JSON file of the run folder that holds one mapping, or None when absent."""
    try:
        value = runfiles.read_json(run_dir, name)
    except FileNotFoundError:
        return None
    if not isinstance(value, dict):
        raise runfiles.RunFileError(f"{run_dir / name}: not a JSON mapping; not written by distro-bench")
    return value


def read_summary(run_dir: Path) -> dict | None:
    """summary.json validated with the Summary model (the one `run` writes it from), or None when absent."""
    raw = read_mapping(run_dir, "summary.json")
    if raw is None:
        return None
    p = run_dir / "summary.json"
    if not isinstance(raw.get("optimizers"), dict):
        raise runfiles.RunFileError(f"{p}: not a distro-bench summary (no 'optimizers' mapping)")
    try:
        summary = Summary.model_validate(raw)
    except ValidationError as e:
        raise runfiles.RunFileError(f"not a distro-bench summary: {_problem(e, p)}") from None
    except RecursionError:
        raise runfiles.RunFileError(f"{p}: not a distro-bench summary (nested too deeply)") from None
    if summary.schema_version > SCHEMA_VERSION:
        raise InputError(f"{run_dir}: written by a newer distro-bench (schema {summary.schema_version}); "
                         "upgrade to read it")
    if summary.schema_version < 1:
        raise runfiles.RunFileError(f"{p}: schema_version {summary.schema_version}; 1 to {SCHEMA_VERSION} are "
                                    "known")
    return summary.to_dict()


def read_scenario(run_dir: Path) -> dict | None:
    """scenario.yaml validated with the scenario models (types and bounds: `count: many` or `count: 1e12` are
    refused as `validate` refuses them), as the resolved mapping `run` stored; None when absent. Files the
    scenario names (corpus) are not looked for: the run may come from another host."""
    p = run_dir / "scenario.yaml"
    try:
        text = runfiles.read_text(run_dir, "scenario.yaml")
    except FileNotFoundError:
        return None
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as e:  # its message may quote the line: only where it is
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        raise runfiles.RunFileError(f"{p}: not valid YAML (at {where})") from None
    except RecursionError:
        raise runfiles.RunFileError(f"{p}: not valid YAML (nested too deeply)") from None
    except (ValueError, TypeError, OverflowError) as e:  # a 5000-digit integer, an unhashable key
        raise runfiles.RunFileError(f"{p}: not valid YAML (a value that cannot be read: {type(e).__name__})") from None
    if not isinstance(data, dict):
        raise runfiles.RunFileError(f"{p}: not a scenario (expected a mapping of fields)")
    if _expanded_size(data) > MAX_SCENARIO_NODES:  # YAML aliases: a small file can stand for a huge document
        raise runfiles.RunFileError(f"{p}: more than {MAX_SCENARIO_NODES} values once its aliases are expanded; "
                                    "not a scenario distro-bench writes")
    try:
        # stored: a method whose code is not installed here is read as data (only `run` needs the code)
        s = Scenario.model_validate(data, context={"stored": True})
    except ValidationError as e:
        raise runfiles.RunFileError(f"not a valid scenario: {_problem(e, p)}") from None
    except (RecursionError, ValueError, TypeError) as e:
        raise runfiles.RunFileError(f"{p}: not a valid scenario ({type(e).__name__})") from None
    scenario: dict = s.model_dump(mode="json", exclude_none=True, exclude_unset=True)
    return scenario


MAX_SCENARIO_NODES = 1_000_000


def _expanded_size(obj, memo: dict[int, int] | None = None) -> int:
    """Values in `obj` counting each alias of a shared subtree again (what validating it walks), computed once
    per distinct subtree; stops counting past MAX_SCENARIO_NODES."""
    memo = {} if memo is None else memo
    open_: set[int] = set()  # on the path being counted: met again, the document contains itself
    stack: list[tuple[object, bool]] = [(obj, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in memo:
            continue
        children = (list(node.keys()) + list(node.values()) if isinstance(node, dict)
                    else list(node) if isinstance(node, list) else [])
        if done or not children:
            open_.discard(id(node))
            memo[id(node)] = min(1 + sum(memo.get(id(c), 1) for c in children), MAX_SCENARIO_NODES + 1)
            continue
        if id(node) in open_:
            return MAX_SCENARIO_NODES + 1  # a recursive alias (`&a [*a]`): endless once expanded
        open_.add(id(node))
        stack.append((node, True))
        stack += [(c, False) for c in children if id(c) not in memo]
    return memo[id(obj)]


def read_status(run_dir: Path) -> dict | None:
    """status.json ({"state", "reason"}), or None when absent."""
    status = read_mapping(run_dir, "status.json")
    if status is None:
        return None
    if not isinstance(status.get("state"), (str, type(None))) or not isinstance(status.get("reason"), (str, type(None))):
        raise runfiles.RunFileError(f"{run_dir / 'status.json'}: 'state' and 'reason' must be text or null")
    return status


def read_parquet(run_dir: Path, name: str) -> pd.DataFrame | None:
    """A parquet table of the run folder (capped in bytes and rows), or None when absent."""
    p = run_dir / name
    try:
        data = runfiles.read_bytes(run_dir, name)
    except FileNotFoundError:
        return None
    try:
        f = pq.ParquetFile(pa.BufferReader(data))
        if f.metadata.num_rows > runfiles.MAX_PARQUET_ROWS:
            raise runfiles.RunFileError(f"{p}: {f.metadata.num_rows} rows, above the cap of "
                                        f"{runfiles.MAX_PARQUET_ROWS}; refused")
        df: pd.DataFrame = f.read().to_pandas()
    except runfiles.RunFileError:
        raise
    except (OSError, ValueError, TypeError, KeyError, IndexError, pa.ArrowException) as e:
        raise runfiles.RunFileError(f"{p}: not a readable parquet table ({type(e).__name__})") from None
    return df


def check_metrics(df: pd.DataFrame, path: Path) -> pd.DataFrame:
    """The per-step table with the types `run` writes (metrics.METRIC_COLUMNS): a column of text where numbers
    belong, a value above MAX_MEASURED or a missing counter is a RunFileError naming the file and the column;
    an infinite value reads as missing."""
    # The optimizer and the counters every version wrote are required; a column added since reads as null.
    missing = [c for c, t in METRIC_COLUMNS.items() if c not in df.columns and (t == "int64" or c == "optimizer")]
    if missing:
        raise runfiles.RunFileError(f"{path}: no {', '.join(missing)} column; not written by distro-bench")
    for col, dtype in METRIC_COLUMNS.items():
        if col not in df.columns:
            df[col] = pd.Series([None] * len(df), dtype=dtype, index=df.index)
    for col, dtype in METRIC_COLUMNS.items():
        if col in df.columns and str(df[col].dtype) != dtype:
            try:
                df[col] = df[col].astype(dtype)
            except (ValueError, TypeError, OverflowError):
                raise runfiles.RunFileError(f"{path}: column {col!r} does not hold {dtype} values") from None
        if col in df.columns and dtype == "float64":
            values = df[col].to_numpy()
            if np.isinf(values).any():  # a diverged step's loss: missing, as NaN is (plots cannot scale to inf)
                df[col] = values = np.where(np.isinf(values), np.nan, values)
            bad = np.abs(np.nan_to_num(values)) > MAX_MEASURED
            if bad.any():
                raise runfiles.RunFileError(f"{path}: column {col!r} holds {values[bad][0]!r} (row {int(bad.argmax())});"
                                            f" a measured value is at most {MAX_MEASURED:g} in size")
    return df


# Larger than any loss, second or byte count a run measures; beyond it a figure cannot be drawn or summed.
MAX_MEASURED = 1e100


def upgrade_summary(summary: dict) -> dict:
    """A version 1 summary read as version 2 does: one seed, no intervals, no target (in memory only)."""
    for s in summary.get("optimizers", {}).values():
        if isinstance(s, dict):
            s.setdefault("seeds", 1)
            s.setdefault("ci95", {})
    summary.setdefault("target", None)
    return summary


def upgrade_metrics(df: pd.DataFrame) -> pd.DataFrame:
    """Columns added since version 1 (`seed`, `train_time_s`) filled with nulls, so readers need no branches."""
    if "seed" not in df.columns:
        df["seed"] = pd.array([None] * len(df), dtype="Int64")
    if "train_time_s" not in df.columns:
        df["train_time_s"] = float("nan")
    return df
