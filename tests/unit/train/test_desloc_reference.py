"""DES-LOC against its equations (arXiv 2505.22549, Algorithm 1 with Adam), written here by hand: two workers, each
m = beta1 m + (1 - beta1) g, v = beta2 v + (1 - beta2) g^2, theta -= lr m_hat / (sqrt(v_hat) + eps) (Adam's bias
correction, as torch's AdamW), and the worker average of theta every Kx steps, of m every Ku, of v every Kv.
Our strategy runs as two real workers (threads) over an in-process all-reduce. Imports from harness only the
module under test."""

from __future__ import annotations

import math

import pytest
import torch

from distro_bench.train.optim.desloc import DESLOC, DESLOCConfig, PhaseTimer
from tests.pair_workers import grads, initial, train_pair

SHAPES = {"w": (6, 5), "norm": (7,)}
N = sum(math.prod(s) for s in SHAPES.values())
STEPS = 13
KX, KU, KV = 2, 3, 4
CFG = DESLOCConfig(lr=1e-2, weight_decay=0.0, max_grad_norm=None, param_period=KX, momentum_period=KU,
                   variance_period=KV)


def _run_product(cfg: DESLOCConfig, steps: int = STEPS):
    runs, comms = train_pair(DESLOC, cfg, SHAPES, steps, PhaseTimer)
    return {r: (run.trace, run.synced, run.end, run.final) for r, run in runs.items()}, comms


def _run_reference(cfg: DESLOCConfig, steps: int = STEPS):
    b1, b2, eps, lr = cfg.beta1, cfg.beta2, cfg.eps, cfg.lr
    theta = [initial(SHAPES) for _ in range(2)]
    m = [[torch.zeros(s) for s in SHAPES.values()] for _ in range(2)]
    v = [[torch.zeros(s) for s in SHAPES.values()] for _ in range(2)]
    traces = [[], []]

    def average(state):
        mean = [(a + b) / 2 for a, b in zip(*state)]
        return [list(mean), list(mean)]

    for step in range(steps):
        t = step + 1
        for r in (0, 1):
            for i, g in enumerate(grads(SHAPES, r, step)):
                m[r][i] = b1 * m[r][i] + (1 - b1) * g
                v[r][i] = b2 * v[r][i] + (1 - b2) * g * g
                m_hat, v_hat = m[r][i] / (1 - b1**t), v[r][i] / (1 - b2**t)
                theta[r][i] = theta[r][i] - lr * m_hat / (v_hat.sqrt() + eps)
        if t % KX == 0:
            theta = average(theta)
        if t % KU == 0:
            m = average(m)
        if t % KV == 0:
            v = average(v)
        for r in (0, 1):
            traces[r].append([x.clone() for x in theta[r]])
    return traces, [(a + b) / 2 for a, b in zip(*theta)]


def test_each_quantity_is_averaged_on_its_own_period_as_the_reference():
    out, _ = _run_product(CFG)
    traces, final = _run_reference(CFG)
    for r in (0, 1):
        for step in range(STEPS):
            for a, b in zip(out[r][0][step], traces[r][step]):
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        for a, b in zip(out[r][3], final):  # 13 steps: one local step pending, averaged in finish
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert out[0][1] == [(s + 1) % KX == 0 for s in range(STEPS)]
    for step in range(STEPS):
        same = all(torch.equal(a, b) for a, b in zip(out[0][0][step], out[1][0][step]))
        assert same == ((step + 1) % KX == 0), step
    assert out[0][2].synced and all(torch.equal(a, b) for a, b in zip(out[0][3], out[1][3]))


def test_moments_are_shared_only_on_their_periods():
    # With the moments never averaged, the run differs from the reference's (which averages them)
    out, _ = _run_product(CFG.model_copy(update={"momentum_period": 1000, "variance_period": 1000}))
    traces, _ = _run_reference(CFG)
    assert not torch.allclose(out[0][0][-1][0], traces[0][-1][0], atol=1e-5)


def test_payload_bytes_equal_the_prediction_and_the_closed_form():
    _, comms = _run_product(CFG)
    for r in (0, 1):
        per_step = {}
        for at, call in comms[r].calls:
            per_step.setdefault(at, []).append(call)
        for step in range(STEPS):
            predicted = [(c.kind, c.nbytes) for c in DESLOC.predict_step(CFG, SHAPES, 2, step, STEPS)]
            t = step + 1
            # one fp32 all-reduce of the whole model per averaged quantity (one bucket at this size)
            expected = [("all_reduce", 4 * N)] * sum(t % k == 0 for k in (KX, KU, KV))
            assert per_step.get(step, []) == predicted == expected, step
        finish = [(c.kind, c.nbytes) for c in DESLOC.predict_finish(CFG, SHAPES, 2, STEPS)]
        assert per_step["finish"] == finish == [("all_reduce", 4 * N)]
    # per step over lcm(2, 3, 4) = 12 steps: 6 + 4 + 3 averages of 4 N bytes each
    assert DESLOC.predict_payload_bytes(CFG, SHAPES, 2) == (13 * 4 * N / 12, 13 * 4 * N / 12)


def test_options_default_to_the_papers_ratios_and_are_validated():
    assert DESLOCConfig(lr=1e-3, param_period=16).periods() == (16, 48, 96)
    with pytest.raises(ValueError, match="param_period"):
        DESLOCConfig(lr=1e-3, param_period=0)
