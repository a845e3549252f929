"""Synthetic run folders with issue 16's keys (seeds, budget, target, intervals; a `seed` metric column),
or without them (an old folder), for the report, plot and sweep tests. Made-up but consistent numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import yaml

from distro_bench.results import metrics
from distro_bench.results.rundir import atomic_write_json, atomic_write_parquet

# summary keys of a run folder written before issue 16 (metrics.summarize may add more: an old folder lacks them)
OLD_KEYS = ["steps", "step_time_s_mean", "step_time_s_p50", "compute_s_mean", "comm_s_mean",
            "payload_tx_bytes_per_step", "payload_rx_bytes_per_step", "wire_tx_bytes_per_step",
            "wire_rx_bytes_per_step", "final_loss", "final_val_loss", "reduction_vs_baseline", "reduction_basis",
            "compress_s_mean", "apply_s_mean", "wait_s_mean", "collectives_per_step", "ring_bytes_per_step",
            "wire_overhead", "first_val_loss", "wall_time_s", "tokens_per_s", "ranks", "replicas_identical",
            "replicas_diverged_at_step", "param_checksum"]

# name -> (payload bytes tx per step, rx per step, final loss, step seconds)
OPTS = {"adamw": (2_000_000, 2_000_000, 2.40, 0.30), "distro": (2_000, 5_000, 2.55, 0.05)}


def make_run(root: Path, name: str = "run", *, scenario: str = "synth", optimizers: dict | None = None,
             seeds: int = 3, steps: int = 20, ranks: int = 2, new_keys: bool = True, lr: dict | None = None,
             network: dict | None = None, starts: dict | None = None) -> Path:
    optimizers = optimizers or OPTS
    run = root / name
    (run / "workers").mkdir(parents=True)
    records, events = [], []
    t = 1_800_000_000.0
    for opt, (tx, rx, final, st) in optimizers.items():
        for seed in range(seeds):
            for step in range(steps):
                loss = final + 3.0 * math.exp(-step / 4) + 0.03 * seed
                for r in range(ranks):
                    records.append({
                        "type": "step", "optimizer": opt, "rank": r, "step": step, "loss": loss + 0.01 * r,
                        "val_loss": loss + 0.05 if step % 5 == 4 or step == steps - 1 else None, "lr": 1e-3,
                        "step_time_s": st, "data_s": 0.0, "compute_s": st / 2, "stretch_s": 0.0, "compress_s": 0.0,
                        "comm_s": st / 2, "apply_s": 0.0, "t_start": t, "t_ready": t + st / 2,
                        "payload_tx_bytes": tx, "payload_rx_bytes": rx, "collectives": 1,
                        "wire_tx_bytes": int(tx * 1.04), "wire_rx_bytes": int(rx * 1.04), "tokens": 512,
                        "param_checksum": None, "seed": seed})
                t += st
            t += 100
        for r in range(ranks):
            events.append({"type": "end", "optimizer": opt, "rank": r, "param_checksum": f"{opt}-sum"})
    df = metrics.records_to_frame(records)
    if new_keys and "seed" not in df.columns:
        # records_to_frame sorts stably by (optimizer, step, rank): the same order as this
        df["seed"] = [r["seed"] for r in sorted(records, key=lambda r: (r["optimizer"], r["step"], r["rank"]))]
    elif not new_keys and "seed" in df.columns:
        df = df.drop(columns="seed")
    baseline = next(iter(optimizers))
    summ = metrics.summarize(df, events, baseline)
    if not new_keys:
        summ = {n: {k: v.get(k) for k in OLD_KEYS} for n, v in summ.items()}
    summary = {"schema_version": 1,
               "run": {"scenario": scenario, "backend": "local", "state": "complete", "reason": None,
                       "started": "2026-11-30T00:00:00+00:00", "world_size": ranks},
               "baseline": baseline, "optimizers": summ}
    if new_keys:
        summary["run"]["budget"] = {"kind": "steps", "value": steps}
        summary["target"] = {"val_loss": 2.8, "how": "the worst optimizer's best val loss"}
        for opt, (_, _, final, st) in optimizers.items():
            s = summ[opt]
            tt = st * (4 + 10 * (final - 2.4))
            s.update({"seeds": seeds, "time_to_target_s": tt, "steps_to_target": tt / st, "tokens_to_target": 512 * tt / st,
                      "val_loss_at_equal_time": final + 0.4, "val_loss_at_equal_steps": final + 0.05})
            s["ci95"] = None if seeds < 2 else {k: [s[k] * 0.95, s[k] * 1.05] for k in
                                                ("time_to_target_s", "val_loss_at_equal_time", "val_loss_at_equal_steps",
                                                 "step_time_s_mean")}
    workers = [{"count": ranks, "hardware": "gaming-pc", "link": "dsl"}]
    scen = {"name": scenario, "workers": workers,
            "links": {"dsl": {"up": "10Mbit", "down": "50Mbit", "delay": "15ms", "jitter": "3ms", "loss": "0.1%"}},
            "hardware": {"gaming-pc": {"device": "auto", "tflops": 80.0, "compute_scale": 1.0}},
            "model": {"preset": "tiny", "dim": 128, "n_layers": 2, "n_heads": 4, "ffn_dim": 384, "vocab_size": 256,
                      "max_seq_len": 512},
            "data": {"corpus": "builtin:pydoc", "seq_len": 64, "batch_size": 8},
            "train": {"steps": steps, "eval_every": 5, "seed": 0},
            "optimizers": {k: {"type": k, "lr": (lr or {}).get(k, 1e-3)} for k in optimizers}, "baseline": baseline}
    (run / "scenario.yaml").write_text(yaml.safe_dump(scen, sort_keys=False))
    net = network if network is not None else {
        "backend": "local", "network_emulated": False,
        "nodes": [{"rank": r, "name": f"node{r}", "address": "127.0.0.1", "applied": None} for r in range(ranks)],
        "not_emulated": [f"node{r}: link not emulated (local backend runs on loopback)" for r in range(ranks)]}
    atomic_write_json(run / "environment.json", {"backend": net.get("backend"), "host": "vm", "network": net})
    for opt in optimizers:
        (run / "workers" / opt).mkdir()
        for r in range(ranks):
            start = {"type": "start", "rank": r, "node": f"node{r}", "device": "cpu", "compute_scale": 1.0,
                     **((starts or {}).get(r, {}))}
            (run / "workers" / opt / f"rank{r}.jsonl").write_text(json.dumps(start) + "\n")
    atomic_write_parquet(run / "metrics.parquet", df)
    atomic_write_json(run / "summary.json", summary)
    atomic_write_json(run / "status.json", {"state": "complete", "reason": None})
    return run
