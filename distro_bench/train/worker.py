"""The training loop inside each worker process.

Started by a backend (or by torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT come
from the environment; under `distro-bench node`, DISTRO_BENCH_PLACEMENT maps it to its scenario rank) as `python -m distro_bench.train.worker --scenario S --optimizer NAME --out DIR`. It trains one
optimizer for the scenario's budget (distro_bench/scenario/budget.py: steps, tokens, training seconds or a target
loss; with a time or target budget rank 0 decides the last step for all) and writes one JSON line per
step to DIR/rank<R>.jsonl, flushed each step, so a crash loses at most the step in flight. It never
imports a backend.

Backend-provided environment: DISTRO_BENCH_WIRE_IFACE (interface whose counters are the wire bytes),
DISTRO_BENCH_TIMEOUT_S (collective timeout), DISTRO_BENCH_DIST_BACKEND (gloo|nccl),
DISTRO_BENCH_COMPUTE_SCALE (overrides the hardware profile's relative speed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from distro_bench.scenario.budget import Decision, StopPolicy
from distro_bench.scenario.model import Node, Scenario, load_scenario
from distro_bench.scenario.timeline import compute_scale_at
from distro_bench.train import data as data_mod
from distro_bench.train.comm import Comm
from distro_bench.train.model import ModelConfig, build_model, parameter_shapes
from distro_bench.train.optim import PhaseTimer, StepResult, get_strategy


class WireCounter:
    """tx/rx byte counters of one interface, read from /proc/net/dev, which shows the reader's own netns."""

    def __init__(self, iface: str):
        self.iface = iface
        self._last = self.read()

    def read(self) -> tuple[int, int]:
        with open("/proc/net/dev") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == self.iface:
                    fields = rest.split()
                    return int(fields[8]), int(fields[0])  # tx_bytes, rx_bytes
        raise RuntimeError(f"interface {self.iface} not found in /proc/net/dev")

    def delta(self) -> tuple[int, int]:
        now = self.read()
        d = (now[0] - self._last[0], now[1] - self._last[1])
        self._last = now
        return d


# Seconds between a heartbeat's liveness rewrites; the coordinator calls a rank stopped after many missed.
ALIVE_EVERY_S = 1.0


class Heartbeat:
    """Where this rank is (step, phase, time of entering it), overwritten in place so the coordinator can name
    a hung rank. A thread rewrites the same line every ALIVE_EVERY_S, so the file's mtime says the process
    still runs: a rank blocked in a collective keeps beating (the wait releases the GIL), a stopped or
    frozen one does not, and that tells the stuck rank from the peers waiting for it."""

    def __init__(self, path: Path):
        import threading

        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._line = b""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        threading.Thread(target=self._alive, name="heartbeat", daemon=True).start()

    def beat(self, step: int, phase: str) -> None:
        with self._lock:
            self._line = f"{step} {phase} {time.time():.3f}".ljust(63).encode() + b"\n"
            os.pwrite(self.fd, self._line, 0)

    def _alive(self) -> None:
        while not self._stop.wait(ALIVE_EVERY_S):
            with self._lock:
                if self._line:
                    try:
                        os.pwrite(self.fd, self._line, 0)
                    except OSError:
                        return

    def close(self) -> None:
        self._stop.set()


def heartbeat_age(path: Path) -> float | None:
    """Seconds since the rank's heartbeat file was last written (its liveness), None without one."""
    try:
        return max(0.0, time.time() - path.stat().st_mtime)
    except OSError:
        return None


def die_with_parent() -> None:
    """Linux: SIGKILL this worker when the coordinator that started it dies (a SIGKILLed CLI has no
    teardown), instead of leaving it training or blocked on its peers forever. Set only where the
    coordinator is the direct parent (DISTRO_BENCH_PARENT_PID: local and netns, not containers or torchrun)."""
    import signal

    parent = os.environ.get("DISTRO_BENCH_PARENT_PID")
    if not parent or not sys.platform.startswith("linux"):
        return
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(parent):  # it died before the request took effect
        os._exit(1)


def read_heartbeat(path: Path) -> tuple[int, str, float] | None:
    try:
        step, phase, t = path.read_text().split()
        return int(step), phase, float(t)
    except (OSError, ValueError):
        return None


# The schedule's length before a time budget's first estimate: long enough that cosine has not started.
UNKNOWN_TOTAL_STEPS = 1_000_000

# Calibration gathers per worker: scheduling delays on a busy host are heavy-tailed (1-40 ms a gather on
# 2 cores), and 20 of them put the mean within about 10% for the cost of 20 extra forward/backward passes.
PROBE_CALLS = 20


