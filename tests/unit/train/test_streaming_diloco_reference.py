"""Streaming DiLoCo against its description (arXiv 2501.18512, Algorithm 1 without overlap: tau = 0), written here by
hand: two workers, each a local torch AdamW step per step; fragment p (blocks i with i mod P = p, the embeddings with
block 0, norm and head with the last block) syncs after steps with (step + 1) mod H = p H / P: g = mean over
workers of (anchor_p - params_p), b_p = mu b_p + g (b_p = g the first time), anchor_p -= lr (g + mu b_p), and the
fragment restarts from anchor_p. Our strategy runs as two real workers (threads) over an in-process all-reduce and
all-gather. Imports from harness only the modules under test (and DiLoCo, which P = 1 must equal)."""

from __future__ import annotations

import math

import pytest
import torch

from distro_bench.train.optim.streaming_diloco import PhaseTimer, StreamingDiLoCo, StreamingDiLoCoConfig
from tests.pair_workers import grads, initial, train_pair

SHAPES = {"tok_embeddings.weight": (9, 4), "layers.0.w": (4, 4), "layers.0.n": (4,), "layers.1.w": (4, 5),
          "layers.2.w": (5, 4), "norm.weight": (4,), "output.weight": (9, 4)}
# P = 2: blocks 0 and 2 (with the embeddings) in fragment 0; block 1 in fragment 1; block 2 is last: norm and head
FRAGMENTS = [["tok_embeddings.weight", "layers.0.w", "layers.0.n", "layers.2.w", "norm.weight", "output.weight"],
             ["layers.1.w"]]
H, STEPS = 4, 11
CFG = StreamingDiLoCoConfig(lr=1e-2, inner_steps=H, fragments=2, weight_decay=0.0, max_grad_norm=None)


def _run_product(cfg, strategy=StreamingDiLoCo, steps: int = STEPS):
    runs, comms = train_pair(strategy, cfg, SHAPES, steps, PhaseTimer)
    return {r: (run.trace, run.synced, run.final) for r, run in runs.items()}, comms


def _int8(x):  # absmax per tensor, 127 levels each side: from the definition, not the codec
    scale = x.abs().max() / 127
    return torch.round(x / scale).clamp(-127, 127) * scale


def _run_reference(cfg: StreamingDiLoCoConfig, steps: int = STEPS):
    names = list(SHAPES)
    models = [[torch.nn.Parameter(t.clone()) for t in initial(SHAPES)] for _ in range(2)]
    opts = [torch.optim.AdamW([{"params": [p for p in m if p.ndim >= 2], "weight_decay": cfg.weight_decay},
                               {"params": [p for p in m if p.ndim < 2], "weight_decay": 0.0}],
                              lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps) for m in models]
    anchor = initial(SHAPES)
    mom: dict[int, torch.Tensor] = {}
    lr, mu = cfg.outer_lr, cfg.outer_momentum
    transport = _int8 if cfg.pseudo_grad == "int8" else (lambda x: x)
    traces = [[], []]
    frags = FRAGMENTS if cfg.fragments == 2 else [names]

    def sync(fragment):
        for name in fragment:
            i = names.index(name)
            g = sum(transport(anchor[i] - m[i].detach()) for m in models) / 2
            mom[i] = g if i not in mom else mu * mom[i] + g
            anchor[i] = anchor[i] - lr * (g + mu * mom[i])
            with torch.no_grad():
                for m in models:
                    m[i].copy_(anchor[i])

    last = {}
    for step in range(steps):
        for r in (0, 1):
            for p, g in zip(models[r], grads(SHAPES, r, step)):
                p.grad = g.clone()
            opts[r].step()
        for f, fragment in enumerate(frags):
            if (step + 1) % H == f * H // len(frags):
                sync(fragment)
                last[f] = step
        for r in (0, 1):
            traces[r].append([p.detach().clone() for p in models[r]])
    for f, fragment in enumerate(frags):
        if last.get(f) != steps - 1:
            sync(fragment)
    return traces, [p.detach().clone() for p in models[0]]


@pytest.mark.parametrize("pseudo_grad, tol", [("fp32", 1e-6), ("int8", 1e-5)])
def test_fragments_sync_on_their_staggered_clock_as_the_reference(pseudo_grad, tol):
    cfg = CFG.model_copy(update={"pseudo_grad": pseudo_grad})
    out, _ = _run_product(cfg)
    traces, final = _run_reference(cfg)
    for r in (0, 1):
        for step in range(STEPS):
            for name, a, b in zip(SHAPES, out[r][0][step], traces[r][step]):
                torch.testing.assert_close(a, b, rtol=tol, atol=tol, msg=f"{name} at step {step}")
        for a, b in zip(out[r][2], final):
            torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    assert not any(out[0][1])  # two fragments: never all synced at once between steps
    assert all(torch.equal(a, b) for a, b in zip(out[0][2], out[1][2]))  # one model after finish


def test_one_fragment_is_diloco():
    from distro_bench.train.optim.diloco import DiLoCo, DiLoCoConfig

    one = CFG.model_copy(update={"fragments": 1})
    ours, _ = _run_product(one)
    diloco, _ = _run_product(DiLoCoConfig(**one.model_dump(exclude={"type", "fragments"})), strategy=DiLoCo)
    for step in range(STEPS):
        assert all(torch.equal(a, b) for a, b in zip(ours[0][0][step], diloco[0][0][step])), step
    assert ours[0][1] == [(s + 1) % H == 0 for s in range(STEPS)]


@pytest.mark.parametrize("pseudo_grad", ["fp32", "int8"])
def test_payload_bytes_equal_the_prediction_and_the_closed_form(pseudo_grad):
    cfg = CFG.model_copy(update={"pseudo_grad": pseudo_grad})
    _, comms = _run_product(cfg)
    sizes = [[math.prod(SHAPES[n]) for n in frag] for frag in FRAGMENTS]
    closed = [("all_reduce", 4 * sum(s)) if pseudo_grad == "fp32" else ("all_gather", 4 * len(s) + sum(s))
              for s in sizes]
    for r in (0, 1):
        per_step = {}
        for at, call in comms[r].calls:
            per_step.setdefault(at, []).append(call)
        for step in range(STEPS):
            predicted = [(c.kind, c.nbytes) for c in StreamingDiLoCo.predict_step(cfg, SHAPES, 2, step, STEPS)]
            # fragment 0 after steps 3, 7 (phase 0), fragment 1 after steps 1, 5, 9 (phase H / 2)
            expected = [closed[f] for f, phase in ((0, 0), (1, 2)) if (step + 1) % H == phase]
            assert per_step.get(step, []) == predicted == expected, step
        finish = [(c.kind, c.nbytes) for c in StreamingDiLoCo.predict_finish(cfg, SHAPES, 2, STEPS)]
        assert per_step["finish"] == finish == closed  # 11 steps: both fragments have local steps pending
    period = StreamingDiLoCo.predict_period(cfg, SHAPES, 2)
    assert period.steps == H and [(c.kind, c.nbytes) for c in period.collectives] == closed


def test_options_are_validated():
    with pytest.raises(ValueError, match="fragments"):
        StreamingDiLoCoConfig(lr=1e-3, inner_steps=4, fragments=5)
    assert [StreamingDiLoCoConfig(lr=1e-3, inner_steps=100, fragments=4).offset(f) for f in range(4)] == [0, 25, 50, 75]
