"""Chunked, batched 2-D DCT-II (orthonormal) for DisTrO: how a tensor is cut into chunks and transformed.

Chunking. A tensor is first seen as a matrix: 0-D as (1, 1), 1-D as (1, n) (a 1-D DCT on chunks of the
vector), >2-D as (shape[0], prod(shape[1:])). Each of the two dimensions n then gets a chunk length:

- n <= chunk: the whole dimension is one chunk;
- otherwise the largest divisor d of n with d <= chunk, when d >= chunk // 2 (64 -> 64, 384 -> 64,
  96 -> 48): no padding, as the DeMo reference does;
- otherwise (a prime or awkward n, e.g. a 50257-token vocabulary, where the reference's divisor rule would
  give chunks of 1 and compress nothing): ceil(n / chunk) equal chunks of ceil(n / that) each, and the
  dimension is zero-padded up to their total. Padding is at most one element per chunk, always goes
  through the same top-k as everything else, and is cropped away after the inverse transform.

Tensors whose chunks have the same shape form a group. A group's chunks live in one (chunks, cr, cc)
buffer and are transformed by two matmuls with precomputed DCT matrices, whatever the number of tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F


def chunk_length(n: int, chunk: int) -> tuple[int, int]:
    """(chunk length, padded length) for one dimension of length n; see the module docstring."""
    if n <= chunk:
        return n, n
    d = max(i for i in range(1, chunk + 1) if n % i == 0)
    if d >= chunk // 2:
        return d, n
    pieces = math.ceil(n / chunk)
    length = math.ceil(n / pieces)
    return length, pieces * length


def as_matrix_shape(shape: tuple[int, ...]) -> tuple[int, int]:
    """The (rows, cols) a tensor of `shape` is treated as."""
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return 1, shape[0]
    return shape[0], math.prod(shape[1:])


@dataclass(frozen=True)
class TensorLayout:
    """Where one tensor's chunks are: its matrix view, padding, chunk shape and rows in its group buffer."""

    shape: tuple[int, ...]
    rows: int
    cols: int
    padded_rows: int
    padded_cols: int
    chunk: tuple[int, int]
    offset: int  # first chunk of this tensor in its group's buffer

    @property
    def grid(self) -> tuple[int, int]:
        return self.padded_rows // self.chunk[0], self.padded_cols // self.chunk[1]

    @property
    def n_chunks(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def padded(self) -> bool:
        return (self.padded_rows, self.padded_cols) != (self.rows, self.cols)

    def to_chunks(self, t: torch.Tensor, out: torch.Tensor) -> None:
        """Copy tensor `t` (of `shape`) into `out`, a (n_chunks, cr, cc) slice of the group buffer."""
        m = t.reshape(self.rows, self.cols)
        if self.padded:
            m = F.pad(m, (0, self.padded_cols - self.cols, 0, self.padded_rows - self.rows))
        (gr, gc), (cr, cc) = self.grid, self.chunk
        out.view(gr, gc, cr, cc).copy_(m.view(gr, cr, gc, cc).permute(0, 2, 1, 3))

    def from_chunks(self, chunks: torch.Tensor) -> torch.Tensor:
        """The tensor (a view where possible) from its (n_chunks, cr, cc) chunks; padding cropped."""
        (gr, gc), (cr, cc) = self.grid, self.chunk
        m = chunks.view(gr, gc, cr, cc).permute(0, 2, 1, 3).reshape(self.padded_rows, self.padded_cols)
        if self.padded:
            m = m[: self.rows, : self.cols]
        return m.reshape(self.shape)


def layout(shape: tuple[int, ...], chunk: int, offset: int = 0) -> TensorLayout:
    rows, cols = as_matrix_shape(tuple(shape))
    cr, pr = chunk_length(rows, chunk)
    cc, pc = chunk_length(cols, chunk)
    return TensorLayout(tuple(shape), rows, cols, pr, pc, (cr, cc), offset)


@lru_cache(maxsize=64)
def _dct_matrix_cpu(n: int) -> torch.Tensor:
    k = torch.arange(n, dtype=torch.float64)[:, None]
    i = torch.arange(n, dtype=torch.float64)[None, :]
    d = torch.cos(math.pi * (2 * i + 1) * k / (2 * n)) * math.sqrt(2.0 / n)
    d[0] /= math.sqrt(2.0)
    return d.float()


def dct_matrix(n: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The orthonormal DCT-II matrix D (n x n): coefficients = D @ x, and x = D.T @ coefficients."""
    return _dct_matrix_cpu(n).to(device)


class ChunkDCT:
    """Forward and inverse 2-D DCT of a batch of (cr, cc) chunks: two matmuls per direction."""

    def __init__(self, chunk: tuple[int, int], device: torch.device | str = "cpu"):
        cr, cc = chunk
        self.dr = dct_matrix(cr, device) if cr > 1 else None  # a length-1 DCT is the identity
        self.dc = dct_matrix(cc, device)
        self.dc_t = self.dc.t().contiguous()
        self.dr_t = self.dr.t().contiguous() if self.dr is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, cr, cc) -> DCT coefficients (N, cr, cc)."""
        y = torch.matmul(x, self.dc_t)
        return torch.matmul(self.dr, y) if self.dr is not None else y

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        x = torch.matmul(y, self.dc)
        return torch.matmul(self.dr_t, x) if self.dr_t is not None else x
