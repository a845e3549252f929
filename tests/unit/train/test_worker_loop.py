"""The worker's training loop, phase by phase, in this process: one worker (world size 1, no process
group), the tiny model, a few steps. Evaluation follows the schedule every rank shares, a stop decision
evaluates the step it stops at, a step that raises leaves no end record, and the records keep their schema."""

from __future__ import annotations

import json
import os

import pytest
import torch

from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.train.liveness import read_heartbeat
from distro_bench.train.loop import TrainLoop
from tests.helpers import tiny_scenario_dict

# The records' keys in the order the worker writes them (AdamW adds no strategy extras): metrics.py and
# the reports read these names, so a change here is a change of the public schema.
STEP_KEYS = ["type", "optimizer", "rank", "step", "seed", "loss", "val_loss", "tune_loss", "lr", "step_time_s",
             "data_s", "compute_s", "stretch_s", "compress_s", "comm_s", "apply_s", "t_start", "t_ready",
             "train_time_s", "payload_tx_bytes", "payload_rx_bytes", "collectives", "ring_bytes", "wire_tx_bytes",
             "wire_rx_bytes", "tokens", "param_checksum", "synced", "members"]
END_KEYS = ["type", "optimizer", "rank", "seed", "time", "steps", "train_time_s", "lr_schedule_steps",
            "lr_warmup_steps", "options", "param_checksum", "final_sync", "final_sync_tx_bytes",
            "final_sync_rx_bytes", "final_sync_collectives", "final_sync_comm_s", "final_sync_ring_bytes",
            "final_sync_wire_tx_bytes", "final_sync_wire_rx_bytes", "max_rss_bytes", "present"]
START_KEYS = ["type", "rank", "node", "device", "compute_scale", "world_size", "time", "params", "profile_tflops",
              "corpus_bytes", "corpus_sha256", "probe_allgather_s", "probe_calls_s", "seed", "budget", "max_grad_norm", "clipped_by",
              "loss_unit", "val_bytes_per_token", "flops_per_token", "flops_basis"]


@pytest.fixture(autouse=True)
def alone(monkeypatch):
    """A worker that trains alone: no torchrun, agent or backend environment, and one thread (as a worker on
    a shared 2-core host gets: two threads there made these steps 30 times slower)."""
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "DISTRO_BENCH_PLACEMENT",
              "DISTRO_BENCH_WIRE_IFACE", "DISTRO_BENCH_COMPUTE_SCALE"):
        monkeypatch.delenv(k, raising=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def make_loop(tmp_path):
    loops: list[TrainLoop] = []

    def make(**train) -> TrainLoop:
        d = tiny_scenario_dict(workers=[{"count": 1, "hardware": "host"}], train={"seed": 0, **train})
        loop = TrainLoop.setup(scenario_from_dict(d), "adamw", tmp_path / "out")
        loops.append(loop)
        return loop

    yield make
    for loop in loops:  # the worker process would exit here: stop the liveness thread, close its file
        loop.heartbeat.close()
        os.close(loop.heartbeat.fd)


def records(loop: TrainLoop) -> list[dict]:
    return [json.loads(line) for line in (loop.out_dir / "rank0.jsonl").read_text().splitlines()]


def spy_evaluate(loop: TrainLoop, monkeypatch) -> list[int]:
    seen: list[int] = []
    real = loop.evaluate

    def evaluate(step, record):
        seen.append(step)
        real(step, record)

    monkeypatch.setattr(loop, "evaluate", evaluate)
    return seen


def test_evaluate_runs_every_eval_every_steps_and_at_the_last(make_loop, monkeypatch):
    loop = make_loop(steps=7, eval_every=3)
    evaluated = spy_evaluate(loop, monkeypatch)
    loop.run()
    assert evaluated == [-1, 2, 5, 6]  # -1: the initial model, before the first step (t = 0)
    recs = records(loop)
    assert [r["type"] for r in recs] == ["start"] + ["step"] * 8 + ["end"]
    steps = [r for r in recs if r["type"] == "step"]
    assert [s["step"] for s in steps if s["val_loss"] is not None] == [-1, 2, 5, 6]
    assert all(s["tune_loss"] is None for s in steps)  # no tuning batches in this scenario
    # AdamW syncs every step: the replicas are compared at each evaluated step, and at the end
    assert [s["step"] for s in steps if s["param_checksum"]] == [-1, 2, 5, 6]
    end = recs[-1]
    assert end["steps"] == 7 and end["param_checksum"] == steps[-1]["param_checksum"]
    assert end["final_sync"] is False and end["final_sync_collectives"] == 0  # AdamW leaves nothing pending
    assert read_heartbeat(loop.out_dir / "rank0.hb")[:2] == (7, "done")


def test_records_keep_their_keys_and_order(make_loop):
    loop = make_loop(steps=2, eval_every=1)
    loop.run()
    start, *steps, end = records(loop)
    assert list(start) == START_KEYS and start["world_size"] == 1 and start["probe_allgather_s"] is None
    assert [list(s) for s in steps] == [STEP_KEYS] * 3  # the evaluation before step 0 too
    assert list(end) == END_KEYS
    assert steps[1]["payload_tx_bytes"] == 4 * start["params"]  # AdamW all-reduces every fp32 gradient
    assert steps[2]["train_time_s"] > steps[1]["train_time_s"] > steps[0]["train_time_s"] == 0


def test_a_stop_decision_off_the_schedule_evaluates_the_step_it_stops_at(make_loop, monkeypatch):
    # A time budget spent before the first decision (step 3): the run stops there, though step 3 is not
    # on the evaluation schedule, and the last step must carry a validation loss.
    loop = make_loop(time_budget="1ms", eval_every=5)
    evaluated = spy_evaluate(loop, monkeypatch)
    loop.run()
    assert evaluated == [-1, 3]
    recs = records(loop)
    decisions = [r for r in recs if r["type"] == "decision"]
    assert [(d["step"], d["stop"], d["total_steps"]) for d in decisions] == [(3, True, 4)]
    steps = [r for r in recs if r["type"] == "step"]
    assert [s["step"] for s in steps] == [-1, 0, 1, 2, 3] and steps[-1]["val_loss"] is not None
    assert recs.index(decisions[0]) == recs.index(steps[-1]) - 1  # the decision is written before its step
    assert recs[-1]["type"] == "end" and recs[-1]["steps"] == 4 and recs[-1]["lr_schedule_steps"] == 4


def test_a_step_that_raises_ends_the_worker_without_an_end_record(make_loop, monkeypatch):
    loop = make_loop(steps=6, eval_every=2)
    real = loop.strategy.step

    def step(i, timer):
        if i == 3:
            raise RuntimeError("connection closed by peer")
        return real(i, timer)

    monkeypatch.setattr(loop.strategy, "step", step)
    with pytest.raises(RuntimeError, match="connection closed by peer"):
        loop.run()
    recs = records(loop)  # every record before the failing step was written and flushed
    assert [r["type"] for r in recs] == ["start", "step", "step", "step", "step"]
    assert [r["step"] for r in recs[1:]] == [-1, 0, 1, 2]
    # no end record: its absence (with the exit status) is how a failed rank reads; the heartbeat says where
    assert read_heartbeat(loop.out_dir / "rank0.hb")[:2] == (3, "communicate")
    assert loop.out is not None and loop.out.closed
