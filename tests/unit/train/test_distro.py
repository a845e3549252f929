"""DisTrO in one process: the algorithm's invariants, agreement with the per-tensor reference, byte accounting."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch
from pydantic import ValidationError

from distro_bench.errors import ScenarioError
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.scenario.presets import MODELS
from distro_bench.train.comm import Comm
from distro_bench.train.model import ModelConfig, build_model, parameter_shapes
from distro_bench.train.optim import STRATEGIES, PhaseTimer, get_strategy
from distro_bench.train.optim.distro import DisTrO, DisTrOConfig, _row_maxima
from tests.helpers import REPO, tiny_scenario_dict

# Odd shapes on purpose: a prime dimension (padded), a vector, a 3-D tensor, a chunk-sized matrix.
SHAPES = [(48, 40), (37,), (8, 3, 16), (131, 16), (16, 16)]


def _reference():
    spec = importlib.util.spec_from_file_location("distro_reference", REPO / "benchmarks" / "distro_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ReferenceDeMo


def _params(seed: int = 0, shapes=SHAPES) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g) * 0.1) for s in shapes]


def _set_grads(params, seed: int) -> None:
    g = torch.Generator().manual_seed(1000 + seed)
    for p in params:
        p.grad = torch.randn(p.shape, generator=g)


def _strategy(params, **options) -> DisTrO:
    # the ring's byte formulas (exchange: auto would take direct at world 4, which counts a copy per peer)
    cfg = DisTrOConfig(**{"lr": 0.01, "chunk": 16, "topk": 3, "exchange": "ring", **options})
    return DisTrO(cfg, [(f"p{i}", p) for i, p in enumerate(params)], Comm(), total_steps=100)


def _timer() -> PhaseTimer:
    return PhaseTimer(torch.device("cpu"))


def test_registered_and_configurable_from_a_scenario():
    assert get_strategy("distro") is DisTrO and STRATEGIES["distro"] is DisTrO
    s = scenario_from_dict(tiny_scenario_dict(optimizers={
        "adamw": {"lr": 1e-3},
        "distro": {"lr": 3e-3, "topk": 4, "values": "1bit"},
        "distro-nobucket": {"type": "distro", "lr": 3e-3, "bucket": False, "state": "stateless", "values": "bf16"},
    }))
    cfgs = s.optimizer_configs()
    assert cfgs["distro"].topk == 4 and cfgs["distro"].bucket
    assert cfgs["distro-nobucket"].type == "distro" and not cfgs["distro-nobucket"].bucket


@pytest.mark.parametrize(("options", "where"), [
    ({"values": "int4"}, "values"), ({"topk": 5000, "chunk": 64}, "topk"), ({"decay": 1.0}, "decay"),
    ({"state": "lazy"}, "state"),
])
def test_bad_options_rejected_with_their_name(options, where):
    with pytest.raises(ValidationError):
        DisTrOConfig(lr=1e-3, **options)
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(tiny_scenario_dict(optimizers={"adamw": {"lr": 1e-3}, "distro": {"lr": 1e-3, **options}}))
    assert "optimizers.distro" in str(e.value) and where in str(e.value)


@pytest.mark.parametrize("state", ["stateful", "stateless"])
def test_full_topk_one_worker_steps_by_sign_of_momentum(state):
    params = _params()
    before = [p.detach().clone() for p in params]
    s = _strategy(params, topk=16 * 16, values="fp32", state=state, decay=0.9)
    _set_grads(params, 0)
    s.step(0, _timer())
    momentum = [0.01 * p.grad for p in params]  # everything is sent, so nothing is left: delta = lr * g
    for p, b, m in zip(params, before, momentum):
        step = (b - p.detach()) / 0.01
        clear = m.abs() > 1e-6  # where float rounding cannot flip the sign
        assert clear.float().mean() > 0.99
        assert torch.allclose(step[clear], torch.sign(m)[clear], atol=1e-4)


@pytest.mark.parametrize("values", ["fp32", "bf16", "1bit"])
def test_residual_plus_transmitted_is_momentum(values):
    params = _params()
    s = _strategy(params, values=values, decay=0.9)
    for step in range(3):
        old = [s.momentum(i) for i in range(len(params))]
        _set_grads(params, step)
        s.step(step, _timer())
        for i, p in enumerate(params):
            expected = 0.9 * old[i] + 0.01 * p.grad
            got = s.momentum(i) + s.transmitted(i)
            assert torch.allclose(got, expected, atol=1e-6), (values, step, i)
    assert any(s.momentum(i).abs().sum() > 0 for i in range(len(params)))


def test_stateless_keeps_no_momentum():
    params = _params()
    s = _strategy(params, state="stateless")
    _set_grads(params, 0)
    s.step(0, _timer())
    assert s.delta is None and all(s.momentum(i).abs().sum() == 0 for i in range(len(params)))


def test_sends_top_k_per_chunk_only():
    params = _params()
    s = _strategy(params, topk=3)
    _set_grads(params, 0)
    s.step(0, _timer())
    for g, (idx, vals) in zip(s.groups, s._sent):
        assert idx.shape == vals.shape == (g.n_chunks, min(3, g.chunk_numel))
        dense = torch.zeros(g.n_chunks, g.chunk_numel).scatter_(1, idx, vals)
        assert ((dense != 0).sum(1) <= 3).all()


@pytest.mark.parametrize(("values", "shapes"), [
    # The reference is DeMo's own algorithm (1-D and 2-D tensors, its divisor chunking): shapes on which
    # DisTrO's chunking is DeMo's; tests/unit/train/test_distro_reference.py shows where they part on purpose.
    ("fp32", [(48, 40), (40,), (12, 64), (16, 16)]),
    # 1-bit values make many updates cancel to exactly 0 in exact arithmetic on odd chunk shapes, where
    # the two implementations' rounding then picks different signs; power-of-two chunks have no such zeros.
    ("1bit", [(32, 64), (64,), (16, 16)]),
])
def test_matches_the_per_tensor_reference(values, shapes):
    ours_p, ref_p = _params(shapes=shapes), _params(shapes=shapes)
    ours = _strategy(ours_p, values=values, weight_decay=0.1, decay=0.95, weight_decay_on="all")
    ref = _reference()(ref_p, Comm(), lr=0.01, topk=3, chunk=16, decay=0.95, values=values, weight_decay=0.1)
    for step in range(5):
        _set_grads(ours_p, step)
        _set_grads(ref_p, step)
        ours.step(step, _timer())
        ref.step()
    for a, b in zip(ours_p, ref_p):
        differ = (a - b).abs() > 1e-5
        # A coefficient within rounding of a top-k tie, or an update within rounding of 0, may differ.
        assert differ.float().mean() < 0.01, differ.float().mean()
    assert any(not torch.equal(a, p) for a, p in zip(ours_p, _params(shapes=shapes)))


@pytest.mark.parametrize("values", ["fp32", "bf16", "1bit"])
@pytest.mark.parametrize("bucket", [True, False])
def test_predicted_bytes_equal_counted_bytes_one_worker(values, bucket):
    params = _params()
    s = _strategy(params, values=values, bucket=bucket)
    s.comm.take()
    _set_grads(params, 0)
    s.step(0, _timer())
    counted = s.comm.take()
    shapes = {f"p{i}": tuple(p.shape) for i, p in enumerate(params)}
    assert DisTrO.predict_payload_bytes(s.cfg, shapes, 1) == (counted.tx_bytes, counted.rx_bytes)
    assert DisTrO.predict_payload_bytes(s.cfg, shapes, 4) == (counted.tx_bytes, 3 * counted.tx_bytes)


def test_tiny_model_payload_is_about_2_125_bytes_per_coefficient():
    cfg = DisTrOConfig(lr=1e-3, topk=4, chunk=64, values="1bit", exchange="ring")
    shapes = parameter_shapes(ModelConfig(**MODELS["tiny"]))
    tx, rx = DisTrO.predict_payload_bytes(cfg, shapes, 4)
    matrices = sum(math.prod(s) for s in shapes.values() if len(s) == 2)
    vectors = sum(math.prod(s) for s in shapes.values() if len(s) == 1)
    # u16 index + 1 bit per coefficient for 64x64 chunks; u8 + 1 bit for the norm vectors' 64-chunks
    assert tx == matrices // 4096 * 4 * 17 // 8 + vectors // 64 * 4 * 9 // 8
    assert rx == 3 * tx


def test_prime_dimension_is_compressed_not_sent_dense():
    cfg = DisTrOConfig(lr=1e-3, topk=4, chunk=64, values="1bit")
    tx, _ = DisTrO.predict_payload_bytes(cfg, {"vocab": (50257, 64)}, 2)
    assert tx < 50257 * 64 * 4 / 500


def test_trains_a_model_in_one_process():
    torch.manual_seed(0)
    model = build_model(ModelConfig(dim=32, n_layers=1, n_heads=2, ffn_dim=64, vocab_size=32), seed=0)
    s = DisTrO(DisTrOConfig(lr=3e-3, topk=8, chunk=16, values="1bit"), list(model.named_parameters()), Comm(), 40)
    x = torch.randint(0, 32, (4, 16))
    y = torch.roll(x, -1, dims=1)  # a learnable mapping
    losses = []
    for step in range(40):
        model.zero_grad()
        loss = model.loss(x, y)
        loss.backward()
        s.step(step, _timer())
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.3, losses


@pytest.mark.parametrize("k", [3, 10])  # few coefficients: counted pairwise, sparse transform; many: dense
def test_update_is_sign_of_the_mean_over_the_workers_that_sent(k):
    from distro_bench.train.optim.dct import dct_matrix

    params = [torch.nn.Parameter(torch.zeros(16, 16))]
    s = _strategy(params, topk=k)
    g = torch.Generator().manual_seed(k)
    per_worker = [(torch.randperm(256, generator=g)[:k].view(1, k), torch.randn(1, k, generator=g)) for _ in range(3)]
    per_worker[1][0][0, 0] = per_worker[0][0][0, 0]  # a coefficient sent by two workers
    total, count = torch.zeros(256), torch.zeros(256)
    for idx, vals in per_worker:
        for i, v in zip(idx[0].tolist(), vals[0].tolist()):
            total[i] += v
            count[i] += 1
    d = dct_matrix(16)
    update = d.T @ (total / count.clamp(min=1)).view(16, 16) @ d
    with torch.no_grad():
        s._apply(0, per_worker, lr=1.0)
    clear = update.abs() > 1e-5
    assert clear.float().mean() > 0.95
    assert torch.equal(params[0].detach()[clear], -torch.sign(update)[clear])


class _CaptureComm(Comm):
    def __init__(self):
        super().__init__()
        self.sent: list[torch.Tensor] = []

    def all_gather(self, tensor):
        self.sent.append(tensor.clone())
        return super().all_gather(tensor)


def test_wire_buffer_layout_values_then_row_major_indices():
    from distro_bench.train.optim.dct import dct_matrix

    param = torch.nn.Parameter(torch.zeros(16, 32))  # two 16x16 chunks side by side
    comm = _CaptureComm()
    s = DisTrO(DisTrOConfig(lr=0.5, chunk=16, topk=1, values="fp32", decay=0.0), [("w", param)], comm, 10)
    d = dct_matrix(16)
    basis = torch.outer(d[1], d[2])  # a pure coefficient at row 1, column 2 of a chunk
    param.grad = torch.cat([3.0 * basis, -2.0 * basis.T], dim=1)  # second chunk: row 2, column 1
    s.step(0, _timer())
    (buf,) = comm.sent
    assert buf.numel() == 2 * 4 + 2 * 1  # two fp32 values, then two u8 indices
    assert torch.allclose(buf[:8].view(torch.float32), torch.tensor([1.5, -1.0]), atol=1e-5)  # lr * coefficient
    assert buf[8:].tolist() == [1 * 16 + 2, 2 * 16 + 1]


def _full_topk_sets(matrices: list[torch.Tensor], k: int) -> torch.Tensor:
    """A plain top-k of every 64x64 chunk of each coefficient matrix, chunks row-major: (chunks, k) sorted."""
    chunks = [m.view(m.shape[0] // 64, 64, m.shape[1] // 64, 64).permute(0, 2, 1, 3).reshape(-1, 64 * 64)
              for m in matrices]
    return torch.cat(chunks).abs().topk(k, dim=1).indices.sort(1).values


@pytest.mark.parametrize("k", [1, 4, 16])
def test_topk_through_rows_selects_each_chunks_top_k(k):
    """The row-pruned top-k (the chunk's k largest lie in its k rows with the largest maxima) picks the same
    set as a top-k over the whole chunk, also where every winner sits in one row or one column; for a tensor
    that starts after another one in the group buffer, over a grid of two rows of chunks."""
    params = [torch.nn.Parameter(torch.zeros(64, 64)), torch.nn.Parameter(torch.zeros(128, 192))]
    s = DisTrO(DisTrOConfig(lr=1e-3, topk=k), list(zip(["a", "w"], params)), Comm(), total_steps=10)
    assert len(s.groups) == 1 and s.groups[0].n_chunks == 7
    g = torch.Generator().manual_seed(k)
    delta = torch.randn(7 * 64 * 64, generator=g)
    first, second = delta[: 64 * 64].view(64, 64), delta[64 * 64 :].view(128, 192)
    second[5, 64:128] = 10.0 + torch.rand(64, generator=g)  # chunk (0, 1): all winners in its row 5
    second[64:, 128 + 7] = -(10.0 + torch.rand(64, generator=g))  # chunk (1, 2): all in its column 7, negative
    got = s._topk_by_rows(0, delta, _row_maxima(delta.view(-1, 64)))
    assert got.shape == (7, k)
    assert torch.equal(got.sort(1).values, _full_topk_sets([first, second], k))
    assert bool((got // 64 == 5)[2].all()) and bool((got % 64 == 7)[6].all())


def test_topk_through_rows_on_an_all_zero_chunk_sends_k_distinct_indices():
    params = [torch.nn.Parameter(torch.zeros(64, 64))]
    s = DisTrO(DisTrOConfig(lr=1e-3, topk=4), list(zip(["w"], params)), Comm(), total_steps=10)
    got = s._topk_by_rows(0, torch.zeros(64 * 64), torch.zeros(64))
    assert got.unique().numel() == 4 and int(got.min()) >= 0 and int(got.max()) < 64 * 64
