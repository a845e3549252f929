"""Per-step records -> a pandas frame -> the per-optimizer summary (the public schema of a run).

Columns of `metrics.parquet` (one row per optimizer, rank, step) are `METRIC_COLUMNS`; the summary keys
are `SUMMARY_KEYS` (DESIGN.md's contract first, then additions). Change either only deliberately.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from distro_bench.results import fair, runfiles
from distro_bench.results.figures import BY_KEY, FIGURES, SeedRecords, reduction, reduction_basis
from distro_bench.results.stats import t_interval

METRIC_COLUMNS: dict[str, str] = {
    "optimizer": "string", "rank": "int64", "step": "int64",
    "seed": "Int64",  # the repeat's seed (null in run folders written before repeats)
    "loss": "float64", "val_loss": "float64", "lr": "float64",
    "step_time_s": "float64", "data_s": "float64", "compute_s": "float64", "stretch_s": "float64",
    "compress_s": "float64", "comm_s": "float64", "apply_s": "float64",
    "wait_s": "float64",  # derived: time this rank was ready before the slowest rank of the step
    "t_start": "float64", "t_ready": "float64",
    "train_time_s": "float64",  # training seconds since the first step, evaluations left out (the budget's clock)
    "payload_tx_bytes": "int64", "payload_rx_bytes": "int64", "collectives": "int64",
    "ring_bytes": "float64",  # bytes a ring algorithm moves per worker each way for this step's collectives
    "wire_tx_bytes": "Int64", "wire_rx_bytes": "Int64",
    "tokens": "int64", "param_checksum": "string",
    # issue 27: loss on the held-out tuning split (harness/distro_bench/train/data.py), evaluation steps of runs with
    # data.tune_batches only (a sweep's trials): what `sweep --pick best` selects on, never reported
    "tune_loss": "float64",
    # issue 52: which run and commit each row is from, so frames of several runs combine without adding them by
    # hand (the run folder's name; environment.json's git_commit; null in folders written before)
    "run_id": "string", "git_commit": "string",
}

COST_KEYS = ["egress_bytes_to_target", "egress_usd_to_target", "gpu_hours_to_target", "gpu_usd_to_target",
             "energy_j_to_target"]
CHURN_KEYS = ["churn_leaves", "lost_steps", "worker_availability", "goodput_tokens_per_s", "state_handover_bytes"]
# issue 37: one goodput for every method, in useful model FLOPs (6 x parameters per token that reached the shared
# model: forward and backward of the matrix products; attention's own term is left out), per second of training
GOODPUT_KEYS = ["goodput_model_flops_per_s", "goodput_model_flops_per_s_per_worker", "goodput_of_peak"]
# The summary keys, in summary.json's and summary.csv's order: one row each in results/figures.py (issue 50).
SUMMARY_KEYS = [f.key for f in FIGURES]


def read_worker_records(folder: Path) -> tuple[pd.DataFrame, list[dict]]:
    """All step records under `folder` (rank*.jsonl, any depth) and the start/end records.

    A truncated last line (a worker killed mid-write) is skipped, not fatal.
    """
    steps: list[dict] = []
    events: list[dict] = []
    root, name = Path(folder).parent, Path(folder).name  # read without following links (results/runfiles.py)
    for path in runfiles.iter_files(root, name, "rank*.jsonl"):
        # a line at a time, each line and the count of lines capped (a sparse 1,000 MiB file of NULs is refused
        # naming its limit, not read into memory)
        for line in runfiles.iter_lines(root, path, "rank.jsonl"):
            try:
                rec = json.loads(line)
            except (json.JSONDecodeError, RecursionError, ValueError):
                continue
            if not isinstance(rec, dict):
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
        slowest = df.groupby(["optimizer", "seed", "step"], dropna=False)["t_ready"].transform("max")
        df["wait_s"] = (slowest - df["t_ready"]).clip(lower=0.0)
    return df.sort_values(["optimizer", "seed", "step", "rank"], kind="stable").reset_index(drop=True)


def _framing_ratio(wire_tx, wire_rx, payload_tx, payload_rx) -> float | None:
    """Wire bytes over payload bytes, tx + rx: what framing, headers and the protocol's own messages cost
    on top of what the optimizer handed to its collectives (None without wire counters or payload)."""
    if wire_tx is None or wire_rx is None or not payload_tx or payload_rx is None:
        return None
    return (wire_tx + wire_rx) / (payload_tx + payload_rx)


def _empirical_floor_ratio(ends: list[dict]) -> float | None:
    """Mean over ranks of each one's packet bits over the empirical floor of what it sent (its end record)."""
    ratios = []
    for e in ends:
        try:
            floor = float(e["empirical_index_bits_per_sync"]) + float(e["empirical_value_bits_per_sync"])
            packet = float(e["packet_bits_per_sync"])
        except (KeyError, TypeError, ValueError):
            continue
        if floor > 0 and math.isfinite(floor) and math.isfinite(packet):
            ratios.append(packet / floor)
    return sum(ratios) / len(ratios) if ratios else None


