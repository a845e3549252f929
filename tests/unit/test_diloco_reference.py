"""DiLoCo against its equations (arXiv 2311.08105, Algorithm 1 with OpenDiLoCo's Nesterov outer step), written
here by hand: H inner AdamW steps (torch's AdamW), pseudo-gradient g = mean over workers of (anchor - params),
then b = mu * b + g (b = g the first time), anchor -= lr * (g + mu * b). Imports from harness only the module
under test."""

from __future__ import annotations

import pytest
import torch

from harness.optim.diloco import DiLoCo, DiLoCoConfig, PhaseTimer, decode_int8, encode_int8

SHAPES = [(6, 5), (7,)]
H = 3


class TwoWorkers:
    """A world of two in one process: the other worker's pseudo-gradient is given; collectives add it in."""

    world_size, rank = 2, 0

    def __init__(self):
        self.other: list[torch.Tensor] = []
        self.calls = []

    def all_reduce(self, t):  # fp32 buckets: the other worker's pseudo-gradients, concatenated alike
        t.add_(torch.cat([o.reshape(-1) for o in self.other]).to(t.dtype))
        self.calls.append(("all_reduce", t.numel() * t.element_size()))
        return t

    def all_gather(self, t):
        self.calls.append(("all_gather", t.numel()))
        return [t, encode_int8(self.other)]


def _grads(step: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    return [torch.randn(s, generator=g) for s in SHAPES]


def _other(period: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(2000 + period)
    return [torch.randn(s, generator=g) * 1e-2 for s in SHAPES]


def _initial() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(s, generator=g) for s in SHAPES]


def _run_product(cfg: DiLoCoConfig, periods: int) -> list[torch.Tensor]:
    params = [torch.nn.Parameter(t.clone()) for t in _initial()]
    comm = TwoWorkers()
    s = DiLoCo(cfg, [(f"p{i}", p) for i, p in enumerate(params)], comm, total_steps=H * periods)
    timer = PhaseTimer(torch.device("cpu"))
    for step in range(H * periods):
        for p, g in zip(params, _grads(step)):
            p.grad = g.clone()
        comm.other = _other(step // H)
        result = s.step(step, timer)
        assert result.synced == ((step + 1) % H == 0)
    return [p.detach().clone() for p in params]


def _run_reference(cfg: DiLoCoConfig, periods: int, transport=lambda xs: xs) -> list[torch.Tensor]:
    anchor = _initial()
    local = [torch.nn.Parameter(t.clone()) for t in anchor]
    inner = torch.optim.AdamW(local, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps, weight_decay=0.0,
                              foreach=True)
    lr, mu = cfg.outer_lr, cfg.outer_momentum
    b = None
    for t in range(periods):
        for step in range(t * H, (t + 1) * H):
            for p, g in zip(local, _grads(step)):
                p.grad = g.clone()
            inner.step()
        mine = [a - p.detach() for a, p in zip(anchor, local)]
        g = [(x + y) / 2 for x, y in zip(transport(mine), transport(_other(t)))]
        b = g if b is None else [mu * bi + gi for bi, gi in zip(b, g)]
        anchor = [a - lr * (gi + mu * bi) for a, gi, bi in zip(anchor, g, b)]
        with torch.no_grad():
            for p, a in zip(local, anchor):
                p.copy_(a)
    return anchor


def test_outer_nesterov_step_equals_the_formula():
    cfg = DiLoCoConfig(lr=1e-2, inner_steps=H, weight_decay=0.0, max_grad_norm=None)
    for ours, ref in zip(_run_product(cfg, periods=2), _run_reference(cfg, periods=2)):
        torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-7)


def test_int8_pseudo_gradients_are_averaged_after_quantisation():
    cfg = DiLoCoConfig(lr=1e-2, inner_steps=H, weight_decay=0.0, max_grad_norm=None, pseudo_grad="int8")

    def int8(xs):  # absmax per tensor, 127 levels each side: written from the definition, not the codec
        out = []
        for x in xs:
            scale = x.abs().max() / 127
            out.append(torch.round(x / scale).clamp(-127, 127) * scale)
        return out

    for ours, ref in zip(_run_product(cfg, periods=2), _run_reference(cfg, periods=2, transport=int8)):
        torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)


def test_int8_roundtrip_error_is_within_half_a_step():
    xs = [torch.randn(50, 3), torch.zeros(4), torch.tensor([0.5, -2.0])]
    buf = encode_int8(xs)
    assert buf.dtype == torch.uint8 and buf.numel() == 4 * 3 + 150 + 4 + 2
    for x, y in zip(xs, decode_int8(buf, [x.numel() for x in xs])):
        step = x.abs().max() / 127 if x.abs().max() > 0 else torch.tensor(1.0)
        assert (x.reshape(-1) - y).abs().max() <= step / 2 + 1e-7


def test_options_are_validated():
    with pytest.raises(ValueError, match="outer_lr"):
        DiLoCoConfig(lr=1e-3, outer_lr=0)
    with pytest.raises(ValueError, match="pseudo_grad"):
        DiLoCoConfig(lr=1e-3, pseudo_grad="int4")
    assert (DiLoCoConfig(lr=1e-3).outer_lr, DiLoCoConfig(lr=1e-3).outer_momentum) == (0.7, 0.9)
