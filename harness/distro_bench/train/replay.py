"""Replay (issue 34, harness/distro_bench/scenario/replay.py): a worker that trains nothing and performs, step by
step, the messages the byte model predicts for its method (a byte replay: synthetic contents, the codec timed
apart), over the real links.

Each step: the compute its hardware profile gives (6 x parameters x tokens / (tflops x mfu); slept unless
`wait_compute: false`), then the method's codec seconds (measured on this CPU when the run opened, or stated),
then the step's collectives (`Strategy.predict_step`, the list the byte prediction reads, at the scenario's
`fraction` of their bytes), as buffers of those sizes with synthetic contents, through `Comm`, which counts
their payload as in training; the interface counters count the wire. An overlapped method (DisTrO's `overlap`)
launches its gathers and waits for them after the next step's compute, as it does in training.

Records are the training loop's (rank<R>.jsonl: start, step, end) with no loss; the start record says
`mode: replay` and what the compute, codec and fraction were.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import torch

from distro_bench.scenario import environ
from distro_bench.scenario.model import Node, Scenario
from distro_bench.scenario.optimizers import StrategyConfig
from distro_bench.scenario.replay import MEASURE, ReplaySpec
from distro_bench.train.comm import Comm, PendingGather
from distro_bench.train.distributed import close_process_group, init_process_group, worker_ranks
from distro_bench.train.liveness import Heartbeat, WireCounter
from distro_bench.train.loop import max_rss_bytes, write_record
from distro_bench.train.models import model_shapes
from distro_bench.train.optim import Collective, PhaseTimer, get_strategy
from distro_bench.train.optim.base import Strategy, scaled
from distro_bench.train.projection import compute_seconds

Shapes = dict[str, tuple[int, ...]]


def compute_seconds_of(node: Node, params: int, tokens: int, mfu: float) -> float:
    """A step's compute on this node's profile: the projection's compute model for this one node."""
    seconds = compute_seconds(params, tokens, [node], mfu)
    if seconds is None:
        raise ValueError(f"hardware {node.hardware_name!r} has no tflops: a replay takes its compute from them")
    return seconds


# ---- the codec measured on this CPU (at run open, in the coordinator) ----------------------------------------

CODEC_SAMPLE_PARAMS = 1 << 23  # 8.4M parameters of the model's own shapes: seconds on one core


def codec_sample(shapes: Shapes, budget: int = CODEC_SAMPLE_PARAMS) -> Shapes:
    """A sample of the model's own tensors (in its order) holding at most `budget` parameters; the smallest
    matrix when none fits. Whole tensors, so the codec's chunking and bucketing see real shapes."""
    out: Shapes = {}
    total = 0
    for name, shape in shapes.items():
        n = math.prod(shape)
        if total + n <= budget:
            out[name], total = shape, total + n
    if not out:
        name = min(shapes, key=lambda k: math.prod(shapes[k]))
        out[name] = shapes[name]
    return out


def measure_codec_s(cfg: StrategyConfig, shapes: Shapes, world_size: int) -> tuple[float, int]:
    """(seconds a step, parameters sampled): the strategy's own encode and decode work (its `compress` and
    `apply` phases) over one period on a sample of the model's tensors, in one process (its collectives with
    itself), scaled to the whole model by parameter count. One warm-up step first. The decode of the N-1 peers'
    payloads is not in it (a process alone receives none): a lower bound for a gather-decoding method."""
    sample = codec_sample(shapes)
    sampled = sum(math.prod(s) for s in sample.values())
    total = sum(math.prod(s) for s in shapes.values())
    gen = torch.Generator().manual_seed(0)
    params = [(n, torch.nn.Parameter(torch.randn(s, generator=gen) * 0.02)) for n, s in sample.items()]
    strategy_cls = get_strategy(cfg.type)
    period = strategy_cls.predict_period(cfg, sample, world_size).steps
    steps = 1 + (period if period > 1 else 5)  # a periodic method's whole period; a per-step one's median of 5
    strategy = strategy_cls(cfg, params, Comm(), steps)
    timer = PhaseTimer(torch.device("cpu"))
    seconds = []
    for step in range(steps):
        for _, p in params:
            p.grad = torch.randn(p.shape, generator=gen) * 1e-3
        strategy.step(step, timer)
        phases = timer.take()
        if step > 0:  # the first builds the strategy's buffers
            seconds.append(phases.get("compress", 0.0) + phases.get("apply", 0.0))
    per_step = sum(seconds) / period if period > 1 else statistics.median(seconds)
    return per_step * total / sampled, sampled


