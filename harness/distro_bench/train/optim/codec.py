"""Wire codecs of the sparse methods (DisTrO, SparseLoCo): chunk indices and values as uint8 buffers.

Everything is encoded to uint8 tensors (gloo gathers bytes; torch has no full uint16 arithmetic), so a
buffer is readable elsewhere as plain arrays: `numpy.frombuffer(b, "<u2")` for u16 indices,
`numpy.unpackbits(b, bitorder="little")` for 1-bit values (bit set = positive).

Index formats (`index:`), each a fixed number of bytes for a given number of chunks, so what a step sends is
known before it is sent (bytes predicted = counted):
- `auto`: little-endian unsigned integers, the smallest type holding a chunk index (u16 for 64x64);
- `int64`: DeMo's reference;
- `coded`: each chunk's index set, sorted, as an Elias-Fano code (below).

Why Elias-Fano for `coded` (issue 37): it is within a few percent of the information floor log2 C(n, k) at the
densities these methods send (64x64 chunks at topk 4-8: 1.08-1.10x of the floor with 1-bit values; Psyche's
u16 + sign bit is 1.53x), its length depends only on (n, k), not on the data, so the harness keeps predicting
bytes exactly, and both directions are a few whole-tensor operations (no per-element loop, the same code on
CPU and CUDA). Golomb-Rice codes of the gaps are as short on average but vary in length with the data, and an
arithmetic coder on the measured distribution (which clusters at low DCT frequencies) would be shorter still
but is sequential per chunk.

Elias-Fano of k sorted values in 0..n-1: each value's low `L` bits are written as they are (k * L bits), and
its high part h_i = v_i >> L as a one at position h_i + i of an upper bit array of k + ((n-1) >> L) + 1 bits
(a unary code of the gaps). L is the width that makes the code shortest (about log2(n / k)). Bits are packed
little-endian per byte, chunk after chunk, lows before uppers within a chunk; a buffer is padded to whole
bytes. When a chunk sends all its n coefficients the index set is implied and takes no bits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch

from distro_bench.scenario.optimizers import IndexCodec, ValueCodec


def index_width(chunk_numel: int, index: IndexCodec = "auto") -> int:
    """Bytes per index of the fixed-width formats: 8 for `int64` (DeMo's reference), else the smallest
    unsigned type holding 0..chunk_numel-1 (u8, u16 or u32)."""
    if index == "int64":
        return 8
    for width in (1, 2, 4):
        if chunk_numel <= 1 << (8 * width):
            return width
    raise ValueError(f"a chunk of {chunk_numel} elements needs indices wider than 32 bits")


@dataclass(frozen=True)
class FixedWidth:
    """Every index as a little-endian unsigned integer of `width` bytes, in the order the selection gave."""

    width: int
    k: int  # indices per chunk

    def nbytes(self, chunks: int) -> int:
        return chunks * self.k * self.width

    def arrange(self, idx: torch.Tensor) -> torch.Tensor:
        return idx

    def encode(self, idx: torch.Tensor) -> torch.Tensor:
        """(chunks, k) int64 indices -> uint8 bytes."""
        return encode_indices(idx, self.width)

    def decode(self, buf: torch.Tensor, chunks: int) -> torch.Tensor:
        """uint8 bytes -> (chunks, k) int64 indices."""
        return decode_indices(buf, self.width).view(chunks, self.k)


@dataclass(frozen=True)
class EliasFano:
    """Each chunk's k sorted indices out of n as an Elias-Fano code (the module's docstring): a fixed
    `bits_per_chunk` for every chunk."""

    n: int  # chunk elements
    k: int  # indices per chunk

    @cached_property
    def low_bits(self) -> int:
        return min(range(max(self.n.bit_length(), 1)), key=lambda low: (self._bits(low), -low))

    @cached_property
    def upper_bits(self) -> int:
        return 0 if self.k >= self.n else self.k + ((self.n - 1) >> self.low_bits) + 1

    @property
    def bits_per_chunk(self) -> int:
        return 0 if self.k >= self.n else self._bits(self.low_bits)

    def _bits(self, low: int) -> int:
        return self.k * low + self.k + ((self.n - 1) >> low) + 1

    def nbytes(self, chunks: int) -> int:
        return math.ceil(chunks * self.bits_per_chunk / 8)

    def arrange(self, idx: torch.Tensor) -> torch.Tensor:
        """The code holds a set: its indices in ascending order, the order `decode` returns them in."""
        return idx.sort(dim=1).values

    def encode(self, idx: torch.Tensor) -> torch.Tensor:
        """(chunks, k) int64 indices, ascending per chunk (`arrange`) -> uint8 bytes."""
        chunks = idx.shape[0]
        if self.k >= self.n:
            return torch.empty(0, dtype=torch.uint8, device=idx.device)
        low, k = self.low_bits, self.k
        shifts = torch.arange(low, device=idx.device)
        lows = ((idx[:, :, None] >> shifts) & 1).to(torch.uint8).view(chunks, k * low)
        uppers = torch.zeros(chunks, self.upper_bits, dtype=torch.uint8, device=idx.device)
        uppers.scatter_(1, (idx >> low) + torch.arange(k, device=idx.device), 1)
        return pack_bits(torch.cat([lows, uppers], dim=1).view(-1))

    def decode(self, buf: torch.Tensor, chunks: int) -> torch.Tensor:
        """uint8 bytes -> (chunks, k) int64 indices, ascending per chunk. A buffer that is not such a code (the
        wrong number of ones in an upper array) raises ValueError."""
        k, low = self.k, self.low_bits
        if k >= self.n:
            return torch.arange(self.n, device=buf.device).expand(chunks, k).clone()
        bits = unpack_bits(buf, chunks * self.bits_per_chunk).view(chunks, self.bits_per_chunk)
        lows = (bits[:, : k * low].view(chunks, k, low).long() << torch.arange(low, device=buf.device)).sum(-1)
        ones = bits[:, k * low :].nonzero()  # row-major: each chunk's ones in ascending position
        if ones.shape[0] != chunks * k:
            raise ValueError(f"not an Elias-Fano code of {chunks} chunks of {k} of {self.n}: "
                             f"{ones.shape[0]} ones in the upper arrays, expected {chunks * k}")
        highs = ones[:, 1].view(chunks, k) - torch.arange(k, device=buf.device)
        return (highs << low) | lows


IndexFormat = FixedWidth | EliasFano


def index_format(chunk_numel: int, k: int, index: IndexCodec = "auto") -> IndexFormat:
    """How `k` indices per chunk of `chunk_numel` elements travel under option `index`."""
    if index == "coded":
        return EliasFano(chunk_numel, k)
    return FixedWidth(index_width(chunk_numel, index), k)


def value_nbytes(count: int, codec: ValueCodec) -> int:
    if codec == "fp32":
        return 4 * count
    if codec == "bf16":
        return 2 * count
    return math.ceil(count / 8)


def value_bits(codec: ValueCodec) -> int:
    """Bits per value as declared: what a value's floor is counted at (issue 37)."""
    return {"fp32": 32, "bf16": 16}.get(codec, 1)


