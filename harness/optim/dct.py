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

Tensors whose chunks have the same shape form a group, and a group's chunks live in one buffer laid out
(cr, chunks, cc): row r of every chunk, then row r + 1. In that layout both passes of the separable
transform are single plain GEMMs over the whole group, with no copy between them: the column pass
multiplies the buffer seen as (cr * chunks, cc) by D_c^T, the row pass multiplies D_r by the buffer
seen as (cr, chunks * cc). Copies between parameters and the buffer move whole 64-float rows. (Batched
64x64 products through bmm ran 2.4x slower; a transposing copy between the passes cost a quarter of a
pass.) DisTrO's momentum update skips the copy for unpadded tensors: `forward_matrix` runs the column
pass on the gradient where it lies and the row pass, batched over bands of chunks, into the group buffer,
one tensor at a time, so its scratch stays in cache. Work buffers are kept, not allocated per step: fresh
multi-MB allocations page-fault on every call.
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
        """This tensor's chunks in a (cr, chunks, cc) group buffer: a (cr, n_chunks, cc) strided view."""
        return group_buf[:, self.offset : self.offset + self.n_chunks]

    def blocks(self, chunks: torch.Tensor) -> torch.Tensor:
        """(cr, n_chunks, cc) chunks seen as the padded matrix split (grid_r, cr, grid_c, cc); no copy."""
        (gr, gc), (cr, cc) = self.grid, self.chunk
        return chunks.view(cr, gr, gc, cc).permute(1, 0, 2, 3)

    def to_chunks(self, t: torch.Tensor, group_buf: torch.Tensor) -> None:
        """Copy tensor `t` (of `shape`, zero-padded) into its part of the (cr, chunks, cc) group buffer."""
        m = t.reshape(self.rows, self.cols)
        if self.padded:
            m = F.pad(m, (0, self.padded_cols - self.cols, 0, self.padded_rows - self.rows))
        (gr, gc), (cr, cc) = self.grid, self.chunk
        self.blocks(self.part(group_buf)).copy_(m.view(gr, cr, gc, cc))

    def from_chunks(self, chunks: torch.Tensor) -> torch.Tensor:
        """The tensor (a new one) from its (cr, n_chunks, cc) chunks, padding cropped."""
        m = self.blocks(chunks).reshape(self.padded_rows, self.padded_cols)
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
    """Forward and inverse 2-D DCT of up to `n` chunks of one shape, laid out (cr, chunks, cc).

    Coefficients use the same layout: coefficient (r, c) of chunk j is at [r, j, c]; its index within
    the chunk (what travels) is r * cc + c. `inverse` and `sparse_inverse` return views of a work buffer
    that the next call of either overwrites.
    """

    def __init__(self, chunk: tuple[int, int], n: int, device: torch.device | str = "cpu"):
        self.cr, self.cc = chunk
        self.n = n
        self.dr = dct_matrix(self.cr, device)
        self.dr_t = self.dr.t().contiguous()
        self.dc = dct_matrix(self.cc, device)
        self.dc_t = self.dc.t().contiguous()
        self._work = torch.empty(n * self.cr * self.cc, device=device)
        self._work2: torch.Tensor | None = None
        self._pq: tuple[torch.Tensor, torch.Tensor] | None = None  # sparse_inverse's gathered basis rows

    def _scratch(self, n: int) -> torch.Tensor:
        if n > self.n:
            raise ValueError(f"{n} chunks, more than the {self.n} this transform was built for")
        return self._work[: n * self.cr * self.cc]

    def forward(self, x: torch.Tensor, out: torch.Tensor | None = None, beta: float = 0.0,
                alpha: float = 1.0) -> torch.Tensor:
        """DCT of chunks x (cr, n, cc), contiguous: out = beta * out + alpha * D_r X D_c^T, in place when given."""
        cr, n, cc = x.shape
        if out is None:
            out, beta = torch.empty_like(x), 0.0
        a = torch.mm(x.view(cr * n, cc), self.dc_t, out=self._scratch(n).view(cr * n, cc))  # columns
        out.view(cr, n * cc).addmm_(self.dr, a.view(cr, n * cc), beta=beta, alpha=alpha)  # rows
        return out

    def forward_matrix(self, m: torch.Tensor, grid: tuple[int, int], out: torch.Tensor, beta: float = 0.0,
                       alpha: float = 1.0) -> None:
        """DCT of one unpadded tensor's chunks straight from the tensor, seen as its contiguous (rows, cols)
        matrix `m`: out = beta * out + alpha * D_r X D_c^T, where `out` is the tensor's (cr, chunks, cc) part of
        a group buffer. The column pass reads `m` in its own layout (each 64-float row of a chunk is a row of
        `m` seen as (rows * grid_c, cc)), so no copy into the group layout precedes it; the row pass then
        applies D_r to every band of `grid_c` chunks at once, a batched product written in place through a
        strided view of `out`. Its scratch is one tensor, not the group, so it stays in cache. Same products and sums
        per coefficient as `forward`."""
        (gr, gc), cr, cc = grid, self.cr, self.cc
        a = torch.mm(m.view(gr * cr * gc, cc), self.dc_t, out=self._scratch(gr * gc).view(gr * cr * gc, cc))
        # band b of `a`: rows r of its gc chunks, (cr, gc * cc); of `out`: the same, strided by the group's width
        out.view(cr, gr, gc * cc).permute(1, 0, 2).baddbmm_(self.dr.expand(gr, cr, cr), a.view(gr, cr, gc * cc),
                                                            beta=beta, alpha=alpha)

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        """Chunks (cr, n, cc) from coefficients (cr, n, cc), contiguous."""
        cr, n, cc = y.shape
        if self._work2 is None:  # only the dense path needs a second buffer (mm cannot write over its input)
            self._work2 = torch.empty_like(self._work)
        b = torch.mm(self.dr_t, y.view(cr, n * cc), out=self._scratch(n).view(cr, n * cc))  # D_r^T Y
        out = self._work2[: n * cr * cc].view(cr * n, cc)
        return torch.mm(b.view(cr * n, cc), self.dc, out=out).view(cr, n, cc)  # ... D_c

    def sparse_inverse(self, idx: torch.Tensor, vals: torch.Tensor) -> torch.Tensor:
        """Chunks as (n, cr, cc) from m coefficients per chunk (row-major `idx` and `vals`, both (n, m));
        repeated indices add up. Costs m multiply-adds per element where `inverse` costs cr + cc."""
        n, m = idx.shape
        if self._pq is None or self._pq[0].shape[0] < n * m:  # kept: multi-MB buffers page-fault when fresh
            self._pq = (torch.empty(n * m, self.cr, device=idx.device), torch.empty(n * m, self.cc, device=idx.device))
        flat = idx.reshape(-1)
        # (n, m, cr): rows r of D_r = columns of D_r^T, times the values; (n, m, cc): rows c of D_c
        p = torch.index_select(self.dr, 0, flat // self.cc, out=self._pq[0][: n * m]).view(n, m, self.cr)
        p.mul_(vals.unsqueeze(-1))
        q = torch.index_select(self.dc, 0, flat % self.cc, out=self._pq[1][: n * m]).view(n, m, self.cc)
        return torch.bmm(p.transpose(1, 2), q, out=self._scratch(n).view(n, self.cr, self.cc))
