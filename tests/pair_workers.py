"""Workers in one process for the optimizer reference tests: ranks on threads meeting at a threading.Barrier
(a two-rank Comm, and an all-gather of any world size), seeded parameters and gradients, and a strategy trained
on every rank. Only plumbing: each test module keeps its own reference implementation.

Device-generic where a test runs on a GPU (benchmarks/gpu_acceptance.py): `ThreadComm` keeps what it gathers on
the tensors' device, and `run_workers` draws gradients on the CPU and moves them, so a CPU run and a CUDA run
start from the same numbers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch

# A rank's Comm, whichever the test brings, and what a rank's work returns.
C = TypeVar("C")
R = TypeVar("R")


class PairComm:
    """One rank of a two-rank world in one process; rank 0's buffer first in every sum and gather.

    Every collective is recorded in `calls` as (step, (kind, bytes)), `step` being whatever the worker set
    last (a step index, or a label such as "finish")."""

    world_size = 2

    def __init__(self, rank: int, shared: dict):
        self.rank, self.shared, self.step = rank, shared, -1
        self.calls: list[tuple[object, tuple[str, int]]] = []

    def _exchange(self, t: torch.Tensor) -> list[torch.Tensor]:
        self.shared[self.rank] = t.clone()
        self.shared["barrier"].wait()
        both = [self.shared[0], self.shared[1]]
        self.shared["barrier"].wait()  # neither rank overwrites its slot before the other has read it
        return both

    def all_reduce(self, t: torch.Tensor) -> torch.Tensor:
        a, b = self._exchange(t)
        t.copy_(a + b)
        self.calls.append((self.step, ("all_reduce", t.numel() * t.element_size())))
        return t

    def all_gather(self, t: torch.Tensor) -> list[torch.Tensor]:
        self.calls.append((self.step, ("all_gather", t.numel() * t.element_size())))
        return self._exchange(t)


def initial(shapes: dict[str, tuple[int, ...]], seed: int = 0) -> list[torch.Tensor]:
    """The parameters both workers (and the reference) start from, one tensor per shape."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g) for s in shapes.values()]


def grads(shapes: dict[str, tuple[int, ...]], rank: int, step: int) -> list[torch.Tensor]:
    """This rank's gradient at this step: different per rank and step, the same on every call."""
    g = torch.Generator().manual_seed(100 * rank + step)
    return [torch.randn(s, generator=g) for s in shapes.values()]


def run_threads(world: int, work: Callable[[int], R], barrier: threading.Barrier) -> dict[int, R]:
    """Run work(rank) for ranks 0 .. world - 1, each on its own thread; return their results by rank.

    The first exception raised in a thread is re-raised here; it aborts `barrier` (the one the ranks' collectives
    meet at) so that the peers, waiting in a collective, fail too instead of hanging."""
    out: dict[int, R] = {}
    errors: list[BaseException] = []

    def run(rank: int) -> None:
        try:
            out[rank] = work(rank)
        except BaseException as e:  # surfaced below, after every thread has ended (pytest.fail's too)
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


class ThreadGroup:
    """`world` threads' all-gather: each puts its tensor in a slot, and all read every slot in rank order."""

    def __init__(self, world: int):
        self.world, self.slots = world, [None] * world
        self.barrier = threading.Barrier(world, timeout=60)

    def comm(self, rank: int) -> ThreadComm:
        return ThreadComm(self, rank)


class ThreadComm:
    """One rank of a ThreadGroup; `sent` counts the bytes handed to all-gathers (each call's buffer once, as a ring
    all-gather's tx; the `exchange` keyword is accepted and ignored). Buffers stay on their device: threads of one
    process share a GPU's default stream, so a clone made before the barrier is ordered before every read after it."""

    def __init__(self, group: ThreadGroup, rank: int):
        self.group, self.rank, self.world_size = group, rank, group.world
        self.sent = 0

    def all_gather(self, tensor: torch.Tensor, **_) -> list[torch.Tensor]:
        g = self.group
        self.sent += tensor.numel() * tensor.element_size()
        g.slots[self.rank] = tensor.clone()
        g.barrier.wait()
        out = [t.clone() for t in g.slots]
        g.barrier.wait()  # nobody overwrites a slot before everyone has read it
        return out

    def all_gather_async(self, tensor: torch.Tensor, **_):
        out = self.all_gather(tensor)  # done at once; the handle only hands it back

        class Done:
            def wait(self):
                return out
        return Done()


