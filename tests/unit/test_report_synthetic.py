"""Synthetic run folders (fast, no training) for the report and check tests, and tests of the numbers behind plots."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from harness import metrics
from harness.rundir import atomic_write_json, atomic_write_parquet

ENV = {"harness_version": "0.1.0", "git_commit": "a" * 40, "git_dirty": False, "python": "3.11.7",
       "torch": "2.13.0+cpu", "host": "vm", "kernel": "6.18", "backend": "netns"}

# name -> (payload bytes tx per step, rx per step, final loss, compute seconds)
DEFAULT_OPTS = {"adamw": (2_000_000, 2_000_000, 2.40, 0.10), "distro": (1_000, 3_000, 2.55, 0.10)}


def make_run(root: Path, name: str = "synth", *, scenario: str = "synth", optimizers: dict | None = None,
             ranks: int = 4, steps: int = 20, straggler: int | None = None, wire: bool = True,
             state: str = "complete", reason: str | None = None, env: dict | None = None,
             checks: dict | None = None, diverge: str | None = None, link: dict | None = None,
             step_time_noise: float = 0.002, noise_seed: int = 0) -> Path:
    """A run folder as the runner writes it, from made-up but consistent per-step records."""
    optimizers = optimizers or DEFAULT_OPTS
    run = root / name
    run.mkdir(parents=True)
    records, events = [], []
    t0 = 1_800_000_000.0
    for oi, (opt, (tx, rx, final, compute)) in enumerate(optimizers.items()):
        t = t0 + 1000 * oi
        for step in range(steps):
            loss = final + 3.0 * math.exp(-step / 4)
            comps = [compute * (3.0 if r == straggler else 1.0) + 0.001 * ((step * 7 + r) % 3) for r in range(ranks)]
            ready = [t + c for c in comps]
            comm_end = max(ready) + 0.01 + (tx + rx) / 1e8
            for r in range(ranks):
                st = comm_end + 0.005 - t + step_time_noise * ((step * 3 + noise_seed) % 5 + r % 2)
                records.append({
                    "type": "step", "optimizer": opt, "rank": r, "step": step, "loss": loss + 0.01 * r,
                    "val_loss": loss + 0.05 if step % 5 == 4 or step == steps - 1 else None, "lr": 1e-3,
                    "step_time_s": st, "data_s": 0.001, "compute_s": comps[r] - 0.001, "stretch_s": 0.0,
                    "compress_s": 0.002 if opt != "adamw" else 0.0, "comm_s": comm_end - ready[r],
                    "apply_s": 0.003, "t_start": t, "t_ready": ready[r],
                    "payload_tx_bytes": tx, "payload_rx_bytes": rx, "collectives": 2,
                    "wire_tx_bytes": int(tx * 1.04) if wire else None, "wire_rx_bytes": int(rx * 1.04) if wire else None,
                    "tokens": 512, "param_checksum": None,
                })
            t += max(r["step_time_s"] for r in records[-ranks:])
        for r in range(ranks):
            events.append({"type": "end", "optimizer": opt, "rank": r,
                           "param_checksum": f"{opt}-sum" + (str(r) if opt == diverge else "")})
    df = metrics.records_to_frame(records)
    baseline = next(iter(optimizers))
    summary = {"schema_version": 1,
               "run": {"scenario": scenario, "backend": "netns", "state": state, "reason": reason,
                       "started": "2026-11-30T00:00:00+00:00", "finished": "2026-11-30T00:01:00+00:00",
                       "world_size": ranks},
               "baseline": baseline, "optimizers": metrics.summarize(df, events, baseline)}
    scen = {"name": scenario, "description": "synthetic", "workers": [{"count": ranks, "hardware": "host", "link": "dsl"}],
            "links": {"dsl": link or {"up": "10Mbit", "down": "50Mbit", "delay": "15ms", "jitter": "3ms", "loss": "0.1%"}},
            "hardware": {"host": {"device": "cpu", "compute_scale": 1.0}},
            "model": {"preset": "tiny", "dim": 128, "n_layers": 2, "n_heads": 4, "ffn_dim": 384, "vocab_size": 256,
                      "max_seq_len": 512},
            "data": {"corpus": "builtin:pydoc", "seq_len": 64, "batch_size": 8},
            "train": {"steps": steps, "eval_every": 5, "seed": 0},
            "optimizers": {k: {"type": k, "lr": 1e-3} for k in optimizers}, "baseline": baseline,
            "checks": checks if checks is not None else {"min_reduction": 100, "max_loss_gap": 0.3}}
    (run / "scenario.yaml").write_text(yaml.safe_dump(scen, sort_keys=False))
    network = {"backend": "netns", "network_emulated": True,
               "nodes": [{"rank": r, "name": f"node{r}", "address": f"10.0.0.{r + 2}", "applied": {"up": "tbf 10Mbit"}}
                         for r in range(ranks)],
               "not_emulated": ["delay, jitter, loss: no netem in this kernel"]}
    atomic_write_json(run / "environment.json", {**ENV, **(env or {}), "network": network})
    atomic_write_parquet(run / "metrics.parquet", df)
    atomic_write_json(run / "summary.json", summary)
    atomic_write_json(run / "status.json", {"state": state, "reason": reason})
    return run


@pytest.fixture
def synth_run(tmp_path):
    return make_run(tmp_path)


def test_fixture_is_a_loadable_run_with_a_reduction(synth_run):
    from harness.report.load import load_for_report

    run = load_for_report(synth_run)
    assert run.state == "complete" and run.optimizers == ["adamw", "distro"]
    red = run.data.summary["optimizers"]["distro"]["reduction_vs_baseline"]
    assert red == pytest.approx(1000, rel=0.01)


def test_breakdown_adds_up_to_the_step_time(synth_run):
    from harness.report import analysis
    from harness.report.load import load_for_report

    df = load_for_report(synth_run).data.metrics
    adamw = df[df["optimizer"] == "adamw"]
    parts = analysis.breakdown(adamw)
    assert sum(parts.values()) == pytest.approx(analysis.steady(adamw)["step_time_s"].mean(), rel=1e-6)
    assert all(v >= 0 for v in parts.values())


def test_per_rank_breakdown_shows_the_straggler(tmp_path):
    from harness.report import analysis
    from harness.report.load import load_for_report

    df = load_for_report(make_run(tmp_path, straggler=2)).data.metrics
    t = analysis.rank_breakdown(df[df["optimizer"] == "adamw"])
    assert int(t["compute"].idxmax()) == 2
    assert int(t["wait for slowest"].idxmin()) == 2  # everyone else waits for it
    assert t["wait for slowest"].drop(index=2).min() > 0.1


def test_time_to_target_uses_the_worst_final_val_loss(synth_run):
    from harness.report import analysis
    from harness.report.load import load_for_report

    run = load_for_report(synth_run)
    frames = {n: analysis.per_step(run.data.metrics[run.data.metrics["optimizer"] == n]) for n in run.optimizers}
    result = analysis.time_to_target(frames)
    worst = max(run.data.summary["optimizers"][n]["final_val_loss"] for n in run.optimizers)
    assert result.target == pytest.approx(worst)
    assert result.basis == "validation loss" and "distro" in result.explanation
    assert all(v is not None for v in result.reached.values())
    # adamw ends lower, so it reaches distro's final loss no later than its own last evaluation.
    assert result.reached["adamw"][1] < result.reached["distro"][1]


def test_crashed_run_without_summary_is_rebuilt_from_worker_records(tmp_path):
    """A harness killed before finalize leaves only scenario.yaml and workers/*.jsonl (status 'running')."""
    from harness.report.load import load_for_report

    run = tmp_path / "crashed"
    (run / "workers" / "adamw").mkdir(parents=True)
    (run / "scenario.yaml").write_text(yaml.safe_dump({"name": "crashed", "baseline": "adamw",
                                                       "optimizers": {"adamw": {}}, "workers": [{"count": 2}]}))
    atomic_write_json(run / "status.json", {"state": "running", "reason": None})
    for r in range(2):
        lines = [json.dumps({"type": "step", "optimizer": "adamw", "rank": r, "step": s, "loss": 3.0 - s / 10,
                             "step_time_s": 0.1, "compute_s": 0.05, "comm_s": 0.04, "t_start": 100.0 + s / 10,
                             "t_ready": 100.05 + s / 10, "payload_tx_bytes": 10, "payload_rx_bytes": 10,
                             "collectives": 1, "tokens": 8, "data_s": 0.0, "stretch_s": 0.0, "compress_s": 0.0,
                             "apply_s": 0.01, "lr": 0.001}) for s in range(3)]
        (run / "workers" / "adamw" / f"rank{r}.jsonl").write_text("\n".join(lines) + "\n{\"type\": \"st")
    loaded = load_for_report(run)
    assert loaded.state == "running" and "did not finish" in loaded.state_note()
    assert loaded.notes and "rebuilt" in loaded.notes[0]
    assert len(loaded.data.metrics) == 6
    assert not (run / "summary.json").exists()  # reports never write into a run's data files
