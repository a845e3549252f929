import math

import pytest
import torch

from distro_bench.scenario.presets import MODELS
from distro_bench.train import data
from distro_bench.train.model import ModelConfig, build_model, parameter_shapes


def test_llama_1_2b_preset_has_1_2b_parameters():
    shapes = parameter_shapes(ModelConfig(**MODELS["llama-1.2b"]))
    n = sum(math.prod(s) for s in shapes.values())
    assert 1.15e9 < n < 1.25e9, n
    assert shapes["layers.0.ffn.w1.weight"] == (8192, 2048)


def test_model_is_causal_and_deterministic_from_seed():
    cfg = ModelConfig(**MODELS["tiny"])
    a, b = build_model(cfg, seed=3), build_model(cfg, seed=3)
    for (_, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p, q)
    x = torch.randint(0, 256, (2, 16))
    y1 = a(x)
    x2 = x.clone()
    x2[:, -1] = (x2[:, -1] + 1) % 256
    y2 = a(x2)
    assert y1.shape == (2, 16, 256)
    assert torch.allclose(y1[:, :-1], y2[:, :-1], atol=1e-5)  # changing the last token leaves earlier outputs alone
    assert not torch.allclose(y1[:, -1], y2[:, -1])


@pytest.mark.slow  # ~11 s of training in one process on a busy 2-core host
def test_a_few_steps_reduce_loss():
    torch.manual_seed(0)
    model = build_model(ModelConfig(**MODELS["tiny"]), seed=0)
    tokens = data.encode(data.load_corpus("builtin:pydoc"))
    shard, _ = data.split(tokens, 0.05, 0, 1, 32)
    x, y = data.train_batches(shard, 32, 8, seed=0, rank=0).next()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first = model.loss(x, y).item()
    for _ in range(20):
        opt.zero_grad()
        loss = model.loss(x, y)
        loss.backward()
        opt.step()
    assert loss.item() < first - 1.0


def test_pydoc_corpus_shards_are_disjoint_and_validation_is_held_out():
    raw = data.load_corpus("builtin:pydoc")
    assert 400_000 < len(raw) < 600_000
    tokens = torch.arange(10_000)
    shards = [data.split(tokens, 0.1, r, 4, 16)[0] for r in range(4)]
    val = data.split(tokens, 0.1, 0, 4, 16)[1]
    seen = set()
    for s in shards:
        ids = set(s.tolist())
        assert not ids & seen
        seen |= ids
    assert not seen & set(val.tolist())


def test_stdlib_corpus_is_large_repeatable_and_capped():
    """Issue 34: a corpus every machine has, large enough for a size ladder's bigger rungs (MBs, not pydoc's
    465 KB), the same bytes on every call (all ranks must read one corpus), and at most the cap."""
    raw = data.load_corpus("builtin:stdlib")
    assert 5_000_000 < len(raw) <= data.STDLIB_BYTES + 2 * 10_000
    assert data.stdlib_text() == raw
    small = data.stdlib_text(max_bytes=100_000)
    assert len(small) <= 100_000 + 2 * 1_000 and raw.startswith(small[:50_000])


def test_held_out_tail_splits_into_disjoint_tuning_and_validation():
    """Issue 27: a sweep selects on the tuning split, reports read the validation split; neither overlaps
    training, and validation is the very tail (so a run's val_loss is the same with or without tuning)."""
    tokens = torch.arange(10_000)
    shards = {t for r in range(4) for t in data.split(tokens, 0.1, r, 4, 16)[0].tolist()}
    tune, val = data.held_out_splits(data.split(tokens, 0.1, 0, 4, 16)[1])
    tune_ids, val_ids = set(tune.tolist()), set(val.tolist())
    assert len(tune) == len(val) == 500
    assert not tune_ids & val_ids and not (tune_ids | val_ids) & shards
    assert val[-1].item() == 9_999
    # both halves hold a validation window even for a tiny corpus
    tiny = data.split(torch.arange(400), 0.01, 0, 1, 16)[1]
    assert all(len(h) >= 16 + 2 for h in data.held_out_splits(tiny))
    windows = data.validation_batches(tune, 16, 2, 2)
    assert {t for x, y in windows for t in x.flatten().tolist()} <= tune_ids


def test_batches_are_deterministic_per_seed_and_rank():
    tokens = data.encode(b"abcdefghij" * 200)
    a = data.train_batches(tokens, 8, 2, seed=1, rank=0).next()[0]
    b = data.train_batches(tokens, 8, 2, seed=1, rank=0).next()[0]
    c = data.train_batches(tokens, 8, 2, seed=1, rank=1).next()[0]
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_text_file_and_folder_corpora(tmp_path):
    (tmp_path / "a.txt").write_text("hello ")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("world")
    (tmp_path / "skip.bin").write_bytes(b"\x00")
    assert data.load_corpus(str(tmp_path)) == b"hello \n\nworld"
    assert data.load_corpus(str(tmp_path / "a.txt")) == b"hello "
    assert data.decode(data.encode("héllo")) == "héllo"
