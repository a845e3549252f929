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

Layout. A tensor's coefficients form its padded matrix: chunk (i, j)'s coefficient (r, c) lies where that
chunk's element (r, c) lies, at row i * cr + r, column j * cc + c. Chunks are numbered row-major over the
grid, and a coefficient's index within its chunk (what travels) is r * cc + c. Tensors whose chunks have
the same shape form a group, whose buffer holds its tensors' coefficient matrices one after another.
In this layout both passes of the separable transform read and write contiguous memory: the row pass is
one batched GEMM over the matrix's bands of grid_c chunks, each (cr, cols), the column pass one GEMM over
the matrix seen as (rows * grid_c, cc). The same passes into the chunk-interleaved layout of an earlier
version ((cr, chunks, cc): row r of every chunk of the group, then row r + 1), whose row pass wrote 64
short runs per band at a stride of the whole group, took 1.4 ms longer a step at `small` with gradients
and momentum out of cache (4.0 against 5.5 ms for the row pass). Batched 64x64 products through bmm ran
2.4x slower than either. Work buffers are kept, not allocated per step: fresh multi-MB allocations page-fault on every call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F

from distro_bench.train.optim.buffers import kept_zeros


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
    """Where one tensor's chunks are: its matrix view, padding, chunk shape and chunks in its group buffer."""

    shape: tuple[int, ...]
    rows: int
    cols: int
    padded_rows: int
    padded_cols: int
    chunk: tuple[int, int]
    offset: int  # first chunk of this tensor in its group

    @property
    def grid(self) -> tuple[int, int]:
        return self.padded_rows // self.chunk[0], self.padded_cols // self.chunk[1]

    @property
    def n_chunks(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def padded(self) -> bool:
        return (self.padded_rows, self.padded_cols) != (self.rows, self.cols)

    def part(self, group_buf: torch.Tensor) -> torch.Tensor:
        """This tensor's (padded_rows, padded_cols) matrix in a group buffer (contiguous, any shape): a view."""
        size = self.chunk[0] * self.chunk[1]
        flat = group_buf.view(-1)[self.offset * size : (self.offset + self.n_chunks) * size]
        return flat.view(self.padded_rows, self.padded_cols)

    def blocks(self, m: torch.Tensor) -> torch.Tensor:
        """A (padded_rows, padded_cols) matrix seen as (grid_r, cr, grid_c, cc): chunk (i, j) is [i, :, j]; no copy."""
        (gr, gc), (cr, cc) = self.grid, self.chunk
        return m.view(gr, cr, gc, cc)

    def chunk_major(self, m: torch.Tensor) -> torch.Tensor:
        """A (padded_rows, padded_cols) matrix seen as (grid_r, grid_c, cr, cc): chunk by chunk; no copy."""
        return self.blocks(m).permute(0, 2, 1, 3)

    def to_matrix(self, t: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """Copy tensor `t` (of `shape`) into `out` (padded_rows, padded_cols), zero-padded; returns `out`."""
        m = t.reshape(self.rows, self.cols)
        if self.padded:
            m = F.pad(m, (0, self.padded_cols - self.cols, 0, self.padded_rows - self.rows))
        return out.copy_(m)

    def from_matrix(self, m: torch.Tensor) -> torch.Tensor:
        """The tensor (a new one) from its (padded_rows, padded_cols) matrix, padding cropped."""
        if self.padded:
            m = m[: self.rows, : self.cols]
        return m.reshape(self.shape).clone()


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
    """Forward and inverse 2-D DCT of every chunk of a padded matrix of up to `n` chunks of one shape.

    Coefficients take the layout of the matrix (module docstring). `inverse` and `sparse_inverse` return
    views of work buffers that the next call of either overwrites.
    """

    def __init__(self, chunk: tuple[int, int], n: int, device: torch.device | str = "cpu"):
        self.cr, self.cc = chunk
        self.n = n
        self.dr = dct_matrix(self.cr, device)
        self.dr_t = self.dr.t().contiguous()
        self.dc = dct_matrix(self.cc, device)
        self.dc_t = self.dc.t().contiguous()
        self._work = kept_zeros(n * self.cr * self.cc, device)  # huge pages where allowed (harness/distro_bench/train/optim/buffers.py)
        self._work2: torch.Tensor | None = None
        self._pq: tuple[torch.Tensor, torch.Tensor] | None = None  # sparse_inverse's gathered basis rows

    def _scratch(self, n: int) -> torch.Tensor:
        if n > self.n:
            raise ValueError(f"{n} chunks, more than the {self.n} this transform was built for")
        return self._work[: n * self.cr * self.cc]

    def forward(self, m: torch.Tensor, grid: tuple[int, int], out: torch.Tensor | None = None,
                beta: float = 0.0, alpha: float = 1.0) -> torch.Tensor:
        """DCT of every chunk of the contiguous (grid_r * cr, grid_c * cc) matrix `m`, into `out` (same shape,
        contiguous; a new tensor when not given): out = beta * out + alpha * D_r X D_c^T, chunk by chunk.
        The row pass applies D_r to every band of grid_c chunks at once (a batched GEMM reading `m` where it
        lies); the column pass, which accumulates into `out`, is one GEMM over both seen as (rows * grid_c, cc).
        In the other order (columns first, accumulating through the batched one) the transforms of `small`
        took 1.6 ms longer a step (10.8 against 9.2 ms, gradients and momentum out of cache); the two orders
        round differently (by up to 2.4e-7 there)."""
        (gr, gc), cr, cc = grid, self.cr, self.cc
        if out is None:
            out, beta = torch.empty_like(m), 0.0
        rows = m
        if cr > 1:  # D_r of a one-row chunk is [[1]]
            rows = torch.bmm(self.dr.expand(gr, cr, cr), m.view(gr, cr, gc * cc),
                             out=self._scratch(gr * gc).view(gr, cr, gc * cc))
        out.view(gr * cr * gc, cc).addmm_(rows.view(gr * cr * gc, cc), self.dc_t, beta=beta, alpha=alpha)
        return out

    def inverse(self, y: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        """The (grid_r * cr, grid_c * cc) matrix from its coefficients `y` (same shape, contiguous)."""
        (gr, gc), cr, cc = grid, self.cr, self.cc
        if self._work2 is None:  # only inverses need a second buffer (mm cannot write over its input)
            self._work2 = kept_zeros(self._work.numel(), self._work.device)
        b = torch.mm(y.view(gr * cr * gc, cc), self.dc, out=self._scratch(gr * gc).view(gr * cr * gc, cc))  # Y D_c
        out = self._work2[: gr * gc * cr * cc].view(gr, cr, gc * cc)
        return torch.bmm(self.dr_t.expand(gr, cr, cr), b.view(gr, cr, gc * cc), out=out).view(gr * cr, gc * cc)

    def sparse_inverse(self, idx: torch.Tensor, vals: torch.Tensor) -> torch.Tensor:
        """Chunks as (n, cr, cc) from m coefficients per chunk (row-major `idx` and `vals`, both (n, m));
        repeated indices add up. Costs m multiply-adds per element where `inverse` costs cr + cc."""
        return self.combine(*self.basis_rows(idx, vals))

    def basis_rows(self, idx: torch.Tensor, vals: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The two factors of `sparse_inverse` for every chunk, so that a caller can gather them for a whole group
        at once and combine them tensor by tensor: (n, m, cr) rows r of D_r (columns of D_r^T) times the values,
        and (n, m, cc) rows c of D_c. Views of kept buffers that the next call overwrites."""
        n, m = idx.shape
        if self._pq is None or self._pq[0].shape[0] < n * m:  # kept: multi-MB buffers page-fault when fresh
            self._pq = (kept_zeros(n * m * self.cr, idx.device).view(n * m, self.cr),
                        kept_zeros(n * m * self.cc, idx.device).view(n * m, self.cc))
        flat = idx.reshape(-1)
        p = torch.index_select(self.dr, 0, flat // self.cc, out=self._pq[0][: n * m]).view(n, m, self.cr)
        p.mul_(vals.unsqueeze(-1))
        q = torch.index_select(self.dc, 0, flat % self.cc, out=self._pq[1][: n * m]).view(n, m, self.cc)
        return p, q

    def combine(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """Chunks (n, cr, cc) = p^T q chunk by chunk, from `basis_rows` factors (or a run of chunks of them)."""
        n = p.shape[0]
        return torch.bmm(p.transpose(1, 2), q, out=self._scratch(n).view(n, self.cr, self.cc))
