"""Issue 35, the estimand and the clock: every run evaluates the initial model before its first step (the
curve's point at t = 0), and what an optimizer keeps in flight is drained inside the step the clock pauses
after (evaluation, stop decision), so that wait is training time, not free network time in the pause."""

from __future__ import annotations

import time

import torch

from distro_bench.results import fair, metrics
from distro_bench.run.progress import AcrossRanks
from distro_bench.train.loop import mean_loss
from tests.unit.train import test_worker_loop
from tests.unit.train.test_distro import _params, _set_grads, _strategy, _timer
from tests.unit.train.test_worker_loop import records

# The worker loop's fixtures (one worker alone, one thread; a TrainLoop of the tiny scenario), by name
alone, make_loop = test_worker_loop.alone, test_worker_loop.make_loop

DRAIN_S = 0.5


def test_every_run_starts_with_an_evaluation_at_t0(make_loop):
    loop = make_loop(steps=4, eval_every=2)
    initial = mean_loss(loop.model, loop.data.val, loop.device)  # the model before any step
    loop.run()
    steps = [r for r in records(loop) if r["type"] == "step"]
    first, step0 = steps[0], steps[1]
    assert first["step"] == -1 and step0["step"] == 0
    assert first["val_loss"] == initial and first["train_time_s"] == 0.0
    assert (first["tokens"], first["payload_tx_bytes"], first["step_time_s"], first["loss"]) == (0, 0, 0.0, None)
    assert first["param_checksum"] is not None and first["t_start"] <= step0["t_start"]
    assert step0["train_time_s"] > 0, "the evaluation is outside the clock: step 0 starts it"

    df = metrics.records_to_frame(steps)
    ev = fair.evaluations(fair.curve(df))
    assert (ev["elapsed_s"].iloc[0], ev["steps"].iloc[0], ev["tokens"].iloc[0]) == (0.0, 0, 0)
    assert ev["val_loss"].iloc[0] == initial and len(ev) == 3  # t = 0, then steps 1 and 3
    s = metrics.summarize_optimizer(df, {})
    assert s["steps"] == 4 and s["first_val_loss"] == initial

    seen: list[int] = []

    class Sink:
        def step(self, optimizer, r):
            seen.append(r["step"])

    live = AcrossRanks(Sink(), ranks=1)
    for r in steps:  # the live progress skips it (no training loss, no step time) rather than failing
        live.step("adamw", r)
    assert seen == [0, 1, 2, 3]


def _slow_drain(loop, monkeypatch) -> list[int]:
    """A strategy that keeps `DRAIN_S` of exchange in flight: returns the steps after which it was drained."""
    stepped: list[int] = []
    drained: list[int] = []
    real = loop.strategy.step

    def step(i, timer):
        stepped.append(i)
        return real(i, timer)

    def drain():
        time.sleep(DRAIN_S)
        drained.append(stepped[-1])

    monkeypatch.setattr(loop.strategy, "step", step)
    monkeypatch.setattr(loop.strategy, "drain", drain)
    return drained


def test_in_flight_exchanges_are_drained_before_each_evaluation_and_count_as_training(make_loop, monkeypatch):
    loop = make_loop(steps=7, eval_every=3)
    drained = _slow_drain(loop, monkeypatch)
    loop.run()
    assert drained == [2, 5, 6]  # the steps an evaluation follows, and only those
    steps = {r["step"]: r for r in records(loop) if r["type"] == "step"}
    for i in drained:
        assert steps[i]["step_time_s"] >= DRAIN_S, (i, steps[i]["step_time_s"])
        assert steps[i]["train_time_s"] - steps[i - 1]["train_time_s"] >= DRAIN_S, i
    assert steps[6]["train_time_s"] >= 3 * DRAIN_S, "the waits are training time, not pause"


def test_a_stop_decision_pause_is_drained_too(make_loop, monkeypatch):
    loop = make_loop(time_budget="1ms", eval_every=5)  # decides (and stops) after step 3, off the schedule
    drained = _slow_drain(loop, monkeypatch)
    loop.run()
    assert drained == [3]
    last = [r for r in records(loop) if r["type"] == "step"][-1]
    assert last["step"] == 3 and last["train_time_s"] >= DRAIN_S


class _Spy:
    def __init__(self, pending):
        self.pending, self.waits = pending, 0

    def wait(self):
        self.waits += 1
        return self.pending.wait()


def test_distro_drain_waits_for_the_overlapped_exchange_and_applies_it_a_step_later_as_before():
    params = _params()
    s = _strategy(params, overlap=True)
    _set_grads(params, 0)
    s.step(0, _timer())
    assert s._pending is not None
    spies = [_Spy(p) for p in s._pending[0]]
    s._pending = (spies, s._pending[1])
    before = [p.detach().clone() for p in params]
    s.drain()
    assert all(spy.waits == 1 for spy in spies), "every gather in flight waited for"
    assert all(torch.equal(a, b) for a, b in zip(before, params)), "nothing applied by the drain"
    assert s._pending is not None and s._pending[0] is spies  # still applied by the next step
    _set_grads(params, 1)
    s.step(1, _timer())
    assert not all(torch.equal(a, b) for a, b in zip(before, params)), "step 1 applies step 0's aggregate"



def test_the_evaluation_at_t0_is_no_step_of_the_summary(make_loop):
    """Step -1 carries no time, bytes nor tokens: a one-step run's means are its one step's, and a worker
    present at every step is available 100% of them (not 11/10)."""
    loop = make_loop(steps=1, eval_every=1)
    loop.run()
    steps = [r for r in records(loop) if r["type"] == "step"]
    assert [r["step"] for r in steps] == [-1, 0]
    s = metrics.summarize_optimizer(metrics.records_to_frame(steps), {})
    assert s["steps"] == 1
    assert s["compute_s_mean"] == steps[1]["compute_s"] and s["step_time_s_p50"] == steps[1]["step_time_s"]
    rows = metrics.records_to_frame([dict(r, rank=k) for r in steps for k in (0, 1)])
    churn = metrics.churn_figures(rows, [], world=2, steps=1, train_time_s=1.0)
    assert churn["worker_availability"] == 1.0
