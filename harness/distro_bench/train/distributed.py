"""A worker's place in the run: its ranks, its device, the process group, and the two exchanges that go
around `Comm` (so they are never counted as the optimizer's payload): rank 0's stop decisions and the
calibration gathers."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from distro_bench.scenario import environ
from distro_bench.scenario.budget import Decision
from distro_bench.scenario.model import Node
from distro_bench.scenario.placement import scenario_rank
from distro_bench.scenario.timeouts import COLLECTIVE_TIMEOUT_ENV, HostLoad

# Calibration gathers per worker: scheduling delays on a busy host are heavy-tailed (1-40 ms a gather on
# 2 cores), and 20 of them put the mean within about 10% for the cost of 20 extra forward/backward passes.
PROBE_CALLS = 20


def worker_ranks() -> tuple[int, int, int]:
    """(scenario rank, world size, local rank). Under torchrun started by `distro-bench node`, torchrun's
    RANK follows its rendezvous order, not the scenario's: the agent's placement names this worker's rank."""
    rank = scenario_rank(dict(os.environ))
    if rank is None:
        rank = int(os.environ.get("RANK", "0"))
    return rank, int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("LOCAL_RANK", rank))


def pick_device(node: Node, local_rank: int) -> torch.device:
    want = node.hardware.device
    if want == "cpu" or (want == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError(f"hardware of {node.name} asks for {want!r} but no CUDA device is visible")
    if want in ("cuda", "auto"):
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device(want)


def claim_device(node: Node, local_rank: int) -> torch.device:
    """The node's device, made current; on CUDA capped at the hardware profile's memory."""
    device = pick_device(node, local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        if node.hardware.memory:
            total = torch.cuda.get_device_properties(device).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, node.hardware.memory / total), device)
    return device


def collective_timeout_s() -> float:
    """The collective (and rendezvous) timeout the coordinator gave this worker, already scaled to its host
    (scenario/timeouts.py Timeouts): every launcher sets it, so a worker without it was started by hand."""
    raw = os.environ.get(COLLECTIVE_TIMEOUT_ENV)
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        value = None
    if value is None or not value > 0 or value == float("inf"):
        raise RuntimeError(f"{COLLECTIVE_TIMEOUT_ENV}: {raw!r} is not valid; the coordinator sets it to the collective "
                           "timeout in seconds (a number above 0): start workers through `distro-bench run` or "
                           "`distro-bench node`, or set it yourself")
    return value


def init_process_group(device: torch.device, rank: int, world: int) -> None:
    """The default process group, unless this worker trains alone (world 1, no MASTER_ADDR)."""
    if world <= 1 and "MASTER_ADDR" not in os.environ:
        return
    backend = os.environ.get(environ.DIST_BACKEND) or ("nccl" if device.type == "cuda" else "gloo")
    timeout = timedelta(seconds=collective_timeout_s())
    kwargs: dict[str, Any] = {"device_id": device} if backend == "nccl" else {}
    try:
        store = rendezvous_store(rank, world, timeout)
        if store is not None:
            kwargs["store"] = store
        dist.init_process_group(backend=backend, timeout=timeout, rank=rank, world_size=world, **kwargs)
    except dist.DistError as e:  # the rendezvous ran out of time (the store, or connecting to it): what, how long, and how busy the host was
        where = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
        raise RuntimeError(f"rank {rank}: the rendezvous of {world} ranks at {where} did not complete in "
                           f"{timeout.total_seconds():.0f}s ({HostLoad.now().describe()}): {e}") from e


def rendezvous_store(rank: int, world: int, timeout: timedelta) -> dist.TCPStore | None:
    """The run's c10d store, rank 0 serving it on MASTER_ADDR only. torch's env:// rendezvous has rank 0 listen
    on every interface (`*:MASTER_PORT`, unauthenticated: anyone who reaches the host could join or poison the
    group); here rank 0 binds a socket to MASTER_ADDR itself and hands it to the store (`master_listen_fd`):
    loopback for the local backend, the node's own address in its namespace or container for netns and docker.
    None (torch's own rendezvous) under torchrun, whose agent serves the store (`distro-bench node`)."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" or "MASTER_ADDR" not in os.environ:
        return None
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    if rank != 0:
        return dist.TCPStore(host, port, world, False, timeout, multi_tenant=True)
    family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(addr)
        listener.listen(512)
    except OSError:
        listener.close()
        raise
    # The store owns the descriptor from here (it closes it when the store goes).
    return dist.TCPStore(host, port, world, True, timeout, multi_tenant=True, master_listen_fd=listener.detach())


def close_process_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def share_decision(mine: Decision | None, device: torch.device) -> Decision:
    """Rank 0's decision, on every rank: a broadcast of three float64 values that goes around `Comm`, so it
    is never counted as the optimizer's payload (harness/distro_bench/scenario/budget.py says why that is fair)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        assert mine is not None
        return mine
    on = device if dist.get_backend() == "nccl" else torch.device("cpu")
    t = torch.tensor(mine.encode() if mine is not None else [0.0, 0.0, 0.0], dtype=torch.float64, device=on)
    dist.broadcast(t, src=0)
    return Decision.decode(t.tolist())


def latency_probe(device: torch.device, work: Callable[[], None], calls: int = PROBE_CALLS) -> list[float] | None:
    """Seconds per all-gather of 8 bytes (N-1 ring rounds of nearly nothing), measured as a training step
    measures communication: from the last rank's entry into the collective to this rank's exit.

    Each call follows `work()` (one forward and backward of the run's model, stretched as the hardware
    profile says), so the host is as busy as in training: where workers outnumber cores, a rank that has
    finished its collective computes while a peer still waits for its turn on a core, and that
    scheduling cost is part of every ring round. Run before training and outside the byte counters; it
    calibrates the projection model's per-round overhead for this run's report. The per-call figures are
    returned so the run can say how noisy they were."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return None
    world = dist.get_world_size()
    entry = torch.zeros(1, dtype=torch.float64, device=device)
    out = [torch.empty_like(entry) for _ in range(world)]
    for _ in range(3):
        dist.all_gather(out, entry)
    dist.barrier()
    times = []
    for _ in range(calls):
        work()
        # Wall clock (shared by the ranks of one host, NTP-close across hosts): each rank's entry time
        # travels in the gather itself, so every rank knows when the last one arrived.
        entry.fill_(time.time())
        dist.all_gather(out, entry)
        if device.type == "cuda":  # NCCL returns before the gather ends
            torch.cuda.synchronize(device)
        done = time.time()
        times.append(max(0.0, done - max(float(t) for t in out)))
    return times
