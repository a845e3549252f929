"""SparseLoCo against its equations (arXiv 2508.15706), written here by hand:

    e <- beta * e + Delta;  s = Q(TopK_chunk(e));  e <- e - s;  theta <- theta - alpha * mean_r(s_r)

with TopK over chunks of `chunk` consecutive elements of each flattened tensor. Error feedback must conserve
the pseudo-gradient: what is sent plus what stays behind is exactly what there was. Imports from harness
only the module under test."""

from __future__ import annotations

import math

import pytest
import torch

from harness.optim.sparseloco import (PhaseTimer, SparseLoCo, SparseLoCoConfig, pack_2bit, quantize_2bit,
                                      unpack_2bit)

SHAPES = [(24, 20), (10,), (3, 5, 4)]
CHUNK, TOPK, H = 32, 3, 2


class OneWorker:
    world_size, rank = 1, 0

    def all_gather(self, t):
        return [t]


def _grads(step):
    g = torch.Generator().manual_seed(500 + step)
    return [torch.randn(s, generator=g) for s in SHAPES]


def _initial():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(s, generator=g) for s in SHAPES]


def _product(cfg, steps):
    params = [torch.nn.Parameter(t.clone()) for t in _initial()]
    s = SparseLoCo(cfg, [(f"p{i}", p) for i, p in enumerate(params)], OneWorker(), total_steps=steps)
    return s, params


def _chunked(x: torch.Tensor, chunk: int) -> torch.Tensor:
    flat = x.reshape(-1)
    length = min(chunk, flat.numel())
    pad = (-flat.numel()) % length
    return torch.cat([flat, flat.new_zeros(pad)]).view(-1, length)


def test_error_feedback_conserves_the_pseudo_gradient():
    """sent + residual = beta * (previous residual) + pseudo-gradient, element by element, with 2-bit values."""
    cfg = SparseLoCoConfig(lr=1e-2, inner_steps=H, chunk=CHUNK, topk=TOPK, error_decay=0.9)
    s, params = _product(cfg, 3 * H)
    timer = PhaseTimer(torch.device("cpu"))
    seen = []
    sync = s.sync
    s.sync = lambda pseudo, timer: (seen.append([d.clone() for d in pseudo]), sync(pseudo, timer))[1]
    residual_before = [torch.zeros(a.numel()) for a in s.anchor]
    for step in range(3 * H):
        for p, g in zip(params, _grads(step)):
            p.grad = g
        local_before = [p.detach().clone() for p in params]
        anchor_before = [a.clone() for a in s.anchor]
        s.step(step, timer)
        if (step + 1) % H:
            continue
        pseudo = seen[-1]
        for i, a in enumerate(anchor_before):
            n = a.numel()
            # the pseudo-gradient is the drift from the last sync (one inner step after local_before)
            assert not torch.equal(pseudo[i].reshape(-1), (a - local_before[i]).reshape(-1))
            sent, residual = s.last_sent[i].reshape(-1)[:n], s.error[i].reshape(-1)[:n]
            total = cfg.error_decay * residual_before[i] + pseudo[i].reshape(-1)
            assert 0 < torch.count_nonzero(sent) <= s.last_sent[i].shape[0] * TOPK
            assert len(torch.unique(sent[sent != 0])) <= 4 * len(SHAPES)  # 2-bit: four levels per tensor
            torch.testing.assert_close(sent + residual, total, rtol=0, atol=1e-6)
            # one worker: the shared parameters move by -alpha * what was sent
            torch.testing.assert_close(s.anchor[i].reshape(-1), a.reshape(-1) - cfg.outer_lr * sent, rtol=1e-6, atol=1e-7)
            residual_before[i] = residual.clone()
    assert len(seen) == 3


def test_matches_the_equations_with_fp32_values():
    """Q = identity: the whole update must equal the equations computed here (inner AdamW: torch's)."""
    cfg = SparseLoCoConfig(lr=1e-2, inner_steps=H, chunk=CHUNK, topk=TOPK, error_decay=0.95, outer_lr=0.8,
                           values="fp32", weight_decay=0.0, max_grad_norm=None)
    periods = 3
    s, params = _product(cfg, periods * H)
    timer = PhaseTimer(torch.device("cpu"))
    for step in range(periods * H):
        for p, g in zip(params, _grads(step)):
            p.grad = g.clone()
        s.step(step, timer)

    theta = _initial()
    local = [torch.nn.Parameter(t.clone()) for t in theta]
    inner = torch.optim.AdamW(local, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps, weight_decay=0.0, foreach=True)
    error = [torch.zeros_like(_chunked(t, CHUNK)) for t in theta]
    for t in range(periods):
        for step in range(t * H, (t + 1) * H):
            for p, g in zip(local, _grads(step)):
                p.grad = g.clone()
            inner.step()
        for i, (th, p) in enumerate(zip(theta, local)):
            delta = _chunked(th - p.detach(), CHUNK)
            error[i] = cfg.error_decay * error[i] + delta
            k = min(TOPK, error[i].shape[1])
            idx = error[i].abs().topk(k, dim=1).indices
            sent = torch.zeros_like(error[i]).scatter_(1, idx, error[i].gather(1, idx))
            error[i] = error[i] - sent
            theta[i] = th - cfg.outer_lr * sent.reshape(-1)[: th.numel()].view_as(th)
        with torch.no_grad():
            for p, th in zip(local, theta):
                p.copy_(th)
    for ours, ref in zip(params, theta):
        torch.testing.assert_close(ours.detach(), ref, rtol=1e-5, atol=1e-6)


def test_two_bit_quantiser_has_four_levels_each_the_mean_of_its_bin():
    v = torch.randn(1000, generator=torch.Generator().manual_seed(3))
    codes, table = quantize_2bit(v, 6.0)
    assert codes.min() >= 0 and codes.max() <= 3 and table.numel() == 4
    for j in range(4):
        if (codes == j).any():
            torch.testing.assert_close(table[j], v[codes == j].mean())
    # bins are equal slices of mean +- 6 std: a larger value never gets a lower code
    order = v.argsort()
    assert (codes[order].diff() >= 0).all()
    packed = pack_2bit(codes)
    assert packed.numel() == math.ceil(1000 / 4) and torch.equal(unpack_2bit(packed, 1000), codes)


def test_packet_size_is_two_bits_per_value_plus_indices_and_tables():
    cfg = SparseLoCoConfig(lr=1e-2, chunk=CHUNK, topk=TOPK)
    shapes = {f"p{i}": s for i, s in enumerate(SHAPES)}
    (c,) = SparseLoCo.predict_period(cfg, shapes, 4).collectives
    # (24, 20): 15 chunks of 32; (10,): one chunk of 10; (3, 5, 4): 60 -> 2 chunks of 32 (padded)
    sent = [15 * TOPK, TOPK, 2 * TOPK]
    assert c.kind == "all_gather" and c.nbytes == sum(16 + math.ceil(n / 4) + n for n in sent)  # u8 indices


def test_options_are_validated():
    with pytest.raises(ValueError, match="topk"):
        SparseLoCoConfig(lr=1e-3, chunk=64, topk=65)
