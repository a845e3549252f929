"""A straightforward per-tensor DeMo, written the way the reference code is (not part of the product).

Per tensor and step: momentum in the parameter domain, einsum DCT of that tensor's chunks, top-k,
decode of what is sent to subtract it (error feedback), two all-gathers (int64 indices, values),
`scatter_reduce(mean)` over the concatenated workers, einsum inverse DCT, sign. It shares only the
chunk plan (harness.optim.dct.layout) with the product, so the two can be compared update for update
(tests/test_distro.py) and timed against each other (benchmarks/optimizer_overhead.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from harness.optim.dct import dct_matrix, layout


class ReferenceDeMo:
    def __init__(self, params: list[torch.Tensor], comm, *, lr: float, topk: int, chunk: int, decay: float,
                 values: str = "fp32", weight_decay: float = 0.0):
        self.params, self.comm = params, comm
        self.lr, self.topk, self.chunk, self.decay = lr, topk, chunk, decay
        self.values, self.weight_decay = values, weight_decay
        self.delta = [torch.zeros_like(p) for p in params]

    def _encode(self, lay, t: torch.Tensor) -> torch.Tensor:
        m = t.reshape(lay.rows, lay.cols)
        m = F.pad(m, (0, lay.padded_cols - lay.cols, 0, lay.padded_rows - lay.rows))
        (gr, gc), (cr, cc) = lay.grid, lay.chunk
        x = m.reshape(gr, cr, gc, cc).permute(0, 2, 1, 3)
        return torch.einsum("ai,xyij,bj->xyab", dct_matrix(cr), x, dct_matrix(cc))

    def _decode(self, lay, coef: torch.Tensor) -> torch.Tensor:
        x = torch.einsum("ia,xyij,jb->xyab", dct_matrix(lay.chunk[0]), coef, dct_matrix(lay.chunk[1]))
        m = x.permute(0, 2, 1, 3).reshape(lay.padded_rows, lay.padded_cols)[: lay.rows, : lay.cols]
        return m.reshape(lay.shape)

    @torch.no_grad()
    def step(self) -> None:
        for p, delta in zip(self.params, self.delta):
            lay = layout(tuple(p.shape), self.chunk)
            (gr, gc), (cr, cc) = lay.grid, lay.chunk
            if self.weight_decay and p.ndim >= 2:
                p.mul_(1 - self.lr * self.weight_decay)
            delta.mul_(self.decay).add_(p.grad, alpha=self.lr)
            coef = self._encode(lay, delta).reshape(gr * gc, cr * cc)
            k = min(self.topk, cr * cc)
            idx = coef.abs().topk(k, dim=1).indices
            vals = coef.gather(1, idx)
            sent = torch.zeros_like(coef).scatter_(1, idx, vals)
            delta.sub_(self._decode(lay, sent.view(gr, gc, cr, cc)))
            if self.values == "1bit":
                vals = torch.where(vals >= 0, 1.0, -1.0)
            elif self.values == "bf16":
                vals = vals.bfloat16().float()
            all_idx = torch.cat(self.comm.all_gather(idx), dim=1)
            all_vals = torch.cat(self.comm.all_gather(vals), dim=1)
            mean = torch.zeros_like(coef).scatter_reduce(1, all_idx, all_vals, "mean", include_self=False)
            p.add_(self._decode(lay, mean.view(gr, gc, cr, cc)).sign(), alpha=-self.lr)