def _none_if_nan(x):
    if x is None:
        return None
    try:
        return None if math.isnan(x) else x
    except TypeError:
        return x


def _per_step(steady: pd.DataFrame, column: str, ends: list[dict], end_key: str) -> float:
    """Mean per worker per step of `column` over the steady rows, with each rank's final sync (its `end`
    record's `end_key`) amortised into it: a periodic method's last sync is bytes like any other sync's."""
    extra = sum(float(e.get(end_key) or 0) for e in ends)
    return (float(steady[column].astype("float64").sum()) + extra) / len(steady) if len(steady) else math.nan


def summarize_optimizer(df: pd.DataFrame, end_checksums: dict[int, str], ends: list[dict] | None = None) -> dict:
    """Summary of one optimizer's rows and its ranks' `end` records. Step 0 is left out of times and bytes
    (warm-up, connection set-up); the final sync after the last step (`finish`) is amortised into the bytes."""
    ends = ends or []
    steps = int(df["step"].max()) + 1 if len(df) else 0
    # step -1 is the evaluation before the first step (train/loop.py initial_evaluation): no step's times or bytes
    steady = df[df["step"] > 0] if steps > 1 else df[df["step"] >= 0]
    per_step = steady.groupby("step")
    # A step's time is its slowest rank's (progress.step_time_of, docs/run-folder.md "Step time"): a
    # synchronous step ends with its slowest rank.
    step_time = per_step["step_time_s"].max()
    # A periodic method's last sync (`finish`, after the last step) is no step's: amortised into the mean like
    # its bytes (the slowest rank's, as a step's), else a run with H above its steps would read no sync time.
    final_sync_s = max((float(e.get("final_sync_comm_s") or 0) for e in ends), default=0.0)
    tail = df[df["step"] >= steps - max(1, steps // 10)]
    val = df.dropna(subset=["val_loss"]).groupby("step")["val_loss"].mean()
    tune = df.dropna(subset=["tune_loss"]).groupby("step")["tune_loss"].mean()
    # Wire bytes of a final sync are known only where the end records counted them (run folders from before
    # 2026-12 did not): then the wire figures leave it out rather than mix bases.
    final_wire = all(e.get("final_sync_wire_tx_bytes") is not None or not e.get("final_sync_tx_bytes")
                     for e in ends)
    wire_known = steady["wire_tx_bytes"].notna().all() and len(steady) > 0
    wire_ends = ends if final_wire else []
    ring = _per_step(steady, "ring_bytes", ends, "final_sync_ring_bytes")  # 0 in old end records, as wire
    wire_tx = _per_step(steady, "wire_tx_bytes", wire_ends, "final_sync_wire_tx_bytes") if wire_known else None
    wire_rx = _per_step(steady, "wire_rx_bytes", wire_ends, "final_sync_wire_rx_bytes") if wire_known else None
    payload_tx = _per_step(steady, "payload_tx_bytes", ends, "final_sync_tx_bytes")
    payload_rx = _per_step(steady, "payload_rx_bytes", ends, "final_sync_rx_bytes")
    # Replicas must agree at every evaluation (checksums recorded there) and at the end.
    by_step = df.dropna(subset=["param_checksum"]).groupby("step")["param_checksum"].nunique()
    diverged = by_step[by_step > 1]
    checksums = set(end_checksums.values())
    wall = float(df["t_start"].max() - df["t_start"].min() + step_time.iloc[-1]) if len(df) and len(step_time) else math.nan
    out = {
        "steps": steps,
        "step_time_s_mean": float((step_time.sum() + final_sync_s) / len(step_time)) if len(step_time) else math.nan,
        "step_time_s_p50": float(step_time.median()),
        "compute_s_mean": float(steady["compute_s"].mean()),
        "comm_s_mean": float(steady["comm_s"].mean()),
        "payload_tx_bytes_per_step": payload_tx,
        "payload_rx_bytes_per_step": payload_rx,
        "wire_tx_bytes_per_step": wire_tx,
        "wire_rx_bytes_per_step": wire_rx,
        "final_loss": float(tail["loss"].mean()),
        "final_val_loss": float(val.iloc[-1]) if len(val) else None,
        "final_tune_loss": float(tune.iloc[-1]) if len(tune) else None,
        "reduction_vs_baseline": None,
        "reduction_basis": None,
        "compress_s_mean": float(steady["compress_s"].mean()),
        "apply_s_mean": float(steady["apply_s"].mean()),
        "wait_s_mean": float(steady["wait_s"].mean()),
        "collectives_per_step": _per_step(steady, "collectives", ends, "final_sync_collectives"),
        "ring_bytes_per_step": ring,
        # framing and protocol bytes on top of what the ring algorithm must move, both directions
        "wire_overhead": (wire_tx + wire_rx) / (2 * ring) - 1 if wire_tx is not None and wire_rx is not None and ring else None,
        "framing_ratio": _framing_ratio(wire_tx, wire_rx, payload_tx, payload_rx),
        "floor_ratio_empirical": _empirical_floor_ratio(ends),
        "first_val_loss": float(val.iloc[0]) if len(val) else None,
        "wall_time_s": wall,
        "tokens_per_s": float(df["tokens"].sum() / wall) if wall and not math.isnan(wall) else None,
        "ranks": int(df["rank"].nunique()),
        "replicas_identical": (len(checksums) == 1 and diverged.empty) if checksums else (False if len(diverged) else None),
        "replicas_diverged_at_step": int(diverged.index[0]) if len(diverged) else None,
        "param_checksum": next(iter(checksums)) if len(checksums) == 1 else None,
    }
    return {k: _none_if_nan(out.get(k)) for k in SUMMARY_KEYS}


def churn_figures(rows: pd.DataFrame, events: list[dict], world: int, steps: int, train_time_s: float | None) -> dict:
    """One seed's churn figures (CHURN_KEYS) from its step rows and its `start` and `churn` records. Goodput is
    the tokens that reached the shared model per training second: every trained step's, less those of the
    local steps a leaver took with it. Without churn the same figures read 0 leaves and full availability.
    `world`: the run's workers."""
    rows = rows[rows["step"] >= 0]  # the evaluation before the first step (step -1) is no trained step
    leaves = [e for e in events if e.get("type") == "churn" and e.get("event") == "leave"]
    lost_tokens = sum(int(e.get("lost_tokens") or 0) for e in leaves)
    tokens = float(rows["tokens"].sum()) - lost_tokens
    return {
        "churn_leaves": len(leaves),
        "lost_steps": sum(int(e.get("lost_steps") or 0) for e in leaves),
        "worker_availability": len(rows) / (world * steps) if world and steps else None,
        "goodput_tokens_per_s": tokens / train_time_s if train_time_s else None,
        "state_handover_bytes": sum(int(e.get("state_bytes") or 0) for e in events
                                    if e.get("type") == "churn" and e.get("event") == "join"),
    }


def goodput_figures(goodput_tokens_per_s: float | None, starts: list[dict], world: int) -> dict:
    """GOODPUT_KEYS from the tokens that reached the shared model per training second and the workers' start
    records (`params`; `device` and `profile_tflops` for the peak). The peak is counted only where every worker
    ran on CUDA under a profile with a TFLOPS figure: an emulated GPU on this CPU has no such peak here."""
    params = next((int(e["params"]) for e in starts if e.get("params")), None)
    if goodput_tokens_per_s is None or params is None or not world:
        return dict.fromkeys(GOODPUT_KEYS)
    flops = 6 * params * goodput_tokens_per_s
    peaks = {e["rank"]: float(e["profile_tflops"]) * 1e12 for e in starts
             if e.get("profile_tflops") and str(e.get("device", "")).startswith("cuda")}
    return {"goodput_model_flops_per_s": flops, "goodput_model_flops_per_s_per_worker": flops / world,
            "goodput_of_peak": flops / sum(peaks.values()) if len(peaks) == world else None}


def _seed_of(e: dict) -> int | None:
    v = e.get("seed")
    return None if v is None else int(v)


def _censored_ends(per_seed: list[dict], lo: float, hi: float) -> tuple[float, float]:
    """The ends of a time-to-target interval over seeds whose crossings are interval-censored: the 95% t lower
    end of the lower bounds and upper end of the upper bounds (where every seed records both)."""
    los = [s.get("time_to_target_lo_s") for s in per_seed]
    his = [s.get("time_to_target_hi_s") for s in per_seed]
    if not all(isinstance(v, (int, float)) for v in (*los, *his)):
        return lo, hi
    iv_lo, iv_hi = t_interval(los), t_interval(his)
    if iv_lo is None or iv_hi is None:
        return lo, hi
    return min(lo, iv_lo.lo), max(hi, iv_hi.hi)


def _aggregate(per_seed: list[dict]) -> dict:
    """One optimizer's summary over its seeds: numeric figures become the mean, with a 95% Student-t
    interval in `ci95` (each key's [lo, hi]; null with one seed); labels are kept where the seeds agree."""
    out: dict = {}
    ci: dict = {}
    n = len(per_seed)
    for k in SUMMARY_KEYS:
        vals = [s.get(k) for s in per_seed]
        how = BY_KEY[k].seeds
        known = [v for v in vals if v is not None]
        if how == "n":
            out[k] = n
        elif how == "all":
            out[k] = (False not in known) if known else None
        elif how == "min":
            out[k] = min(known) if known else None
        elif how == "count":
            out[k] = sum(bool(v) for v in known) if known else None  # how many seeds reached the target
        elif how == "same":
            out[k] = vals[0] if len(set(map(str, vals))) == 1 else None
        else:
            nums = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
            # A figure some seed lacks (the target not reached) has no mean: say not reached, not a biased mean.
            if len(nums) < n or not nums:
                out[k] = None
                ci[k] = None
                continue
            iv = t_interval(nums)
            if iv is None:  # every seed's figure is NaN or inf: no mean either
                out[k] = None
                ci[k] = None
                continue
            m, lo, hi = iv.mean, iv.lo, iv.hi
            if k == "time_to_target_s":  # issue 49: the interval carries each seed's censoring (stats.RestrictedTime)
                lo, hi = _censored_ends(per_seed, lo, hi)
            out[k] = int(nums[0]) if all(v == nums[0] for v in nums) and isinstance(nums[0], int) else m
            within = BY_KEY[k].within  # issue 35: no interval outside what is possible ([0, the run])
            if within is not None:
                ends = [s.get(within[1]) for s in per_seed] if within[1] else []
                top = max((e for e in ends if isinstance(e, (int, float))), default=math.inf)
                lo, hi = max(within[0], lo), min(top, hi)
            ci[k] = [lo, hi] if n >= 2 else None
    out["ci95"] = ci
    return out


def summarize(df: pd.DataFrame, events: list[dict], baseline: str, target: float | None = None) -> dict[str, dict]:
    """Per-optimizer summaries: each seed summarised on its own (with time to `target` and loss at equal
    time and steps, from harness/distro_bench/results/fair.py), then averaged over seeds with 95% intervals; `reduction_vs_baseline`
    pairs each seed with the baseline's same seed (wire bytes where every optimizer has them)."""
    if "seed" not in df.columns:  # a frame from before repeats
        df = df.assign(seed=pd.array([None] * len(df), dtype="Int64"))
    curves = {str(name): {seed: fair.curve(r) for seed, r in fair.split_seeds(rows)}
              for name, rows in df.groupby("optimizer", sort=False)}
    if target is None:
        target = fair.default_target(curves)
    figures = fair.fairness(curves, target)
    # start records name no optimizer; every worker of the run writes one
    starts = [e for e in events if e.get("type") == "start"]
    world = max((int(e.get("world_size") or 0) for e in starts),
                default=int(df["rank"].nunique()) if len(df) else 0)
    per: dict[str, dict[int | None, dict]] = {}
    for name, rows in df.groupby("optimizer", sort=False):
        name = str(name)
        per[name] = {}
        for seed, seed_rows in fair.split_seeds(rows):
            mine = [e for e in events if e.get("optimizer") == name and _seed_of(e) == seed]
            end_records = [e for e in mine if e.get("type") == "end"]
            # a worker away at the end (churn) holds its own parameters: not a replica to compare
            ends = {e["rank"]: e["param_checksum"] for e in end_records if e.get("present", True)}
            s = summarize_optimizer(seed_rows, ends, end_records)
            s["seeds"] = 1
            c = curves[name][seed]
            s["train_time_s"] = fair.end_of(c, "elapsed_s")
            lr_steps = [e.get("lr_schedule_steps") for e in mine if e.get("type") == "end" and e.get("rank") == 0]
            s["lr_schedule_steps"] = lr_steps[0] if lr_steps else None
            s.update({k: v for k, v in figures.get(name, {}).get(seed, {}).items() if k in SUMMARY_KEYS})
            s.update(churn_figures(seed_rows, mine, world, s["steps"], s["train_time_s"]))
            s.update(goodput_figures(s["goodput_tokens_per_s"], starts, world))
            for row in FIGURES:  # figures computed by their own row (results/figures.py), in the table's order
                if row.compute is not None:
                    s[row.key] = _none_if_nan(row.compute(SeedRecords(seed_rows, mine, s)))
            per[name][seed] = s
    if baseline in per:
        base_seeds = per[baseline]
        for p in per.values():
            # one basis per comparison (figures.reduction_basis), so that every seed of it counts alike
            basis = reduction_basis(base_seeds.values(), p.values())
            for seed, s in p.items():
                b = base_seeds.get(seed)
                if b is None:  # a seed the baseline did not run: against the baseline's mean bytes
                    b = {f"{basis}_{d}_bytes_per_step": sum(x[f"{basis}_{d}_bytes_per_step"] or 0
                                                            for x in base_seeds.values()) / len(base_seeds)
                         for d in ("tx", "rx")}
                s["reduction_vs_baseline"] = reduction(b, s, basis)
                s["reduction_basis"] = basis
    out = {}
    for name, p in per.items():
        out[name] = _aggregate([p[seed] for seed in p])
        # each seed's own figures, so `check` can pair candidate and baseline seed by seed
        out[name]["per_seed"] = {("-" if seed is None else str(seed)): {k: v for k, v in s.items() if k != "seeds"}
                                 for seed, s in p.items()}
    return out


def comparison_target(df: pd.DataFrame, explicit: float | None = None, how: str | None = None) -> dict:
    """The top-level `target` of a summary: the loss time-to-target is measured against, and why that one."""
    if explicit is not None:
        return {"val_loss": float(explicit), "how": how or "set in the scenario", "post_hoc": False}
    if not len(df):
        return {"val_loss": None, "how": "no steps recorded"}
    if "seed" not in df.columns:
        df = df.assign(seed=pd.array([None] * len(df), dtype="Int64"))
    curves = {str(name): {seed: fair.curve(r) for seed, r in fair.split_seeds(rows)}
              for name, rows in df.groupby("optimizer", sort=False)}
    t = fair.default_target(curves)
    # Chosen after seeing the data (issue 35): times to it describe the run; no speed-up is tested on it.
    return {"val_loss": t, "how": "the worst optimizer's best validation loss (the highest best of any optimizer "
                                  "and seed, so every run reaches it): post-hoc, descriptive"
            if t is not None else "no validation loss recorded", "post_hoc": t is not None}


def summary_frame(summary: dict[str, dict], run_id: str | None = None, git_commit: str | None = None) -> pd.DataFrame:
    """summary.csv: one row per optimizer, with the run id and git commit (issue 52); each figure's interval
    flattened into `<key>_ci95_lo/_hi`."""
    rows, ci_cols = [], []
    for name, v in summary.items():
        row = {"optimizer": name, "run_id": run_id, "git_commit": git_commit, **{k: v.get(k) for k in SUMMARY_KEYS}}
        for k, bounds in (v.get("ci95") or {}).items():
            for side, x in zip(("lo", "hi"), bounds or (None, None)):
                col = f"{k}_ci95_{side}"
                row[col] = x
                if col not in ci_cols:
                    ci_cols.append(col)
        rows.append(row)
    return pd.DataFrame(rows, columns=["optimizer", "run_id", "git_commit", *SUMMARY_KEYS, *ci_cols])