def run_workers(world: int, make: Callable[[int, ThreadComm], tuple[list[torch.Tensor], Callable[[int], object]]],
                steps: int, grad=None, device: torch.device | str = "cpu") -> list[list[torch.Tensor]]:
    """Run `make(rank, comm) -> (params, step_fn)` on `world` threads for `steps` steps, each rank its own
    gradients (random, or `grad(rank, param, noise)` where they must depend on the parameters), drawn on the CPU
    from a seed per rank and moved to `device`; returns each rank's params."""
    group = ThreadGroup(world)

    def body(rank: int) -> list[torch.Tensor]:
        params, step_fn = make(rank, group.comm(rank))
        data = torch.Generator().manual_seed(100 + rank)
        for step in range(steps):
            for p in params:
                noise = torch.randn(p.shape, generator=data).to(device)
                p.grad = noise if grad is None else grad(rank, p, noise)
            step_fn(step)
        return params

    out = run_threads(world, body, group.barrier)  # a failing rank lets the others out of the barrier
    return [out[r] for r in range(world)]


def pair_comm(rank: int, world: int, shared: dict) -> PairComm:
    return PairComm(rank, shared)


def run_group(worker: Callable[[int, C], R], world: int,
              comm_factory: Callable[[int, int, dict], C]) -> tuple[dict[int, R], dict[int, C]]:
    """Run worker(rank, comm) for `world` ranks on threads, each comm `comm_factory(rank, world, shared)` over one
    `shared` dict whose "barrier" all of them meet at; return their results and comms by rank."""
    shared: dict = {"barrier": threading.Barrier(world)}
    comms: dict[int, C] = {}

    def work(rank: int) -> R:
        comm = comms[rank] = comm_factory(rank, world, shared)
        return worker(rank, comm)

    return run_threads(world, work, shared["barrier"]), comms


def run_pair(worker: Callable[[int, PairComm], object]) -> tuple[dict[int, object], dict[int, PairComm]]:
    """Run worker(rank, comm) for ranks 0 and 1 on two threads; return their results and comms by rank."""
    return run_group(worker, 2, pair_comm)


@dataclass
class Trained:
    """One rank's run: its parameters after each step, each step's StepResult, finish()'s, and the end parameters."""

    trace: list[list[torch.Tensor]]
    results: list
    end: object
    final: list[torch.Tensor]

    @property
    def synced(self) -> list[bool]:
        return [r.synced for r in self.results]


def train_group(strategy, cfg, shapes: dict[str, tuple[int, ...]], steps: int, timer, world: int,
                comm_factory: Callable[[int, int, dict], C]) -> tuple[dict[int, Trained], dict[int, C]]:
    """Every rank builds `strategy(cfg, named params, comm, total_steps=steps)` from `initial(shapes)` and steps it
    `steps` times on `grads(shapes, rank, step)`, then finishes; comm.step labels each collective with its step (or
    "finish"). `timer` is the module under test's PhaseTimer (this helper imports nothing from distro_bench);
    `comm_factory` as for run_group."""

    def worker(rank: int, comm) -> Trained:
        params = [torch.nn.Parameter(t.clone()) for t in initial(shapes)]
        s = strategy(cfg, list(zip(shapes, params)), comm, total_steps=steps)
        clock = timer(torch.device("cpu"))
        trace, results = [], []
        for step in range(steps):
            for p, g in zip(params, grads(shapes, rank, step)):
                p.grad = g.clone()
            comm.step = step
            results.append(s.step(step, clock))
            trace.append([p.detach().clone() for p in params])
        comm.step = "finish"
        end = s.finish(clock)
        return Trained(trace, results, end, [p.detach().clone() for p in params])

    return run_group(worker, world, comm_factory)


def train_pair(strategy, cfg, shapes: dict[str, tuple[int, ...]], steps: int,
               timer) -> tuple[dict[int, Trained], dict[int, PairComm]]:
    """train_group on two ranks, each with a PairComm."""
    return train_group(strategy, cfg, shapes, steps, timer, 2, pair_comm)
