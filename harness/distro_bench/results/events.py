"""`events.parquet`: every change made to a run's network or hardware while it trained (issue 18).

One row per change, written by the coordinator that applied it (workers have no NET_ADMIN): a link
schedule step, a trace's rate change, an outage starting or ending, a straggler's compute scale.
The columns are a public schema, like metrics.parquet's: add deliberately, never rename.

Times: `time` is the wall clock (epoch seconds, the clock of metrics' `t_start`), so a report joins
events to steps by time; `t_s` is seconds since that (optimizer, seed) run's first step, the clock a
scenario's `at: 30s` is written in; `scheduled_s` is when the change was due on that clock, so
`(t_s - scheduled_s)` is how late it was applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from distro_bench.results.rundir import atomic_write_parquet, read_parquet

EVENTS_FILE = "events.parquet"

EVENT_COLUMNS: dict[str, str] = {
    "optimizer": "string",      # the optimizer whose run it happened in
    "seed": "Int64",            # that run's seed
    "time": "float64",          # epoch seconds when the change took effect (read back)
    "t_s": "float64",           # seconds since this optimizer/seed's first step
    "scheduled_s": "float64",   # when it was due, same clock as t_s (a step trigger: when that step began)
    "step": "Int64",            # rank 0's step when it was applied (null before the first step)
    "node": "string",           # scenario node name; "*" for every node
    "direction": "string",      # "up" | "down" | "both" for links; "" for compute
    "kind": "string",           # "schedule" | "trace" | "outage" | "restore" | "compute"
    "field": "string",          # what changed: rate, delay, jitter, loss, down, compute_scale, ...
    "requested": "string",      # the value asked for, in the scenario's units ("1Mbit", "5%", "0.25")
    "verified": "string",       # the value read back after applying ("" where nothing can be read back)
    "ok": "boolean",            # read-back matched the request
    "until_s": "float64",       # end of a window (an outage's or a straggler's), same clock as t_s; null otherwise
    "detail": "string",         # one line for humans: "node1 up rate 10Mbit -> 1Mbit"
}

# Kinds that mark a plot (a trace changes rate every few hundred ms: those are drawn as a rate line, not marks).
MARKED_KINDS = ("schedule", "outage", "restore", "compute")


def events_frame(rows: Iterable[Mapping]) -> pd.DataFrame:
    """Rows (dicts with EVENT_COLUMNS keys; missing ones null) as a frame with the schema's dtypes."""
    df = pd.DataFrame(list(rows), columns=list(EVENT_COLUMNS))
    return df.astype(EVENT_COLUMNS)


def write_events(run_dir: Path, rows: Iterable[Mapping]) -> Path:
    """Write (replace) RUN/events.parquet atomically."""
    path = Path(run_dir) / EVENTS_FILE
    atomic_write_parquet(path, events_frame(rows))
    return path


def read_events(run_dir: Path) -> pd.DataFrame:
    """RUN/events.parquet, or an empty frame with the schema's columns for a run without changes."""
    df = read_parquet(Path(run_dir), EVENTS_FILE)  # no link followed, regular file, capped (results/runfiles.py)
    if df is None:
        return events_frame([])
    for col, dtype in EVENT_COLUMNS.items():
        if col not in df.columns:
            df[col] = pd.Series([None] * len(df), dtype=dtype)
    return df
