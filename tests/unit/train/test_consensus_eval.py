"""A periodic method is evaluated on the model a user would keep (issue 35): between syncs, `consensus()`
holds the shared parameters of the last round (the anchor every replica agrees on), not this worker's local
ones, and puts the local ones back exactly; at a sync the two are the same."""

from __future__ import annotations

import pytest
import torch

from distro_bench.scenario.optimizers import DiLoCoConfig, SparseLoCoConfig, StreamingDiLoCoConfig
from distro_bench.train.comm import Comm
from distro_bench.train.optim import PhaseTimer
from distro_bench.train.optim.diloco import DiLoCo
from distro_bench.train.optim.sparseloco import SparseLoCo
from distro_bench.train.optim.streaming_diloco import StreamingDiLoCo

METHODS = {
    "diloco": (DiLoCo, DiLoCoConfig(lr=1e-2, inner_steps=3)),
    "sparseloco": (SparseLoCo, SparseLoCoConfig(lr=1e-2, inner_steps=3, topk=8)),
    "streaming-diloco": (StreamingDiLoCo, StreamingDiLoCoConfig(lr=1e-2, inner_steps=3, fragments=1)),
}


def _model(seed: int = 0) -> list[tuple[str, torch.nn.Parameter]]:
    g = torch.Generator().manual_seed(seed)
    return [(f"p{i}", torch.nn.Parameter(torch.randn(*s, generator=g))) for i, s in enumerate([(8, 16), (16,)])]


@pytest.mark.parametrize("name", list(METHODS))
def test_between_syncs_evaluation_sees_the_shared_model_and_training_keeps_its_local_one(name):
    cls, cfg = METHODS[name]
    params = _model()
    start = [p.detach().clone() for _, p in params]
    s = cls(cfg, params, Comm(), total_steps=100)
    timer = PhaseTimer(torch.device("cpu"))
    g = torch.Generator().manual_seed(1)
    for step in range(2):  # two local steps of three: no sync yet
        for _, p in params:
            p.grad = torch.randn(p.shape, generator=g)
        result = s.step(step, timer)
        assert not result.synced
    local = [p.detach().clone() for _, p in params]
    assert any(not torch.equal(a, b) for a, b in zip(local, start)), "the local steps moved nothing"
    with s.consensus():
        seen = [p.detach().clone() for _, p in params]
    assert all(torch.equal(a, b) for a, b in zip(seen, start)), "evaluation saw this worker's local model"
    assert all(torch.equal(p.detach(), v) for (_, p), v in zip(params, local)), "the local model was not put back"
    for _, p in params:  # the third step syncs: shared and local are one model again
        p.grad = torch.randn(p.shape, generator=g)
    assert s.step(2, timer).synced
    with s.consensus():
        seen = [p.detach().clone() for _, p in params]
    assert all(torch.equal(p.detach(), v) for (_, p), v in zip(params, seen))
    assert any(not torch.equal(a, b) for a, b in zip(seen, start)), "the sync moved the shared model nowhere"
