"""DisTrO's chunked DCT and wire codecs: exact round trips, chunk plans, byte layouts."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from distro_bench.train.optim import codec
from distro_bench.train.optim.dct import ChunkDCT, chunk_length, dct_matrix, layout


@pytest.mark.parametrize(("n", "expected"), [
    (128, (64, 128)), (384, (64, 384)), (96, (48, 96)), (10, (10, 10)), (1, (1, 1)),
    (257, (52, 260)),  # prime: 5 padded chunks, not 257 chunks of one element
    (131, (44, 132)),
])
def test_chunk_length(n, expected):
    assert chunk_length(n, 64) == expected


def test_dct_matrix_is_orthonormal_dct_ii():
    n = 8
    d = dct_matrix(n).double()
    assert torch.allclose(d @ d.T, torch.eye(n, dtype=torch.float64), atol=1e-6)
    x = torch.randn(n, dtype=torch.float64)
    # DCT-II by its definition, orthonormal scaling
    ref = torch.tensor([math.sqrt((1 if k == 0 else 2) / n)
                        * sum(x[i] * math.cos(math.pi * (2 * i + 1) * k / (2 * n)) for i in range(n)) for k in range(n)],
                       dtype=torch.float64)
    assert torch.allclose(d @ x, ref, atol=1e-6)


@pytest.mark.parametrize("shape", [(128, 384), (257, 100), (7,), (130,), (3, 5, 64), (), (64, 64)])
def test_dct_round_trip(shape):
    torch.manual_seed(0)
    t = torch.randn(shape)
    lay = layout(shape, 64)
    m = lay.to_matrix(t, torch.empty(lay.padded_rows, lay.padded_cols))
    dct = ChunkDCT(lay.chunk, lay.n_chunks)
    coef = dct.forward(m, lay.grid)
    assert not torch.allclose(coef, m) or lay.chunk == (1, 1)  # it did transform something
    back = lay.from_matrix(dct.inverse(coef, lay.grid))
    assert back.shape == t.shape
    assert torch.allclose(back, t, atol=1e-5)


def test_every_chunk_is_transformed_where_it_lies():
    """Chunk (i, j)'s coefficients take its place in the matrix; `out` accumulates beta * out + alpha * DCT."""
    torch.manual_seed(1)
    x = torch.randn(32, 24)  # a 2x3 grid of 16x8 chunks
    dr, dc = dct_matrix(16), dct_matrix(8)
    dct = ChunkDCT((16, 8), 6)
    coef = dct.forward(x, (2, 3))
    for i in range(2):
        for j in range(3):
            block = (slice(16 * i, 16 * i + 16), slice(8 * j, 8 * j + 8))
            assert torch.allclose(coef[block], dr @ x[block] @ dc.T, atol=1e-5)
    acc = torch.ones(32, 24)
    dct.forward(x, (2, 3), out=acc, beta=0.5, alpha=2.0)
    assert torch.allclose(acc, 0.5 + 2.0 * coef, atol=1e-5)


def test_a_tensors_part_of_a_group_buffer_is_its_own_and_contiguous():
    lay = layout((128, 192), 64, offset=3)  # three chunks of another tensor come first
    buf = torch.zeros((3 + lay.n_chunks) * 64 * 64)
    part = lay.part(buf)
    assert part.shape == (128, 192) and part.is_contiguous()
    ChunkDCT(lay.chunk, lay.n_chunks).forward(torch.randn(128, 192), lay.grid, out=part)
    assert torch.equal(buf[: 3 * 64 * 64], torch.zeros(3 * 64 * 64))  # the other tensor's chunks untouched
    assert bool((buf[3 * 64 * 64 :] != 0).all())


def test_sparse_inverse_equals_dense_inverse():
    torch.manual_seed(2)
    dct = ChunkDCT((16, 8), 5)
    idx = torch.stack([torch.randperm(128)[:6] for _ in range(5)])
    idx[:, 1] = idx[:, 0]  # a repeated index adds up
    vals = torch.randn(5, 6)
    dense = torch.zeros(5, 128)
    for j in range(5):
        for i, v in zip(idx[j].tolist(), vals[j].tolist()):
            dense[j, i] += v
    # five chunks side by side: a (16, 40) matrix, chunk j in columns 8j..8j+8
    coef = dense.view(5, 16, 8).transpose(0, 1).reshape(16, 40)
    expected = dct.inverse(coef, (1, 5)).view(16, 5, 8).transpose(0, 1).clone()
    assert torch.allclose(dct.sparse_inverse(idx, vals), expected, atol=1e-6)


def test_padding_is_zero_and_cropped():
    lay = layout((257, 64), 64)
    assert lay.padded and lay.padded_rows == 260 and lay.n_chunks == 5
    m = lay.to_matrix(torch.ones(257, 64), torch.full((260, 64), 7.0))
    assert m.sum().item() == 257 * 64  # the 3 padded rows are zeros
    assert lay.from_matrix(m).shape == (257, 64)


@pytest.mark.parametrize(("numel", "width"), [(1, 1), (64, 1), (256, 1), (257, 2), (4096, 2), (65536, 2), (65537, 4)])
def test_index_width(numel, width):
    assert codec.index_width(numel) == width


def test_u16_indices_round_trip_and_are_little_endian_u16():
    idx = torch.tensor([0, 1, 255, 256, 4095, 32767, 32768, 65535])
    buf = codec.encode_indices(idx, 2)
    assert buf.dtype == torch.uint8 and buf.numel() == 2 * idx.numel()
    assert buf.numpy().tobytes() == idx.numpy().astype("<u2").tobytes()
    assert torch.equal(codec.decode_indices(buf, 2), idx)


@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=40), st.sampled_from([1, 2, 4]))
@settings(max_examples=50, deadline=None)
def test_indices_round_trip(values, width):
    idx = torch.tensor([v % (1 << (8 * width)) for v in values], dtype=torch.int64)
    assert torch.equal(codec.decode_indices(codec.encode_indices(idx, width), width), idx)


@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=70))
@settings(max_examples=60, deadline=None)
def test_one_bit_values_round_trip(values):
    v = torch.tensor(values, dtype=torch.float32)
    buf = codec.encode_values(v, "1bit")
    assert buf.dtype == torch.uint8 and buf.numel() == math.ceil(len(values) / 8) == codec.value_nbytes(len(values), "1bit")
    expected = torch.where(v >= 0, 1.0, -1.0)
    assert torch.equal(codec.decode_values(buf, "1bit", len(values)), expected)
    bits = np.unpackbits(buf.numpy(), bitorder="little")[: len(values)]
    assert (bits == (v >= 0).numpy()).all()


@pytest.mark.parametrize("kind", ["fp32", "bf16"])
def test_float_values_round_trip(kind):
    v = torch.randn(13)
    buf = codec.encode_values(v, kind)
    assert buf.numel() == codec.value_nbytes(13, kind)
    out = codec.decode_values(buf, kind, 13)
    assert torch.equal(out, v if kind == "fp32" else v.bfloat16().float())