def host_matmul_flops(seconds: float = 0.3) -> float:
    """This CPU's fp32 matrix-product throughput (FLOP/s), as torch runs it with its current threads: the yardstick
    a codec time measured here is carried to a hardware profile's TFLOPS with."""
    a = torch.randn(512, 512)
    b = torch.randn(512, 512)
    a @ b  # warm-up
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        a @ b
        done += 1
    return done * 2 * 512**3 / elapsed


def resolve_codecs(scenario: Scenario, note=lambda text: None) -> Scenario:
    """The scenario with every `codec: measure` of its replay made seconds (unchanged for a training run): the
    strategy's encode and decode timed on this CPU (measure_codec_s), carried to the slowest hardware profile by
    the ratio of this CPU's matrix-product throughput to that profile's TFLOPS x mfu. The run folder's
    scenario.yaml holds the seconds every worker waits. Matrix products are what DCT codecs spend most on; the
    memory-bound parts (top-k, scatter) gain less on a GPU, so on a GPU profile it is a lower bound."""
    spec = scenario.replay
    if spec is None:
        return scenario
    shapes = model_shapes(scenario.resolved_model())
    slowest = min(scenario.nodes(), key=lambda n: n.hardware.tflops or float("inf"))
    host_flops: float | None = None
    codec: dict[str, float | str] = {}
    for name, cfg in scenario.optimizers.items():
        given = spec.codec_of(name)
        if given != MEASURE:
            codec[name] = given
            continue
        if host_flops is None:
            host_flops = host_matmul_flops()
        cpu_s, sampled = measure_codec_s(cfg, shapes, scenario.world_size)
        tflops = slowest.hardware.tflops or 0.0
        seconds = cpu_s * host_flops / (tflops * 1e12 * spec.mfu) if tflops else cpu_s
        codec[name] = round(seconds, 9)
        note(f"replay: {name}'s encode and decode took {cpu_s:.3g} s a step on this CPU ({sampled / 1e6:.1f}M of the "
             f"model's parameters, scaled; {host_flops / 1e9:.0f} GFLOP/s in matrix products); at "
             f"{slowest.hardware_name}'s {tflops:g} TFLOPS x mfu {spec.mfu:g}: {seconds:.3g} s")
    return scenario.model_copy(update={"replay": spec.model_copy(update={"codec": codec})})


def buffer_bytes(collectives: list[Collective], world_size: int) -> int:
    """The most one worker holds at once for these collectives: an all-reduce's buffer and its copy, a gather's
    own buffer and the world's received ones (the largest collective; they run one after another)."""
    def held(c: Collective) -> int:
        return 2 * c.nbytes if c.kind == "all_reduce" else (world_size + 1) * c.nbytes
    return max((held(c) for c in collectives), default=0)


def memory_problem(scenario: Scenario, available: int | None = None) -> str | None:
    """Whether the replay's buffers fit this host: every worker's largest collective at once against the memory
    available now (/proc/meminfo). A sentence naming the optimizer and a `replay.fraction` that fits, or None."""
    if scenario.replay is None:
        return None
    if available is None:
        available = _mem_available()
        if available is None:
            return None
    shapes = model_shapes(scenario.resolved_model())
    n = scenario.world_size
    budget = 0.5 * available  # torch, gloo's own buffers and the rest of the host need the other half
    for name, cfg in scenario.optimizers.items():
        fraction = scenario.replay.fraction_of(name)
        period = get_strategy(cfg.type).predict_period(cfg, shapes, n)
        need = n * buffer_bytes(scaled(period.collectives, fraction), n)
        if need > budget:
            fits = fraction * budget / need
            return (f"replay: {name}'s buffers need {need / 1e9:.1f} GB across {n} workers at once, more than half of "
                    f"the {available / 1e9:.1f} GB this host has free; replay part of its bytes, said so in every "
                    f"output: replay.fraction.{name}: {2 ** math.floor(math.log2(fits)):g} (or fewer workers)")
    return None


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


