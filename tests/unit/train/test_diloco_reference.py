"""DiLoCo against its equations (arXiv 2311.08105, Algorithm 1 with OpenDiLoCo's Nesterov outer step), written
here by hand: H inner AdamW steps (torch's AdamW), pseudo-gradient g = mean over workers of (anchor - params),
then b = mu * b + g (b = g the first time), anchor -= lr * (g + mu * b). Imports from harness only the module
under test."""

from __future__ import annotations

import pytest
import torch

from distro_bench.train.optim.diloco import DiLoCo, DiLoCoConfig, PhaseTimer, decode_int8, encode_int8

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


def _rows(name: str, steps: int, ranks: int, tx: int, wire: bool) -> list[dict]:
    return [{"type": "step", "optimizer": name, "rank": r, "step": s, "seed": 0, "loss": 3.0, "val_loss": None,
             "lr": 1e-3, "step_time_s": 0.1, "data_s": 0.0, "compute_s": 0.05, "stretch_s": 0.0, "compress_s": 0.0,
             "comm_s": 0.01, "apply_s": 0.0, "t_start": s * 0.1, "t_ready": s * 0.1 + 0.05, "train_time_s": s * 0.1,
             "payload_tx_bytes": tx, "payload_rx_bytes": tx, "collectives": 1 if tx else 0, "ring_bytes": float(tx),
             "wire_tx_bytes": tx + 40 if wire else None, "wire_rx_bytes": tx + 40 if wire else None, "tokens": 1024,
             "param_checksum": None}
            for s in range(steps) for r in range(ranks)]


@pytest.mark.parametrize("wire", [False, True])
def test_the_final_sync_is_amortised_into_bytes_per_step(wire):
    """H > steps: no step synced, `finish` sent everything. Bytes per step must count that sync, and the
    reduction against the baseline must be a number, not None."""
    from distro_bench.results.metrics import records_to_frame, summarize

    steps, ranks, final = 5, 2, 8000
    records = _rows("adamw", steps, ranks, 4000, wire) + _rows("diloco", steps, ranks, 0, wire)
    events = [{"type": "end", "optimizer": n, "rank": r, "seed": 0, "param_checksum": "x", "final_sync": n == "diloco",
               "final_sync_tx_bytes": final if n == "diloco" else 0, "final_sync_rx_bytes": final if n == "diloco" else 0,
               "final_sync_collectives": 1 if n == "diloco" else 0, "final_sync_ring_bytes": final if n == "diloco" else 0,
               "final_sync_wire_tx_bytes": (final + 400 if n == "diloco" else 0) if wire else None,
               "final_sync_wire_rx_bytes": (final + 400 if n == "diloco" else 0) if wire else None}
              for n in ("adamw", "diloco") for r in range(ranks)]
    s = summarize(records_to_frame(records), events, "adamw")["diloco"]
    rows = ranks * (steps - 1)  # step 0 is left out; the final sync is spread over the steps it closes
    assert s["payload_tx_bytes_per_step"] == pytest.approx(ranks * final / rows)
    assert s["payload_rx_bytes_per_step"] == pytest.approx(ranks * final / rows)
    assert s["collectives_per_step"] == pytest.approx(ranks / rows)
    if wire:
        wire_per_step = 40 + ranks * (final + 400) / rows  # 40 B of keep-alives every step, then the sync
        assert s["wire_tx_bytes_per_step"] == pytest.approx(wire_per_step)
        assert s["reduction_vs_baseline"] == pytest.approx(4040 / wire_per_step)
    else:
        assert s["wire_tx_bytes_per_step"] is None
        assert s["reduction_vs_baseline"] == pytest.approx(4000 / (ranks * final / rows))
