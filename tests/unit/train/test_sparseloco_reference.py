"""SparseLoCo against its equations (arXiv 2508.15706), written here by hand:

    e <- beta * e + Delta;  s = Q(TopK_chunk(e));  e <- e - s;  theta <- theta - alpha * mean_r(s_r)

with TopK over chunks of `chunk` consecutive elements of each flattened tensor. Error feedback must conserve
the pseudo-gradient: what is sent plus what stays behind is exactly what there was. Imports from harness
only the module under test."""

from __future__ import annotations

import math

import pytest
import torch

from distro_bench.train.optim.sparseloco import (
    PhaseTimer,
    SparseLoCo,
    SparseLoCoConfig,
    pack_2bit,
    plan,
    quantize_2bit,
    unpack_2bit,
)

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
            length = error[i].shape[1]  # a short tensor sends the configured density, at least one entry
            k = TOPK if length == CHUNK else max(1, round(TOPK * length / CHUNK))
            idx = error[i].abs().topk(k, dim=1).indices
            sent = torch.zeros_like(error[i]).scatter_(1, idx, error[i].gather(1, idx))
            error[i] = error[i] - sent
            theta[i] = th - cfg.outer_lr * sent.reshape(-1)[: th.numel()].view_as(th)
        with torch.no_grad():
            for p, th in zip(local, theta):
                p.copy_(th)
    for ours, ref in zip(params, theta):
        torch.testing.assert_close(ours.detach(), ref, rtol=1e-5, atol=1e-6)


def _reference_quantize(values: list[float], quant_range: float, bins: int = 4) -> tuple[list[int], list[float]]:
    """templar's TopKCompressor._quantize_values, in plain Python: centre on the mean, scale = range * std
    (unbiased) / bins, code = round(c / scale + bins // 2) clamped, decode = mean of the bin's centred values
    + the mean."""
    n = len(values)
    shift = sum(values) / n
    centred = [x - shift for x in values]
    std = math.sqrt(sum(c * c for c in centred) / (n - 1))
    scale = quant_range * std / bins or 1.0
    codes = [min(max(round(c / scale + bins // 2), 0), bins - 1) for c in centred]  # round: half to even, as torch
    lookup = []
    for j in range(bins):
        members = [c for c, q in zip(centred, codes) if q == j]
        lookup.append(sum(members) / len(members) if members else 0.0)
    return codes, [lookup[q] + shift for q in codes]


def test_two_bit_quantiser_matches_the_reference_and_uses_all_four_levels():
    g = torch.Generator().manual_seed(3)
    # top-k values are the large ones of both signs: a bimodal sample, as a sync sends them
    e = torch.randn(4096, generator=g, dtype=torch.float64)
    v = e[e.abs().topk(600).indices]
    codes, table = quantize_2bit(v, 6.0)
    ref_codes, ref_decoded = _reference_quantize(v.tolist(), 6.0)
    assert codes.tolist() == ref_codes
    torch.testing.assert_close(table[codes], torch.tensor(ref_decoded, dtype=v.dtype), rtol=1e-12, atol=1e-12)
    assert len(set(ref_codes)) >= 3  # bins of 3 std used only 2 levels of such a sample
    for j in set(ref_codes):
        torch.testing.assert_close(table[j], v[codes == j].mean())
    order = v.argsort()
    assert (codes[order].diff() >= 0).all()  # a larger value never gets a lower code
    w = torch.randn(1000, generator=g)
    c, t = quantize_2bit(w, 6.0)
    rc, rd = _reference_quantize(w.tolist(), 6.0)
    assert c.tolist() == rc and len(set(rc)) == 4  # a gaussian sample reaches all four levels
    torch.testing.assert_close(t[c], torch.tensor(rd), rtol=1e-5, atol=1e-6)
    packed = pack_2bit(c)
    assert packed.numel() == math.ceil(1000 / 4) and torch.equal(unpack_2bit(packed, 1000), c)


def test_two_bit_quantiser_of_equal_values_decodes_them_exactly():
    v = torch.full((7,), 0.25)
    codes, table = quantize_2bit(v, 6.0)
    torch.testing.assert_close(table[codes], v)


def test_small_tensors_send_the_configured_fraction():
    """A 128-element norm at 64 of 4096 sent 64 entries (50%); it must send the configured 1.6%."""
    (norm, big, tiny) = plan([128, 3 * 4096, 5], chunk=4096, topk=64)
    assert (norm.chunks, norm.k) == (1, 2)  # 64 * 128 / 4096 = 2
    assert big.sent == 3 * 64
    assert tiny.k == 1  # at least one entry, so every tensor moves
    for s in (norm, big):
        assert s.sent / s.numel == pytest.approx(64 / 4096)


def test_packet_size_is_two_bits_per_value_plus_indices_and_tables():
    cfg = SparseLoCoConfig(lr=1e-2, chunk=CHUNK, topk=TOPK)
    shapes = {f"p{i}": s for i, s in enumerate(SHAPES)}
    (c,) = SparseLoCo.predict_period(cfg, shapes, 4).collectives
    # (24, 20): 15 chunks of 32; (10,): one chunk of 10 sending 3 * 10/32 -> 1; (3, 5, 4): 2 chunks of 32 (padded)
    sent = [15 * TOPK, 1, 2 * TOPK]
    assert c.kind == "all_gather" and c.nbytes == sum(16 + math.ceil(n / 4) + n for n in sent)  # u8 indices


def test_options_are_validated():
    with pytest.raises(ValueError, match="topk"):
        SparseLoCoConfig(lr=1e-3, chunk=64, topk=65)
