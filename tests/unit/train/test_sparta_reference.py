"""SPARTA against its description (sparse parameter averaging, openreview stFPf3gzq1), written here by hand: two
workers, each a local torch AdamW step per step on its own gradient, then both average the same k = round(p x N)
positions of their flattened parameters (drawn with torch.randint from a generator seeded `seed`), and a full
average at the end. Our strategy runs as two real workers (threads) over an in-process all-reduce. Imports from
harness only the module under test."""

from __future__ import annotations

import math

import pytest
import torch

from distro_bench.train.optim.sparta import SPARTA, PhaseTimer, SPARTAConfig
from tests.pair_workers import grads, initial, train_pair

SHAPES = {"w": (40, 30), "v": (50, 8), "norm": (16,)}
N = sum(math.prod(s) for s in SHAPES.values())
STEPS = 6
CFG = SPARTAConfig(lr=1e-2, fraction=0.01, weight_decay=0.0, max_grad_norm=None)


def _run_product(cfg: SPARTAConfig):
    runs, comms = train_pair(SPARTA, cfg, SHAPES, STEPS, PhaseTimer)
    for run in runs.values():  # never one model between steps; one after finish
        assert all(res.synced is False for res in run.results) and run.end.synced is True
    return {r: (run.trace, run.final) for r, run in runs.items()}, comms


def _run_reference(cfg: SPARTAConfig):
    models = [[torch.nn.Parameter(t.clone()) for t in initial(SHAPES)] for _ in range(2)]
    opts = [torch.optim.AdamW([{"params": [p for p in m if p.ndim >= 2], "weight_decay": cfg.weight_decay},
                               {"params": [p for p in m if p.ndim < 2], "weight_decay": 0.0}],
                              lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps) for m in models]
    gen = torch.Generator().manual_seed(cfg.seed)
    k = max(1, round(cfg.fraction * N))
    traces = [[], []]
    for step in range(STEPS):
        for rank in (0, 1):
            for p, g in zip(models[rank], grads(SHAPES, rank, step)):
                p.grad = g.clone()
            opts[rank].step()
        idx = torch.randint(N, (k,), generator=gen)
        flats = [torch.cat([p.detach().reshape(-1) for p in m]) for m in models]
        mean = (flats[0][idx] + flats[1][idx]) / 2
        for rank in (0, 1):
            flats[rank][idx] = mean
            with torch.no_grad():
                for p, piece in zip(models[rank], flats[rank].split([p.numel() for p in models[rank]])):
                    p.copy_(piece.view_as(p))
            traces[rank].append([p.detach().clone() for p in models[rank]])
    final = [(a.detach() + b.detach()) / 2 for a, b in zip(*models)]
    return traces, final


def test_each_step_averages_the_same_random_positions_as_the_reference():
    out, _ = _run_product(CFG)
    traces, final = _run_reference(CFG)
    for rank in (0, 1):
        for step in range(STEPS):
            for a, b in zip(out[rank][0][step], traces[rank][step]):
                torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
        for a, b in zip(out[rank][1], final):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    # between steps the replicas differ (only 1% agreed), at the end they are one model
    assert not torch.equal(out[0][0][-1][0], out[1][0][-1][0])
    assert all(torch.equal(a, b) for a, b in zip(out[0][1], out[1][1]))


def test_payload_bytes_equal_the_prediction_and_the_closed_form():
    _, comms = _run_product(CFG)
    k = round(0.01 * N)  # 1% of 1616 parameters
    assert k == 16
    for rank in (0, 1):
        per_step = {}
        for at, call in comms[rank].calls:
            per_step.setdefault(at, []).append(call)
        for step in range(STEPS):
            predicted = SPARTA.predict_step(CFG, SHAPES, 2, step, STEPS)
            assert per_step[step] == [(c.kind, c.nbytes) for c in predicted] == [("all_reduce", 4 * k)]
        assert per_step["finish"] == [(c.kind, c.nbytes) for c in SPARTA.predict_finish(CFG, SHAPES, 2, STEPS)]
        assert per_step["finish"] == [("all_reduce", 4 * N)]
    assert SPARTA.predict_payload_bytes(CFG, SHAPES, 2) == (4 * k, 4 * k)


def test_options_are_validated():
    with pytest.raises(ValueError, match="fraction"):
        SPARTAConfig(lr=1e-3, fraction=0)
    with pytest.raises(ValueError, match="fraction"):
        SPARTAConfig(lr=1e-3, fraction=1.5)
    assert SPARTAConfig(lr=1e-3).fraction == 0.001 and SPARTAConfig(lr=1e-3).count(10) == 1