def encode_indices(idx: torch.Tensor, width: int) -> torch.Tensor:
    """int64 indices -> uint8 bytes, `width` per index, little-endian."""
    flat = idx.reshape(-1)
    if width == 1:
        return flat.to(torch.uint8)
    if width == 8:
        return flat.to(torch.int64).contiguous().view(torch.uint8)
    return torch.stack([(flat >> (8 * i)) & 0xFF for i in range(width)], dim=-1).to(torch.uint8).reshape(-1)


def decode_indices(buf: torch.Tensor, width: int) -> torch.Tensor:
    """uint8 bytes -> int64 indices."""
    if width == 1:
        return buf.long()
    if width == 8:  # a view needs an 8-byte aligned start; a slice of a packed bucket may not have one
        return (buf if buf.storage_offset() % 8 == 0 else buf.clone()).view(torch.int64)
    b = buf.view(-1, width).long()
    out = b[:, 0].clone()
    for i in range(1, width):
        out |= b[:, i] << (8 * i)
    return out


_BIT_WEIGHTS: dict[torch.device, torch.Tensor] = {}


def _weights(device: torch.device) -> torch.Tensor:
    if device not in _BIT_WEIGHTS:
        _BIT_WEIGHTS[device] = torch.tensor([1 << i for i in range(8)], dtype=torch.int32, device=device)
    return _BIT_WEIGHTS[device]


def pack_bits(bits: torch.Tensor) -> torch.Tensor:
    """A flat tensor of 0/1 -> uint8 bytes, 8 bits a byte, the first bit lowest; the last byte zero-padded."""
    bits = bits.to(torch.int32)
    pad = (-bits.numel()) % 8
    if pad:
        bits = torch.cat([bits, bits.new_zeros(pad)])
    return (bits.view(-1, 8) * _weights(bits.device)).sum(dim=1).to(torch.uint8)


def unpack_bits(buf: torch.Tensor, count: int) -> torch.Tensor:
    """uint8 bytes -> the first `count` bits as uint8 0/1 (`pack_bits` reversed)."""
    return (buf.to(torch.int32)[:, None] & _weights(buf.device)).ne(0).reshape(-1)[:count].to(torch.uint8)


def encode_values(values: torch.Tensor, codec: ValueCodec) -> torch.Tensor:
    """float values -> uint8 bytes. 1 bit keeps the sign only (0 counts as positive: one bit has no zero)."""
    flat = values.reshape(-1)
    if codec == "fp32":
        return flat.float().contiguous().view(torch.uint8)
    if codec == "bf16":
        return flat.to(torch.bfloat16).contiguous().view(torch.uint8)
    return pack_bits(flat >= 0)


def decode_values(buf: torch.Tensor, codec: ValueCodec, count: int) -> torch.Tensor:
    """uint8 bytes -> `count` float32 values (1 bit: +1.0 / -1.0)."""
    if codec == "fp32":
        return buf.view(torch.float32)[:count]
    if codec == "bf16":
        return buf.view(torch.bfloat16)[:count].float()
    return unpack_bits(buf, count).float().mul_(2).sub_(1)
