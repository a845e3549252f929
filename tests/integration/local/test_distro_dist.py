"""DisTrO across real gloo process groups on 127.0.0.1: replicas stay bit-identical and bytes are as predicted."""

from __future__ import annotations

import hashlib
import json
import os
import socket
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

STEPS = 20
SHAPES = [(48, 40), (37,), (8, 3, 16), (131, 16), (16, 16)]
CONFIGS = {
    "1bit-bucket": {"values": "1bit", "topk": 4},
    "fp32-per-tensor": {"values": "fp32", "topk": 3, "bucket": False},
    "bf16-stateless": {"values": "bf16", "topk": 5, "state": "stateless", "weight_decay": 0.1},
    "1bit-per-tensor": {"values": "1bit", "topk": 2, "bucket": False, "decay": 0.9},
    # The exchange moves the same buffers another way: same bits as its ring twin.
    "1bit-bucket-direct": {"values": "1bit", "topk": 4, "exchange": "direct"},
    "fp32-per-tensor-direct": {"values": "fp32", "topk": 3, "bucket": False, "exchange": "direct"},
    "fp32-int64-index": {"values": "fp32", "topk": 3, "index": "int64"},
    "1bit-overlap": {"values": "1bit", "topk": 4, "overlap": True},
    "fp32-per-tensor-overlap-direct": {"values": "fp32", "topk": 3, "bucket": False, "overlap": True,
                                       "exchange": "direct"},
    # Gradients here ignore the parameters, so eager's guesses change nothing it computes: once drained it
    # holds its stale twin's bits (its own packet is read for the guess while the gather sends it).
    "1bit-eager": {"values": "1bit", "topk": 4, "overlap": "eager"},
}
TWINS = {"1bit-bucket-direct": "1bit-bucket", "fp32-per-tensor-direct": "fp32-per-tensor", "1bit-eager": "1bit-overlap"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _checksum(params) -> str:
    h = hashlib.sha256()
    for p in params:
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def _worker(rank: int, world: int, port: int, out: str) -> None:
    from distro_bench.train.comm import Comm
    from distro_bench.train.optim import PhaseTimer
    from distro_bench.train.optim.distro import DisTrO, DisTrOConfig

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    try:
        results = {}
        for name, options in CONFIGS.items():
            g = torch.Generator().manual_seed(0)  # same initial weights everywhere
            params = [torch.nn.Parameter(torch.randn(s, generator=g) * 0.1) for s in SHAPES]
            comm = Comm()
            # the ring unless a config says otherwise: the direct twins compare against it (the default is auto)
            cfg = DisTrOConfig(lr=0.01, chunk=16, **{"exchange": "ring", **options})
            s = DisTrO(cfg, [(f"p{i}", p) for i, p in enumerate(params)], comm, STEPS)
            data = torch.Generator().manual_seed(100 + rank)  # every rank its own gradients
            counted = []
            comm.take()
            for step in range(STEPS):
                for p in params:
                    p.grad = torch.randn(p.shape, generator=data)
                s.step(step, PhaseTimer(torch.device("cpu")))
                c = comm.take()
                counted.append([c.tx_bytes, c.rx_bytes, c.calls])
            predicted = DisTrO.predict_payload_bytes(cfg, {f"p{i}": s for i, s in enumerate(SHAPES)}, world)
            moved = max((p.detach() - q).abs().max().item() for p, q in
                        zip(params, [torch.randn(s, generator=torch.Generator().manual_seed(0)) * 0.1 for s in SHAPES]))
            results[name] = {"checksum": _checksum(params), "counted": counted, "predicted": list(predicted),
                             "moved": moved}
        Path(out, f"rank{rank}.json").write_text(json.dumps(results))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 4])
def test_replicas_identical_and_bytes_as_predicted(world, tmp_path):
    if not dist.is_gloo_available():
        pytest.skip("this torch build has no gloo backend")
    mp.spawn(_worker, args=(world, _free_port(), str(tmp_path)), nprocs=world, join=True)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    for name, options in CONFIGS.items():
        sums = {r[name]["checksum"] for r in ranks}
        assert len(sums) == 1, f"{name}: replicas differ after {STEPS} steps"
        assert ranks[0][name]["moved"] > 0.01 * STEPS / 4, f"{name}: parameters barely moved"
        collectives = 1 if options.get("bucket", True) else 2 * len(SHAPES)
        copies = world - 1 if options.get("exchange") == "direct" else 1  # direct: tx counts one copy per peer
        for r in ranks:
            tx, rx = r[name]["predicted"]
            assert rx * copies == (world - 1) * tx
            assert all(c == [tx, rx, collectives] for c in r[name]["counted"]), (name, r[name]["counted"][:2], tx, rx)
    for name, twin in TWINS.items():
        assert ranks[0][name]["checksum"] == ranks[0][twin]["checksum"], f"{name} differs from {twin}"
