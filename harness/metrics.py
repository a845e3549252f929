"""Per-step records -> a pandas frame -> the per-optimizer summary (the public schema of a run).

Columns of `metrics.parquet` (one row per optimizer, rank, step) are `METRIC_COLUMNS`; the summary keys
are `SUMMARY_KEYS` (DESIGN.md's contract first, then additions). Change either only deliberately.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

METRIC_COLUMNS: dict[str, str] = {
    "optimizer": "string", "rank": "int64", "step": "int64",
    "loss": "float64", "val_loss": "float64", "lr": "float64",
    "step_time_s": "float64", "data_s": "float64", "compute_s": "float64", "stretch_s": "float64",
    "compress_s": "float64", "comm_s": "float64", "apply_s": "float64",
    "wait_s": "float64",  # derived: time this rank was ready before the slowest rank of the step
    "t_start": "float64", "t_ready": "float64",
    "payload_tx_bytes": "int64", "payload_rx_bytes": "int64", "collectives": "int64",
    "ring_bytes": "float64",  # bytes a ring algorithm moves per worker each way for this step's collectives
    "wire_tx_bytes": "Int64", "wire_rx_bytes": "Int64",
    "tokens": "int64", "param_checksum": "string",
}

SUMMARY_KEYS = [
    # DESIGN.md contract
    "steps", "step_time_s_mean", "step_time_s_p50", "compute_s_mean", "comm_s_mean",
    "payload_tx_bytes_per_step", "payload_rx_bytes_per_step",
    "wire_tx_bytes_per_step", "wire_rx_bytes_per_step",
    "final_loss", "final_val_loss", "reduction_vs_baseline",
    # additions
    "reduction_basis", "compress_s_mean", "apply_s_mean", "wait_s_mean", "collectives_per_step",
    "ring_bytes_per_step", "wire_overhead", "first_val_loss", "wall_time_s", "tokens_per_s", "ranks", "replicas_identical",
    "replicas_diverged_at_step", "param_checksum",
]


def read_worker_records(folder: Path) -> tuple[pd.DataFrame, list[dict]]:
    """All step records under `folder` (rank*.jsonl, any depth) and the start/end records.

    A truncated last line (a worker killed mid-write) is skipped, not fatal.
    """
    steps, events = [], []
    for path in sorted(Path(folder).rglob("rank*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            (steps if rec.get("type") == "step" else events).append(rec)
    return records_to_frame(steps), events


def records_to_frame(records: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame.from_records(records)
    for col in METRIC_COLUMNS:
        if col not in df:
            df[col] = None
    df = df[list(METRIC_COLUMNS)]
    df = df.astype({c: t for c, t in METRIC_COLUMNS.items() if c != "wait_s"} | {"wait_s": "float64"})
    if len(df):
        slowest = df.groupby(["optimizer", "step"])["t_ready"].transform("max")
        df["wait_s"] = (slowest - df["t_ready"]).clip(lower=0.0)
    return df.sort_values(["optimizer", "step", "rank"], kind="stable").reset_index(drop=True)


def _none_if_nan(x):
    if x is None:
        return None
    try:
        return None if math.isnan(x) else x
    except TypeError:
        return x


def summarize_optimizer(df: pd.DataFrame, end_checksums: dict[int, str]) -> dict:
    """Summary of one optimizer's rows. Step 0 is left out of times and bytes (warm-up, connection set-up)."""
    steps = int(df["step"].max()) + 1 if len(df) else 0
    steady = df[df["step"] > 0] if steps > 1 else df
    per_step = steady.groupby("step")
    step_time = per_step["step_time_s"].max()  # synchronous training: a step ends with its slowest rank
    tail = df[df["step"] >= steps - max(1, steps // 10)]
    val = df.dropna(subset=["val_loss"]).groupby("step")["val_loss"].mean()
    wire_known = steady["wire_tx_bytes"].notna().all() and len(steady) > 0
    ring = float(steady["ring_bytes"].mean()) if len(steady) else math.nan
    wire_tx = float(steady["wire_tx_bytes"].astype("float64").mean()) if wire_known else None
    wire_rx = float(steady["wire_rx_bytes"].astype("float64").mean()) if wire_known else None
    # Replicas must agree at every evaluation (checksums recorded there) and at the end.
    by_step = df.dropna(subset=["param_checksum"]).groupby("step")["param_checksum"].nunique()
    diverged = by_step[by_step > 1]
    checksums = set(end_checksums.values())
    wall = float(df["t_start"].max() - df["t_start"].min() + step_time.iloc[-1]) if len(df) and len(step_time) else math.nan
    out = {
        "steps": steps,
        "step_time_s_mean": float(step_time.mean()),
        "step_time_s_p50": float(step_time.median()),
        "compute_s_mean": float(steady["compute_s"].mean()),
        "comm_s_mean": float(steady["comm_s"].mean()),
        "payload_tx_bytes_per_step": float(steady["payload_tx_bytes"].mean()),
        "payload_rx_bytes_per_step": float(steady["payload_rx_bytes"].mean()),
        "wire_tx_bytes_per_step": wire_tx,
        "wire_rx_bytes_per_step": wire_rx,
        "final_loss": float(tail["loss"].mean()),
        "final_val_loss": float(val.iloc[-1]) if len(val) else None,
        "reduction_vs_baseline": None,
        "reduction_basis": None,
        "compress_s_mean": float(steady["compress_s"].mean()),
        "apply_s_mean": float(steady["apply_s"].mean()),
        "wait_s_mean": float(steady["wait_s"].mean()),
        "collectives_per_step": float(steady["collectives"].mean()),
        "ring_bytes_per_step": ring,
        # framing and protocol bytes on top of what the ring algorithm must move, both directions
        "wire_overhead": (wire_tx + wire_rx) / (2 * ring) - 1 if wire_known and ring else None,
        "first_val_loss": float(val.iloc[0]) if len(val) else None,
        "wall_time_s": wall,
        "tokens_per_s": float(df["tokens"].sum() / wall) if wall and not math.isnan(wall) else None,
        "ranks": int(df["rank"].nunique()),
        "replicas_identical": (len(checksums) == 1 and diverged.empty) if checksums else (False if len(diverged) else None),
        "replicas_diverged_at_step": int(diverged.index[0]) if len(diverged) else None,
        "param_checksum": next(iter(checksums)) if len(checksums) == 1 else None,
    }
    return {k: _none_if_nan(out[k]) for k in SUMMARY_KEYS}


def summarize(df: pd.DataFrame, events: list[dict], baseline: str) -> dict[str, dict]:
    """Per-optimizer summaries with `reduction_vs_baseline` (wire bytes where every optimizer has them)."""
    out = {}
    for name, rows in df.groupby("optimizer", sort=False):
        ends = {e["rank"]: e["param_checksum"] for e in events if e.get("type") == "end" and e.get("optimizer") == name}
        out[str(name)] = summarize_optimizer(rows, ends)
    if baseline in out:
        wire = all(s["wire_tx_bytes_per_step"] is not None for s in out.values())
        keys = ("wire_tx_bytes_per_step", "wire_rx_bytes_per_step") if wire else ("payload_tx_bytes_per_step", "payload_rx_bytes_per_step")
        base = sum(out[baseline][k] or 0 for k in keys)
        for s in out.values():
            mine = sum(s[k] or 0 for k in keys)
            s["reduction_vs_baseline"] = base / mine if mine else None
            s["reduction_basis"] = "wire" if wire else "payload"
    return out


def summary_frame(summary: dict[str, dict]) -> pd.DataFrame:
    return pd.DataFrame([{"optimizer": k, **v} for k, v in summary.items()], columns=["optimizer", *SUMMARY_KEYS])
