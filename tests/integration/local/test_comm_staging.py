"""Point-to-point exchanges (DisTrO's `exchange: direct`, NoLoCo's gossip) of CUDA tensors over gloo, as four workers
sharing one GPU run: gloo's send and recv take the tensor's data pointer as host memory, so Comm stages such tensors
through the host (harness/distro_bench/train/comm.py host_staged). The CUDA case runs where a GPU is present
(benchmarks/gpu_acceptance.py's run step takes the same path); the CPU case proves the plumbing everywhere."""

from __future__ import annotations

import json
import os
import socket
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from distro_bench.train import comm as comm_mod


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, device: str, out: str) -> None:
    from distro_bench.train.comm import Comm

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    try:
        comm = Comm()
        mine = torch.full((5,), rank + 1, dtype=torch.uint8, device=device)
        gathered = comm.all_gather(mine, exchange="direct")
        pending = comm.all_gather_async(mine * 2, exchange="direct").wait()
        peers = [r for r in range(world) if r != rank]
        swapped = comm.exchange(mine.float(), peers)
        stats = comm.take()
        Path(out, f"rank{rank}.json").write_text(json.dumps({
            "gathered": [t.tolist() for t in gathered], "pending": [t.tolist() for t in pending],
            "swapped": [t.tolist() for t in swapped],
            "devices": sorted({str(t.device) for t in gathered + pending + swapped}),
            "tx": stats.tx_bytes, "rx": stats.rx_bytes,
        }))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # three spawned processes: 20-40 s on the loaded 2-core host
@pytest.mark.parametrize("device", [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                                     reason="no CUDA device visible to torch")]),
])
def test_direct_gather_and_gossip_over_gloo_arrive_on_the_tensors_device(device, tmp_path):
    world = 3
    mp.spawn(_worker, args=(world, _free_port(), device, str(tmp_path)), nprocs=world, join=True)
    for rank in range(world):
        got = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert got["gathered"] == [[r + 1] * 5 for r in range(world)]
        assert got["pending"] == [[2 * (r + 1)] * 5 for r in range(world)]
        assert got["swapped"] == [[float(r + 1)] * 5 for r in range(world) if r != rank]
        assert got["devices"] == [f"{device}:0" if device == "cuda" else "cpu"]
        # bytes as counted before staging existed: direct gathers (N-1) copies of 5 bytes each way, twice;
        # the gossip 20 bytes (5 float32) to and from each of N-1 peers
        assert got["tx"] == got["rx"] == 2 * (world - 1) * 5 + (world - 1) * 20


def test_only_cuda_tensors_over_gloo_are_staged(monkeypatch):
    cuda_like = SimpleNamespace(is_cuda=True)
    monkeypatch.setattr(comm_mod.dist, "get_backend", lambda group=None: "gloo")
    assert comm_mod.host_staged(cuda_like, None) is True
    assert comm_mod.host_staged(torch.zeros(1), None) is False
    monkeypatch.setattr(comm_mod.dist, "get_backend", lambda group=None: "nccl")
    assert comm_mod.host_staged(cuda_like, None) is False