def latency_probe(device: torch.device, work, calls: int = PROBE_CALLS) -> list[float] | None:
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


def forward_backward(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    model.zero_grad(set_to_none=True)
    loss = model.loss(x, y)
    loss.backward()
    return loss


def stretch_compute(seconds: float, scale: float) -> float:
    """Emulate slower hardware: after `seconds` of real compute, wait (1/scale - 1) times as long."""
    stretch = seconds * (1.0 / scale - 1.0)
    if stretch > 0:
        time.sleep(stretch)
    return max(0.0, stretch)


def pick_device(node: Node, local_rank: int) -> torch.device:
    want = node.hardware.device
    if want == "cpu" or (want == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError(f"hardware of {node.name} asks for {want!r} but no CUDA device is visible")
    if want in ("cuda", "auto"):
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device(want)


def param_checksum(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for _, p in sorted(model.named_parameters()):
        h.update(p.detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


@torch.no_grad()
def evaluate(model: torch.nn.Module, batches, device: torch.device) -> float:
    model.eval()
    losses = [model.loss(x.to(device), y.to(device)).item() for x, y in batches]
    model.train()
    return sum(losses) / len(losses)


def _ranks() -> tuple[int, int, int]:
    """(scenario rank, world size, local rank). Under torchrun started by `distro-bench node`, torchrun's
    RANK follows its rendezvous order, not the scenario's: the agent's placement names this worker's rank."""
    from distro_bench.scenario.placement import scenario_rank

    rank = scenario_rank(dict(os.environ))
    if rank is None:
        rank = int(os.environ.get("RANK", "0"))
    return rank, int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("LOCAL_RANK", rank))


def _distributed_init(device: torch.device, rank: int, world: int) -> None:
    if world <= 1 and "MASTER_ADDR" not in os.environ:
        return
    backend = os.environ.get("DISTRO_BENCH_DIST_BACKEND") or ("nccl" if device.type == "cuda" else "gloo")
    timeout = timedelta(seconds=float(os.environ.get("DISTRO_BENCH_TIMEOUT_S", "300")))
    kwargs = {"device_id": device} if backend == "nccl" else {}
    dist.init_process_group(backend=backend, timeout=timeout, rank=rank, world_size=world, **kwargs)


def share_decision(mine: Decision | None, device: torch.device) -> Decision:
    """Rank 0's decision, on every rank: a broadcast of three float64 values that goes around `Comm`, so it
    is never counted as the optimizer's payload (distro_bench/scenario/budget.py says why that is fair)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        assert mine is not None
        return mine
    on = device if dist.get_backend() == "nccl" else torch.device("cpu")
    t = torch.tensor(mine.encode() if mine is not None else [0.0, 0.0, 0.0], dtype=torch.float64, device=on)
    dist.broadcast(t, src=0)
    return Decision.decode(t.tolist())


def train(scenario: Scenario, run_name: str, out_dir: Path, seed: int | None = None) -> None:
    rank, world, local_rank = _ranks()
    node = scenario.nodes()[rank]
    scale = float(os.environ.get("DISTRO_BENCH_COMPUTE_SCALE", node.compute_scale))
    device = pick_device(node, local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        if node.hardware.memory:
            total = torch.cuda.get_device_properties(device).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, node.hardware.memory / total), device)
    _distributed_init(device, rank, world)
    comm = Comm()

    cfg = scenario.optimizer_configs()[run_name]
    seed = scenario.train.seed if seed is None else seed
    budget = scenario.budget()
    eval_every = scenario.train.eval_every
    from distro_bench.train.projection import (
        resolve_options,  # `auto` options (DisTrO's exchange) chosen for these links
    )
    cfg = resolve_options(cfg, scenario.nodes(), parameter_shapes(ModelConfig(**scenario.resolved_model())))
    model = build_model(ModelConfig(**scenario.resolved_model()), seed=seed, device=device)
    # A time budget's length is unknown until rank 0 has timed a few steps: until then the schedule
    # sees a run too long to decay (warmup is unaffected), then rank 0's estimate (shared in its decisions).
    strategy = get_strategy(cfg.type)(cfg, list(model.named_parameters()), comm,
                                      budget.expected_steps() or UNKNOWN_TOTAL_STEPS)
    clip = cfg.max_grad_norm if not getattr(strategy, "clips_gradients", False) else None
    tensors = [p for p in model.parameters()]

    d = scenario.data
    corpus = data_mod.load_corpus(scenario.corpus_path())
    tokens = data_mod.encode(corpus)
    shard, held_out = data_mod.split(tokens, d.val_fraction, rank, world, d.seq_len)
    tune, val = data_mod.held_out_splits(held_out)  # selection reads tune_loss, reports read val_loss
    batches = data_mod.train_batches(shard, d.seq_len, d.batch_size, seed, rank)
    val_batches = data_mod.validation_batches(val, d.seq_len, d.batch_size, d.val_batches)
    tune_batches = data_mod.validation_batches(tune, d.seq_len, d.batch_size, d.tune_batches) if d.tune_batches else []

    iface = os.environ.get("DISTRO_BENCH_WIRE_IFACE")
    wire = WireCounter(iface) if iface else None
    timer = PhaseTimer(device)
    out_dir.mkdir(parents=True, exist_ok=True)
    heartbeat = Heartbeat(out_dir / f"rank{rank}.hb")

    probe_x, probe_y = (t.to(device) for t in val_batches[0])

    def probe_work() -> None:
        heartbeat.beat(-1, "calibrate")
        start = time.perf_counter()
        forward_backward(model, probe_x, probe_y)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        stretch_compute(time.perf_counter() - start, scale)

    probe = latency_probe(device, probe_work)
    policy = StopPolicy(budget, eval_every)  # only rank 0's decisions count; every rank knows the first step
    next_check = policy.first_check() if budget.needs_decision else None
    with open(out_dir / f"rank{rank}.jsonl", "w", buffering=1) as out:
        def emit(record: dict) -> None:
            out.write(json.dumps(record) + "\n")
            out.flush()

        def validate(record: dict) -> None:
            """Validation (and tuning) loss on the parameters every replica agrees on (Strategy.consensus)."""
            with strategy.consensus():
                record["val_loss"] = evaluate(model, val_batches, device)
                if tune_batches:
                    record["tune_loss"] = evaluate(model, tune_batches, device)

        emit({"type": "start", "rank": rank, "node": node.name, "device": str(device), "compute_scale": scale,
              "world_size": world, "time": time.time(), "params": sum(p.numel() for p in model.parameters()),
              # builtin:pydoc comes from this Python's stdlib: a container's Python may ship another text
              "corpus_bytes": len(corpus), "corpus_sha256": hashlib.sha256(corpus).hexdigest()[:16],
              "probe_allgather_s": sum(probe) / len(probe) if probe else None, "probe_calls_s": probe,
              "seed": seed, "budget": budget.as_dict(), "max_grad_norm": cfg.max_grad_norm,
              "clipped_by": None if cfg.max_grad_norm is None else ("strategy" if clip is None else "worker")})
        comm.take()
        if wire:
            wire.delta()
        checksum_due = False
        first_start = first_epoch = None
        paused = 0.0  # seconds of evaluation and stop decisions: not training, so outside the budget's clock
        step = 0
        while budget.max_steps is None or step < budget.max_steps:
            heartbeat.beat(step, "compute")
            t_start = time.time()
            step_start = time.perf_counter()
            if first_start is None:
                first_start, first_epoch = step_start, t_start
            lr = cfg.lr_at(step, strategy.total_steps)
            with timer.phase("data"):
                x, y = (t.to(device, non_blocking=True) for t in batches.next())
            compute_start = time.perf_counter()
            with timer.phase("compute"):
                loss = forward_backward(model, x, y)
            # A straggler that comes and goes (hardware compute_schedule): the scale by this worker's own
            # clock since its first step (distro_bench/scenario/timeline.py compute_scale_at).
            step_scale = compute_scale_at(scale, node.hardware.compute_schedule,
                                          t_start - first_epoch if first_epoch is not None else None, step)
            stretch = stretch_compute(time.perf_counter() - compute_start, step_scale)
            t_ready = time.time()
            heartbeat.beat(step, "communicate")
            if clip is not None:
                with timer.phase("apply"):
                    torch.nn.utils.clip_grad_norm_(tensors, clip, foreach=True)
            result = strategy.step(step, timer) or StepResult()
            phases = timer.take()
            c = comm.take()
            step_end = time.perf_counter()
            step_time = step_end - step_start
            train_time = step_end - first_start - paused
            wire_tx, wire_rx = wire.delta() if wire else (None, None)
            policy.observe(step, step_time)
            record = {
                "type": "step", "optimizer": run_name, "rank": rank, "step": step, "seed": seed,
                "loss": loss.item(), "val_loss": None, "tune_loss": None, "lr": lr,
                "step_time_s": step_time, "data_s": phases.get("data", 0.0),
                "compute_s": phases.get("compute", 0.0) + stretch, "stretch_s": stretch,
                "compress_s": phases.get("compress", 0.0), "comm_s": c.seconds, "apply_s": phases.get("apply", 0.0),
                # Ready to communicate = entering the first collective (after its own compress work), so
                # waiting for a slower peer's compress counts as waiting, not as communication.
                "t_start": t_start, "t_ready": c.first_call_time or t_ready, "train_time_s": train_time,
                "payload_tx_bytes": c.tx_bytes, "payload_rx_bytes": c.rx_bytes, "collectives": c.calls, "ring_bytes": c.ring_bytes,
                "wire_tx_bytes": wire_tx, "wire_rx_bytes": wire_rx,
                "tokens": x.numel(), "param_checksum": None, "synced": result.synced,
                **result.extra,
            }
            pause_start = time.perf_counter()
            last = budget.max_steps is not None and step == budget.max_steps - 1
            evaluated = (step + 1) % eval_every == 0 or last
            if evaluated:
                heartbeat.beat(step, "evaluate")
                validate(record)
            stop = last
            decided = not last and budget.needs_decision and (
                step == next_check or (budget.target_val_loss is not None and evaluated))
            if decided:
                heartbeat.beat(step, "decide")
                mine = policy.decide(step, train_time, record["val_loss"]) if rank == 0 else None
                decision = share_decision(mine, device)
                stop, next_check = decision.stop, decision.next_check
                if decision.total_steps:
                    strategy.total_steps = decision.total_steps
                if rank == 0:
                    emit({"type": "decision", "optimizer": run_name, "rank": rank, "step": step, "seed": seed,
                          "train_time_s": train_time, "stop": decision.stop, "next_check": decision.next_check,
                          "total_steps": decision.total_steps, "step_time_s": policy.step_time()})
            if stop and not evaluated:
                heartbeat.beat(step, "evaluate")
                validate(record)
                evaluated = True
            # Replicas agree only where the strategy synchronised (every step for AdamW/DisTrO, every H
            # steps for DiLoCo): compare them at the first sync at or after each evaluation.
            checksum_due = checksum_due or evaluated
            if checksum_due and result.synced:
                checksum_due = False
                with strategy.consensus():
                    record["param_checksum"] = param_checksum(model)
            if wire and (evaluated or decided):
                wire.delta()  # evaluation and decisions are not the optimizer's: keep their bytes and seconds out
            paused += time.perf_counter() - pause_start
            emit(record)
            if stop:
                break
            step += 1
        # A periodic method syncs what its last local steps left pending (and an overlapped exchange still in
        # flight is applied), so the end checksums compare.
        heartbeat.beat(step + 1, "communicate")
        final = strategy.finish(timer)
        timer.take()
        c = comm.take()
        final_wire = wire.delta() if wire else (None, None)  # the final sync's bytes count like any sync's
        heartbeat.beat(step + 1, "done")
        emit({"type": "end", "optimizer": run_name, "rank": rank, "seed": seed, "time": time.time(),
              "steps": step + 1, "train_time_s": train_time, "lr_schedule_steps": strategy.total_steps,
              "lr_warmup_steps": cfg.warmup_steps_for(strategy.total_steps),
              "options": cfg.model_dump(mode="json"),  # as this run used them: `auto` choices made for its links
              "param_checksum": param_checksum(model),
              "final_sync": final is not None, "final_sync_tx_bytes": c.tx_bytes, "final_sync_rx_bytes": c.rx_bytes,
              "final_sync_collectives": c.calls, "final_sync_comm_s": c.seconds, "final_sync_ring_bytes": c.ring_bytes,
              "final_sync_wire_tx_bytes": final_wire[0], "final_sync_wire_rx_bytes": final_wire[1],
              "max_rss_bytes": max_rss_bytes()})
    if dist.is_initialized():
        dist.destroy_process_group()


def max_rss_bytes() -> int:
    """This process's peak resident memory (Linux reports ru_maxrss in KiB): memory per worker at scale."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m distro_bench.train.worker", description=__doc__.split("\n")[0])
    p.add_argument("--scenario", required=True, help="resolved scenario.yaml")
    p.add_argument("--optimizer", required=True, help="optimizer run name in the scenario")
    p.add_argument("--out", required=True, help="folder for rank<R>.jsonl")
    p.add_argument("--seed", type=int, default=None, help="seed of this repeat (default: the scenario's train.seed)")
    args = p.parse_args(argv)
    die_with_parent()
    torch.set_num_threads(int(os.environ.get("DISTRO_BENCH_THREADS", torch.get_num_threads())))
    train(load_scenario(args.scenario), args.optimizer, Path(args.out), seed=args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
