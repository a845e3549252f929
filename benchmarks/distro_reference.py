"""DeMo as published, written from its algorithm, for checking DisTrO against (not part of the product).

Source: Peng, Quesnelle, Kingma, "DeMo: Decoupled Momentum Optimization" (arXiv 2411.19870), Algorithm 1,
and its reference optimizer (github.com/bloc97/DeMo, demo.py), read for the details the paper leaves out:
chunk sizes, which tensors are weight-decayed, how the gathered coefficients are combined. Written here
from those equations; it imports nothing from `harness`, so a chunking, weight-decay or aggregation
difference in the product shows up as a failing comparison (tests/unit/train/test_distro_reference.py).

Per parameter tensor p with gradient g, learning rate lr, every step:

    p     <- p * (1 - lr * weight_decay)                 every tensor, vectors too
    delta <- decay * delta + lr * g                      momentum in the parameter domain
    C     =  DCT2(chunks(delta))                         orthonormal DCT-II, per chunk, both axes
    S     =  top-k of |C| per chunk (k = min(topk, chunk size)); q = C on S, 0 elsewhere
    delta <- delta - IDCT2(q)                            error feedback of what is sent
    gather (indices, values) of S from every worker
    Q     =  per coefficient, the mean of the values the workers sent for it (0 where none did)
    p     <- p - lr * sign(IDCT2(Q))

Chunks: a dimension of length n is cut into pieces of length `demo_chunk(n, chunk)`: n when n <= chunk,
else the largest divisor of n that is <= chunk (DeMo's `_get_smaller_split`). A 1-D tensor is chunked
along its one axis with a 1-D DCT; DeMo's reference handles 1-D and 2-D tensors only, and so does this.
Indices are positions within a chunk, row-major, as int64; values fp32 (DeMo's wire format). `values="1bit"`
is this harness's variant: the receiver sees the sign of each value, error feedback stays exact.
"""

from __future__ import annotations

import math

import torch


def demo_chunk(n: int, chunk: int) -> int:
    """Chunk length of a dimension of length n (DeMo: the largest divisor of n not above `chunk`)."""
    if n <= chunk:
        return n
    return max(d for d in range(1, chunk + 1) if n % d == 0)


def dct2_matrix(n: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Orthonormal DCT-II: C[k] = s_k * sum_i x[i] cos(pi (2i + 1) k / 2n), s_0 = sqrt(1/n), s_k = sqrt(2/n);
    built in float64 on the CPU, then float32 on `device` (the same numbers on every device)."""
    i = torch.arange(n, dtype=torch.float64)
    k = i[:, None]
    m = torch.cos(math.pi * (2 * i[None, :] + 1) * k / (2 * n))
    scale = torch.full((n, 1), math.sqrt(2.0 / n), dtype=torch.float64)
    scale[0] = math.sqrt(1.0 / n)
    return (m * scale).float().to(device)


class ReferenceDeMo:
    """One worker's DeMo over `params`; `comm.all_gather(t)` returns every worker's `t` in rank order."""

    def __init__(self, params: list[torch.Tensor], comm, *, lr: float, topk: int, chunk: int, decay: float,
                 values: str = "fp32", weight_decay: float = 0.0):
        if values not in ("fp32", "1bit"):
            raise ValueError(f"values {values!r}: the reference knows fp32 (DeMo) and 1bit")
        for p in params:
            if p.ndim not in (1, 2):
                raise ValueError(f"a {p.ndim}-D tensor: DeMo's reference chunks 1-D and 2-D tensors only")
        self.params, self.comm = params, comm
        self.lr, self.topk, self.chunk, self.decay = lr, topk, chunk, decay
        self.values, self.weight_decay = values, weight_decay
        self.delta = [torch.zeros_like(p) for p in params]
        self.bytes_sent = 0  # int64 indices + fp32 values handed to the gathers, as DeMo's data_transmit

    def _grid(self, p: torch.Tensor) -> tuple[int, int, int, int]:
        rows, cols = (1, p.shape[0]) if p.ndim == 1 else tuple(p.shape)
        return rows, cols, demo_chunk(rows, self.chunk), demo_chunk(cols, self.chunk)

    def _to_coefficients(self, x: torch.Tensor) -> torch.Tensor:
        """(rows, cols) -> (chunks, h*w): every h x w chunk's DCT-II coefficients, flattened row-major."""
        rows, cols, h, w = self._grid(x)
        blocks = x.reshape(rows // h, h, cols // w, w).permute(0, 2, 1, 3)  # (gy, gx, h, w)
        c = dct2_matrix(h, x.device) @ blocks @ dct2_matrix(w, x.device).T
        return c.reshape(-1, h * w)

    def _from_coefficients(self, c: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        rows, cols, h, w = self._grid(like)
        blocks = dct2_matrix(h, c.device).T @ c.reshape(rows // h, cols // w, h, w) @ dct2_matrix(w, c.device)
        return blocks.permute(0, 2, 1, 3).reshape(like.shape)

    @torch.no_grad()
    def step(self) -> None:
        for p, delta in zip(self.params, self.delta):
            if self.weight_decay:
                p.mul_(1 - self.lr * self.weight_decay)
            delta.mul_(self.decay).add_(p.grad, alpha=self.lr)
            coef = self._to_coefficients(delta)
            k = min(self.topk, coef.shape[1])
            idx = coef.abs().topk(k, dim=1).indices
            vals = coef.gather(1, idx)
            delta.sub_(self._from_coefficients(torch.zeros_like(coef).scatter(1, idx, vals), delta))
            if self.values == "1bit":
                vals = torch.where(vals >= 0, 1.0, -1.0)
            self.bytes_sent += idx.numel() * 8 + vals.numel() * 4
            all_idx = torch.cat(self.comm.all_gather(idx), dim=1)
            all_vals = torch.cat(self.comm.all_gather(vals), dim=1)
            total = torch.zeros_like(coef).scatter_add(1, all_idx, all_vals)
            count = torch.zeros_like(coef).scatter_add(1, all_idx, torch.ones_like(all_vals))
            mean = total / count.clamp(min=1)
            p.sub_(self._from_coefficients(mean, p).sign(), alpha=self.lr)
