"""The run folder: a new folder per run, files written atomically, and loading for report and check.

Layout (DESIGN.md): scenario.yaml, environment.json, metrics.parquet, summary.json, summary.csv,
status.json (complete / incomplete / failed, and why), workers/<optimizer>/rank<R>.jsonl and .log
(workers/<optimizer>/seed<S>/... when the run repeats each optimizer over several seeds),
report.md, report.html, plots/*.png.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pandas as pd
import yaml

from distro_bench.errors import InputError, RunFolderWriteError

# 2: repeats (`seed` column, workers/<optimizer>/seed<S>/), budgets, `target`, per-optimizer `ci95`, time to
# target and loss at equal time/steps. Version 1 folders load unchanged (one seed, no intervals).
SCHEMA_VERSION = 2


def _umask() -> int:
    """The process umask, read without changing it (os.umask sets it too, racing other threads' writes)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _temp_beside(path: Path) -> tuple[int, str]:
    """A temporary file next to `path` with the mode a plainly created file gets (0666 less the umask, so
    0644 usually): mkstemp's 0600 would leave the report of a `sudo` run unreadable to its user."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.fchmod(fd, 0o666 & ~_umask())
    return fd, tmp


@contextmanager
def _replacing(path: Path) -> Iterator[tuple[int, str]]:
    """A temporary file beside `path` (fd, name) that replaces it when the block ends; removed on failure,
    where an OSError becomes RunFolderWriteError ("no space left on device writing <path>")."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _temp_beside(path)
        yield fd, tmp
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and not isinstance(e, RunFolderWriteError):
            raise RunFolderWriteError.of(e, path) from None
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write then rename: a reader never sees half a file, a crash never leaves one. A failed write raises
    RunFolderWriteError ("no space left on device writing <path>"), never a bare OSError."""
    with _replacing(path) as (fd, _tmp), os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def atomic_write_parquet(path: Path, df: pd.DataFrame) -> None:
    with _replacing(path) as (fd, tmp):
        os.close(fd)  # pyarrow opens the file by name
        df.to_parquet(tmp, index=False)


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
    """Load a run folder; raises InputError naming the missing or broken file."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"{path}: not a run folder (no such directory)")

    def read(name: str, parse, required: bool = True):
        p = path / name
        if not p.exists():
            if required:
                raise InputError(f"{path}: not a complete run folder ({name} is missing)")
            return None
        try:
            return parse(p)
        except Exception as e:  # any parse failure is a broken file, reported by name
            raise InputError(f"{p}: cannot be read ({type(e).__name__}: {e})") from None

    summary = read("summary.json", lambda p: json.loads(p.read_text()))
    if not isinstance(summary, dict) or not isinstance(summary.get("optimizers"), dict):
        raise InputError(f"{path / 'summary.json'}: not a distro-bench summary (no 'optimizers' mapping)")
    if summary.get("schema_version", 0) > SCHEMA_VERSION:
        raise InputError(f"{path}: written by a newer distro-bench (schema {summary['schema_version']}); upgrade to read it")
    return RunData(
        path=path,
        scenario=read("scenario.yaml", lambda p: yaml.safe_load(p.read_text())) or {},
        environment=read("environment.json", lambda p: json.loads(p.read_text()), required=False) or {},
        summary=upgrade_summary(summary),
        metrics=upgrade_metrics(read("metrics.parquet", pd.read_parquet)),
        status=read("status.json", lambda p: json.loads(p.read_text()), required=False) or {"state": "unknown"},
    )


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