# ---- the worker --------------------------------------------------------------------------------------------

def synthetic(nbytes: int, cache: dict[int, torch.Tensor]) -> torch.Tensor:
    """A buffer of `nbytes` bytes with fixed pseudo-random contents (what is sent does not change what it costs:
    nothing on the path compresses), made once per size."""
    if nbytes not in cache:
        cache[nbytes] = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=torch.Generator().manual_seed(nbytes))
    return cache[nbytes]


@dataclass
class ReplayLoop:
    """One optimizer's replay in this worker: `setup`, then `run`."""

    run_name: str
    rank: int
    world: int
    node: Node
    seed: int
    cfg: StrategyConfig
    spec: ReplaySpec
    strategy: type[Strategy]
    shapes: Shapes
    params: int
    tokens: int  # per worker and step
    steps: int
    compute_s: float
    codec_s: float
    fraction: float
    comm: Comm
    wire: WireCounter | None
    heartbeat: Heartbeat
    out_dir: Path
    buffers: dict[int, torch.Tensor] = field(default_factory=dict)
    pending: list[PendingGather] = field(default_factory=list)
    out: TextIO | None = None

    @classmethod
    def setup(cls, scenario: Scenario, run_name: str, out_dir: Path, seed: int | None = None) -> ReplayLoop:
        assert scenario.replay is not None, "a replay needs the scenario's replay section"
        rank, world, _ = worker_ranks()
        node = scenario.nodes()[rank]
        init_process_group(torch.device("cpu"), rank, world)  # the buffers live in host memory: gloo
        spec = scenario.replay
        cfg = scenario.optimizers[run_name]
        shapes = model_shapes(scenario.resolved_model())
        params = sum(math.prod(s) for s in shapes.values())
        tokens = scenario.data.batch_size * scenario.data.seq_len
        codec = spec.codec_of(run_name)
        steps = scenario.budget().max_steps
        assert steps is not None, "a replay runs a number of steps (scenario/replay.py replay_problems)"
        iface = os.environ.get(environ.WIRE_IFACE)
        out_dir.mkdir(parents=True, exist_ok=True)
        return cls(run_name=run_name, rank=rank, world=world, node=node,
                   seed=scenario.train.seed if seed is None else seed, cfg=cfg, spec=spec,
                   strategy=get_strategy(cfg.type), shapes=shapes, params=params, tokens=tokens, steps=steps,
                   compute_s=compute_seconds_of(node, params, tokens, spec.mfu),
                   codec_s=0.0 if isinstance(codec, str) else float(codec),  # `measure` unresolved: not timed
                   fraction=spec.fraction_of(run_name), comm=Comm(), wire=WireCounter(iface) if iface else None,
                   heartbeat=Heartbeat(out_dir / f"rank{rank}.hb"), out_dir=out_dir)

    def run(self) -> None:
        with open(self.out_dir / f"rank{self.rank}.jsonl", "w", buffering=1) as self.out:
            self.start()
            train_time = 0.0
            for step in range(self.steps):
                record = self.step(step)
                train_time += record["step_time_s"]
                record["train_time_s"] = train_time
                self.emit(record)
            self.finish(train_time)
        self.out = None
        self.heartbeat.close()
        close_process_group()

    def emit(self, record: dict[str, Any]) -> None:
        write_record(self.out, record)

    def start(self) -> None:
        self.emit({"type": "start", "mode": "replay", "optimizer": self.run_name, "rank": self.rank, "node": self.node.name, "device": "cpu",
                   "compute_scale": self.node.compute_scale, "world_size": self.world, "time": time.time(),
                   "params": self.params, "profile_tflops": self.node.hardware.tflops, "seed": self.seed,
                   "budget": {"kind": "steps", "steps": self.steps}, "max_grad_norm": None, "clipped_by": None,
                   "probe_allgather_s": None, "probe_calls_s": None,
                   "replay": {"compute_s": self.compute_s, "mfu": self.spec.mfu, "codec_s": self.codec_s,
                              "fraction": self.fraction, "compute_waited": self.spec.wait_compute,
                              "tokens_per_step": self.tokens}})
        self.comm.take()
        if self.wire:
            self.wire.delta()

    def collectives(self, step: int) -> list[Collective]:
        return scaled(self.strategy.predict_step(self.cfg, self.shapes, self.world, step, self.steps), self.fraction)

    def issue(self, collectives: list[Collective], overlap: bool) -> None:
        for c in collectives:
            buf = synthetic(c.nbytes, self.buffers)
            if c.kind == "all_reduce":
                self.comm.all_reduce(buf.clone())  # summed in place: the cache keeps its contents
                continue
            gather = self.comm.all_gather_async(buf, exchange="direct" if c.kind == "all_gather_direct" else "ring")
            if overlap:
                self.pending.append(gather)
            else:
                gather.wait()

    def drain(self) -> None:
        for p in self.pending:
            p.wait()
        self.pending = []

    def step(self, step: int) -> dict[str, Any]:
        self.heartbeat.beat(step, "compute")
        t_start = time.time()
        start = time.perf_counter()
        if self.spec.wait_compute:
            time.sleep(self.compute_s)
        overlap = bool(getattr(self.cfg, "overlap", False))
        self.heartbeat.beat(step, "communicate")
        self.drain()  # the previous step's overlapped exchange, hidden behind this step's compute where it could be
        time.sleep(self.codec_s)
        t_ready = time.time()
        collectives = self.collectives(step)
        self.issue(collectives, overlap)
        if step == self.steps - 1:
            self.drain()
        c = self.comm.take()
        step_time = time.perf_counter() - start + (0.0 if self.spec.wait_compute else self.compute_s)
        wire_tx, wire_rx = self.wire.delta() if self.wire else (None, None)
        return {
            "type": "step", "optimizer": self.run_name, "rank": self.rank, "step": step, "seed": self.seed,
            "loss": None, "val_loss": None, "tune_loss": None, "lr": None,
            "step_time_s": step_time, "data_s": 0.0, "compute_s": self.compute_s, "stretch_s": 0.0,
            "compress_s": self.codec_s, "comm_s": c.seconds, "apply_s": 0.0,
            "t_start": t_start, "t_ready": c.first_call_time or t_ready, "train_time_s": None,
            "payload_tx_bytes": c.tx_bytes, "payload_rx_bytes": c.rx_bytes, "collectives": c.calls,
            "ring_bytes": c.ring_bytes, "wire_tx_bytes": wire_tx, "wire_rx_bytes": wire_rx,
            "tokens": self.tokens, "param_checksum": None, "synced": bool(collectives), "members": self.world,
        }

    def finish(self, train_time: float) -> None:
        """A periodic method's last round, where the budget ends inside a period (as `finish()` in training)."""
        self.heartbeat.beat(self.steps, "communicate")
        final = scaled(self.strategy.predict_finish(self.cfg, self.shapes, self.world, self.steps), self.fraction)
        self.issue(final, overlap=False)
        c = self.comm.take()
        wire = self.wire.delta() if self.wire else (None, None)
        self.heartbeat.beat(self.steps, "done")
        self.emit({"type": "end", "optimizer": self.run_name, "rank": self.rank, "seed": self.seed, "time": time.time(),
                   "steps": self.steps, "train_time_s": train_time, "lr_schedule_steps": self.steps,
                   "lr_warmup_steps": 0, "options": self.cfg.model_dump(mode="json"), "param_checksum": None,
                   "final_sync": bool(final), "final_sync_tx_bytes": c.tx_bytes, "final_sync_rx_bytes": c.rx_bytes,
                   "final_sync_collectives": c.calls, "final_sync_comm_s": c.seconds,
                   "final_sync_ring_bytes": c.ring_bytes, "final_sync_wire_tx_bytes": wire[0],
                   "final_sync_wire_rx_bytes": wire[1], "max_rss_bytes": max_rss_bytes(), "present": True})
