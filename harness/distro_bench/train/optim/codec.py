"""DisTrO's wire codecs: chunk indices as little-endian unsigned integers, values as fp32, bf16 or 1 bit.

Everything is encoded to uint8 tensors (gloo gathers bytes; torch has no full uint16 arithmetic), so a
buffer is readable elsewhere as plain arrays: `numpy.frombuffer(b, "<u2")` for u16 indices,
`numpy.unpackbits(b, bitorder="little")` for 1-bit values (bit set = positive).
"""

from __future__ import annotations

import math

import torch

from distro_bench.scenario.optimizers import IndexCodec, ValueCodec


def index_width(chunk_numel: int, index: IndexCodec = "auto") -> int:
    """Bytes per index: 8 for `int64` (DeMo's reference), else the smallest unsigned type holding
    0..chunk_numel-1 (u8, u16 or u32)."""
    if index == "int64":
        return 8
    for width in (1, 2, 4):
        if chunk_numel <= 1 << (8 * width):
            return width
    raise ValueError(f"a chunk of {chunk_numel} elements needs indices wider than 32 bits")


def index_nbytes(count: int, width: int) -> int:
    return count * width


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


def encode_values(values: torch.Tensor, codec: ValueCodec) -> torch.Tensor:
    """float values -> uint8 bytes. 1 bit keeps the sign only (0 counts as positive: one bit has no zero)."""
    flat = values.reshape(-1)
    if codec == "fp32":
        return flat.float().contiguous().view(torch.uint8)
    if codec == "bf16":
        return flat.to(torch.bfloat16).contiguous().view(torch.uint8)
    bits = (flat >= 0).to(torch.int32)
    pad = (-bits.numel()) % 8
    if pad:
        bits = torch.cat([bits, bits.new_zeros(pad)])
    return (bits.view(-1, 8) * _weights(bits.device)).sum(dim=1).to(torch.uint8)


def decode_values(buf: torch.Tensor, codec: ValueCodec, count: int) -> torch.Tensor:
    """uint8 bytes -> `count` float32 values (1 bit: +1.0 / -1.0)."""
    if codec == "fp32":
        return buf.view(torch.float32)[:count]
    if codec == "bf16":
        return buf.view(torch.bfloat16)[:count].float()
    bits = (buf.to(torch.int32)[:, None] & _weights(buf.device)).ne(0).reshape(-1)[:count]
    return bits.float().mul_(2).sub_(1)
