"""History across commits (issue 52): every finished run appends its figures to `index.parquet` beside its run
folder, one row per optimizer keyed by run id, git commit, scenario hash and time; `history` reads one figure of
one scenario back in time order and flags a change beyond the noise, as asv does: a point whose 95% interval
over seeds does not overlap the previous point's (same optimizer).

The run id is the run folder's name; the scenario hash identifies the resolved scenario (`scenario_hash`), so
two runs of a scenario file edited in between do not share a series unless asked.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from distro_bench.errors import InputError
from distro_bench.results import runfiles
from distro_bench.results.metrics import SUMMARY_KEYS
from distro_bench.results.rundir import atomic_write_parquet

INDEX = "index.parquet"
KEY_COLUMNS = ["run_id", "git_commit", "scenario", "scenario_hash", "finished", "state", "backend", "optimizer",
               "seeds"]


def scenario_hash(scenario: dict) -> str:
    """The resolved scenario's identity: sha256 of its canonical JSON, 16 hex digits (equal scenarios, equal hash)."""
    return hashlib.sha256(json.dumps(scenario, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def index_rows(run_id: str, summary: dict, scenario: dict, environment: dict) -> list[dict[str, Any]]:
    """One row per optimizer: the keys (KEY_COLUMNS), every numeric summary figure (SUMMARY_KEYS) and its 95%
    interval (`<key>_ci95_lo/_hi`)."""
    run = summary.get("run") or {}
    rows = []
    for name, s in (summary.get("optimizers") or {}).items():
        if not isinstance(s, dict):
            continue
        row: dict[str, Any] = {
            "run_id": run_id, "git_commit": environment.get("git_commit"), "scenario": run.get("scenario"),
            "scenario_hash": scenario_hash(scenario), "finished": run.get("finished") or run.get("started"),
            "state": run.get("state"), "backend": run.get("backend"), "optimizer": name, "seeds": _number(s.get("seeds"))}
        ci = s.get("ci95") or {}
        for key in SUMMARY_KEYS:
            if (x := _number(s.get(key))) is not None:
                row[key] = x
                bounds = ci.get(key) if isinstance(ci, dict) else None
                if isinstance(bounds, list) and len(bounds) == 2:
                    row[f"{key}_ci95_lo"], row[f"{key}_ci95_hi"] = _number(bounds[0]), _number(bounds[1])
        rows.append(row)
    return rows


def append_to_index(run_dir: Path, summary: dict, scenario: dict, environment: dict) -> Path:
    """Append the run's rows to `index.parquet` in the run folder's parent (made on the first run); a row of the
    same run id is replaced (a re-summarised folder). Returns the index's path."""
    path = run_dir.parent / INDEX
    new = pd.DataFrame(index_rows(run_dir.name, summary, scenario, environment))
    if runfiles.is_file(run_dir.parent, INDEX):
        old = read_index(path)
        old = old[old["run_id"] != run_dir.name]
        new = pd.concat([old, new], ignore_index=True) if len(old) else new
    atomic_write_parquet(path, new)
    return path


def read_index(path: Path) -> pd.DataFrame:
    """The index as written (InputError naming it when absent or not an index)."""
    if not runfiles.is_file(path.parent, path.name):
        raise InputError(f"{path}: no index here; every `distro-bench run` writes one beside its run folder "
                         f"(<out>/{INDEX})")
    try:
        df = pd.read_parquet(path)
    except Exception as e:  # pyarrow's errors for a broken file vary
        raise InputError(f"{path}: not a readable index ({type(e).__name__})") from None
    if missing := [c for c in ("run_id", "optimizer", "scenario") if c not in df.columns]:
        raise InputError(f"{path}: not a distro-bench index (no {', '.join(missing)} column)")
    return df


@dataclass(frozen=True)
class Point:
    """One run's figure for one optimizer, in time order; `changed` when its interval does not overlap the
    previous point's (a change beyond the noise), `None` where either has no interval (one seed)."""

    finished: str
    git_commit: str | None
    run_id: str
    optimizer: str
    value: float
    lo: float | None
    hi: float | None
    changed: bool | None


def series(index: pd.DataFrame, figure: str, scenario: str | None = None,
           optimizer: str | None = None) -> list[Point]:
    """The figure over time for each optimizer of one scenario (the only one in the index when not named)."""
    if figure not in SUMMARY_KEYS:
        raise InputError(f"--figure: {figure!r} is not a summary key; one of {', '.join(SUMMARY_KEYS)}")
    names = sorted({str(x) for x in index["scenario"].dropna()})
    if scenario is None and len(names) > 1:
        raise InputError(f"--scenario: the index holds several scenarios ({', '.join(names)}); name one")
    if scenario is not None and scenario not in names:
        raise InputError(f"--scenario: {scenario!r} is not in the index; it holds {', '.join(names) or 'none'}")
    df = index[index["scenario"] == (scenario or (names[0] if names else None))]
    if optimizer is not None:
        df = df[df["optimizer"] == optimizer]
    if figure not in df.columns:
        return []
    df = df.sort_values("finished", kind="stable")
    out: list[Point] = []
    last: dict[str, Point] = {}
    lo_col, hi_col = f"{figure}_ci95_lo", f"{figure}_ci95_hi"
    for _, r in df.iterrows():
        value = _number(r.get(figure))
        if value is None:
            continue
        lo = _number(r.get(lo_col)) if lo_col in df.columns else None
        hi = _number(r.get(hi_col)) if hi_col in df.columns else None
        prev = last.get(r["optimizer"])
        changed = None
        if prev is not None and None not in (lo, hi, prev.lo, prev.hi):
            changed = bool(hi < prev.lo or lo > prev.hi)  # type: ignore[operator]
        p = Point(str(r.get("finished")), None if pd.isna(r.get("git_commit")) else str(r.get("git_commit")),
                  str(r["run_id"]), str(r["optimizer"]), value, lo, hi, changed)
        out.append(p)
        last[p.optimizer] = p
    return out
