"""`build_summary`: the one place summary.json is built (issue 35), for the runner's finalize and for a report
on a folder whose harness died before writing it. Per-optimizer figures come from results/metrics.py, the cost
to target from results/cost.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from distro_bench.results.bottleneck import bottlenecks
from distro_bench.results.cost import add_costs
from distro_bench.results.metrics import comparison_target, summarize


def build_summary(df: pd.DataFrame, events: list[dict], *, schema_version: int, run: dict, baseline: str,
                  target_val_loss: float | None = None, target_how: str | None = None,
                  costs: dict | None = None, link_classes: list[str] | None = None,
                  predicted_wire_tx: Mapping[str, float | None] | None = None,
                  predicted_floor_ratio: Mapping[str, float | None] | None = None,
                  link_loads: list[dict] | None = None,
                  predicted_payload: Mapping[str, float | None] | None = None) -> dict:
    """The one builder of `summary.json` (issue 35): the run block as given (scenario, backend, state, budget,
    seeds, times, ...), the target (set in advance, else the post-hoc worst best), every optimizer's figures
    over seeds (`summarize`), each one's floor_ratio as the run's prediction has it (issue 37:
    `predicted_floor_ratio`), and, with the scenario's `costs`, the cost to target (results/cost.py). The
    runner's finalize writes it; a report on a folder whose harness died before writing it builds the same
    from the workers' records (`link_classes` and `predicted_wire_tx` as add_costs takes them). `run` gains `world_size` where the start records tell it and it is absent.
    With `link_loads` (results/bottleneck.py, a scenario with sites) it gains `bottlenecks`: the link that bound
    each optimizer's step. With `predicted_payload` (optimizer -> its predicted tx + rx payload per worker per
    step, None for a method that does not predict its bytes) each optimizer gains `bytes_vs_prediction`."""
    starts = [e for e in events if e.get("type") == "start"]
    target = comparison_target(df, target_val_loss, target_how)
    run = dict(run)
    if run.get("world_size") is None and starts:
        run["world_size"] = max(int(e.get("world_size") or 0) for e in starts) or None
    summary: dict = {"schema_version": schema_version, "run": run, "baseline": baseline, "target": target,
                     "optimizers": summarize(df, events, baseline, target["val_loss"]) if len(df) else {}}
    run.setdefault("mode", "replay" if any(e.get("mode") == "replay" for e in starts) else "train")
    for name, figures in summary["optimizers"].items():  # the encoding's, as the run's prediction.json has it
        figures["floor_ratio"] = (predicted_floor_ratio or {}).get(name)
        figures.update(memory_and_replay(name, events, figures.get("step_time_s_mean")))
        if predicted_payload is not None:
            figures.update(against_prediction(figures, predicted_payload.get(name)))
    summary.update(model_and_loss(starts, summary["optimizers"]))
    if link_loads:
        summary["bottlenecks"] = bottlenecks(summary["optimizers"], link_loads)
    if costs is not None:
        add_costs(summary, costs, [str(e.get("device", "")) for e in starts], link_classes=link_classes,
                  predicted_wire_tx=predicted_wire_tx)
    return summary


def model_and_loss(starts: list[dict], optimizers: dict[str, dict]) -> dict:
    """`model` (parameters, training FLOPs per token and how they are known) and `loss` (its unit; text bytes per
    token and each optimizer's final val loss in bits per byte, where the text is known) from the workers' start
    records; {} for records written before they carried them (docs/run-folder.md)."""
    first = next((e for e in starts if e.get("loss_unit")), None)
    if first is None:
        return {}
    model = {"parameters": first.get("params"), "flops_per_token": first.get("flops_per_token"),
             "flops_basis": first.get("flops_basis")}
    per_token = first.get("val_bytes_per_token")
    bpb = None
    if per_token:
        bpb = {name: (f["final_val_loss"] / math.log(2) / per_token if f.get("final_val_loss") is not None else None)
               for name, f in optimizers.items()}
    return {"model": model, "loss": {"unit": first["loss_unit"], "bytes_per_token": per_token,
                                     "final_val_bits_per_byte": bpb}}


# How close the counted payload must be to the predicted one to "match": a per-step method's is exact; a periodic
# one's steady-state mean depends on where the run's steps fall within its periods, by well under this.
PREDICTION_TOLERANCE = 0.01


def against_prediction(figures: dict, predicted: float | None) -> dict:
    """`payload_predicted_bytes_per_step` and `bytes_vs_prediction`: "not predicted" (the method has no byte
    model: its bytes are counted only), "matches" (counted tx + rx within PREDICTION_TOLERANCE of the
    prediction), or "differs" (flagged: the method's prediction and what it sent disagree)."""
    if predicted is None:
        return {"payload_predicted_bytes_per_step": None, "bytes_vs_prediction": "not predicted"}
    tx, rx = figures.get("payload_tx_bytes_per_step"), figures.get("payload_rx_bytes_per_step")
    if tx is None and rx is None:
        return {"payload_predicted_bytes_per_step": predicted, "bytes_vs_prediction": None}
    counted = (tx or 0) + (rx or 0)
    close = abs(counted - predicted) <= PREDICTION_TOLERANCE * max(predicted, 1.0)
    return {"payload_predicted_bytes_per_step": predicted, "bytes_vs_prediction": "matches" if close else "differs"}


def memory_and_replay(name: str, events: list[dict], step_time_s: float | None) -> dict:
    """`max_rss_bytes`: the largest peak resident memory of any worker of this optimizer (its end records); in a
    replay (issue 34) also `replay`: the compute, codec and fraction its workers replayed (rank 0's start
    record) and `utilisation`, the share of a step that was the profile's compute (INTELLECT-1's figure);
    `replay_fraction`: the fraction of the predicted bytes it replayed (None for a training run)."""
    rss = [int(e["max_rss_bytes"]) for e in events
           if e.get("type") == "end" and e.get("optimizer") == name and e.get("max_rss_bytes")]
    out: dict = {"max_rss_bytes": max(rss) if rss else None, "replay_fraction": None}
    starts = [e for e in events if e.get("type") == "start" and e.get("optimizer") == name and e.get("replay")]
    if starts:
        replay = dict(min(starts, key=lambda e: int(e.get("rank") or 0))["replay"])
        compute = replay.get("compute_s")
        replay["utilisation"] = compute / step_time_s if compute is not None and step_time_s else None
        out["replay"] = replay
        out["replay_fraction"] = replay.get("fraction", 1.0)
    return out


__all__ = ["against_prediction", "build_summary", "memory_and_replay"]
