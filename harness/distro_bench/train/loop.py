"""The training loop of one worker, in its phases: `setup` builds what a run of one optimizer needs (process
group, model, data, optimizer, budget, the hardware profile's timeline), `step` runs one optimizer step and
makes its metric record (`away` stands in for it on a worker that sits the step out, scenario churn, and
`follow` / `begin_change` carry a change of workers into the next step), `evaluate` adds the validation (and
tuning) loss at the schedule every rank shares (and `initial_evaluation` once before the first step: the
curve's point at t = 0), `decide` holds rank 0's stop decisions for a time or target budget, and `finish` runs the strategy's final
sync and writes the `end` record. `TrainLoop.run` strings them together.

Records go to OUT/rank<R>.jsonl, one JSON line each, flushed at once, so a crash loses at most the step in
flight. A step that raises leaves no `end` record (the end record's checksum says the run completed): the
error ends the worker with a non-zero exit, which is how the coordinator learns of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import torch
from torch import nn

from distro_bench.scenario import environ
from distro_bench.scenario.budget import Budget, StopPolicy
from distro_bench.scenario.churn import ChurnPlan
from distro_bench.scenario.model import Node, Scenario
from distro_bench.scenario.optimizers import StrategyConfig
from distro_bench.scenario.timeline import compute_scale_at
from distro_bench.train import data as data_mod
from distro_bench.train import models
from distro_bench.train.churn import Change, Membership, hand_over
from distro_bench.train.comm import Comm
from distro_bench.train.distributed import (
    claim_device,
    close_process_group,
    init_process_group,
    latency_probe,
    share_decision,
    worker_ranks,
)
from distro_bench.train.liveness import Heartbeat, WireCounter
from distro_bench.train.optim import PhaseTimer, StepResult, get_strategy
from distro_bench.train.optim.base import Strategy
from distro_bench.train.projection import resolve_options

# The schedule's length before a time budget's first estimate: long enough that cosine has not started.
UNKNOWN_TOTAL_STEPS = 1_000_000

Batch = tuple[torch.Tensor, torch.Tensor]


def forward_backward(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    model.zero_grad(set_to_none=True)
    loss = models.lm_loss(model, x, y)
    loss.backward()
    return loss


def stretch_compute(seconds: float, scale: float) -> float:
    """Emulate slower hardware: after `seconds` of real compute, wait (1/scale - 1) times as long."""
    stretch = seconds * (1.0 / scale - 1.0)
    if stretch > 0:
        time.sleep(stretch)
    return max(0.0, stretch)


def param_checksum(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for _, p in sorted(model.named_parameters()):
        h.update(p.detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


@torch.no_grad()
def mean_loss(model: nn.Module, batches: list[Batch], device: torch.device) -> float:
    model.eval()
    losses = [models.lm_loss(model, x.to(device), y.to(device)).item() for x, y in batches]
    model.train()
    return sum(losses) / len(losses)


def write_record(out: TextIO | None, record: dict[str, Any]) -> None:
    """One JSON line to rank<R>.jsonl, flushed at once (a crash loses at most the step in flight)."""
    assert out is not None, "records are written inside run()"
    out.write(json.dumps(record) + "\n")
    out.flush()


def max_rss_bytes() -> int:
    """This process's peak resident memory (Linux reports ru_maxrss in KiB): memory per worker at scale."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass
class Data:
    """This rank's training shard and the held-out batches every rank shares."""

    corpus: bytes  # what was read: the text, or the token file
    unit: str  # the loss's unit in words (nats per byte, per token of tokenizer X)
    bytes_per_token: float | None  # text bytes per held-out token where the text is known (bits per byte)
    batches: data_mod.Batches
    val: list[Batch]
    tune: list[Batch]  # selection reads tune_loss, reports read val_loss


def load_data(scenario: Scenario, rank: int, world: int, seed: int) -> Data:
    spec = scenario.data
    tokens = data_mod.load_tokens(scenario)
    if tokens.held_out is not None:
        shard, held_out = data_mod.split_shard(tokens.ids, rank, world, spec.seq_len), tokens.held_out
    else:
        shard, held_out = data_mod.split(tokens.ids, spec.val_fraction, rank, world, spec.seq_len)
    tune, val = data_mod.held_out_splits(held_out)
    return Data(
        corpus=tokens.raw, unit=tokens.unit, bytes_per_token=tokens.bytes_per_token,
        batches=data_mod.train_batches(shard, spec.seq_len, spec.batch_size, seed, rank),
        val=data_mod.validation_batches(val, spec.seq_len, spec.batch_size, spec.val_batches),
        tune=data_mod.validation_batches(tune, spec.seq_len, spec.batch_size, spec.tune_batches) if spec.tune_batches else [],
    )


@dataclass
class Progress:
    """What the loop carries from one step to the next."""

    first_start: float | None = None  # perf_counter() at the first step: the budget clock's zero
    first_epoch: float | None = None  # time.time() then: the compute_schedule's clock's zero
    paused: float = 0.0  # seconds of evaluation and stop decisions: not training, so outside the budget's clock
    train_time: float = 0.0  # training seconds at the end of the latest step
    next_check: int | None = None  # the step of rank 0's next stop decision (time and target budgets)
    checksum_due: bool = False  # evaluated since the last replica checksum


@dataclass
class TrainLoop:
    """One optimizer's training in this worker. Build it with `setup`, train with `run`."""

    run_name: str
    rank: int
    world: int
    node: Node
    device: torch.device
    scale: float  # relative compute speed of this node's hardware (DISTRO_BENCH_COMPUTE_SCALE overrides)
    seed: int
    cfg: StrategyConfig
    budget: Budget
    policy: StopPolicy  # only rank 0's decisions count; every rank knows the first step
    eval_every: int
    model: nn.Module
    strategy: Strategy
    clip: float | None  # the worker clips gradients unless the strategy does it itself
    params: list[torch.nn.Parameter]  # what the worker clips
    data: Data
    comm: Comm
    timer: PhaseTimer
    wire: WireCounter | None  # the interface counters, where the backend names the interface
    heartbeat: Heartbeat
    out_dir: Path
    model_facts: dict[str, Any] = field(default_factory=dict)  # FLOPs per token and how they are known
    probe: list[float] | None = None  # calibration gathers' seconds (distributed.latency_probe)
    progress: Progress = field(default_factory=Progress)
    out: TextIO | None = None  # rank<R>.jsonl while `run` trains
    membership: Membership | None = None  # who trains at each step, with scenario churn (train/churn.py)
    detection_s: float = 0.0  # with churn: how long the others wait for a failed worker
    change: Change | None = None  # the change of workers the next step begins with

    @classmethod
    def setup(cls, scenario: Scenario, run_name: str, out_dir: Path, seed: int | None = None) -> TrainLoop:
        """Device and process group, model and optimizer, data, heartbeat, then the calibration gathers."""
        rank, world, local_rank = worker_ranks()
        node = scenario.nodes()[rank]
        scale = float(os.environ.get(environ.COMPUTE_SCALE, node.compute_scale))
        device = claim_device(node, local_rank)
        init_process_group(device, rank, world)
        comm = Comm()
        seed = scenario.train.seed if seed is None else seed
        churn = scenario.churn if scenario.churn is not None and scenario.churn.active else None
        membership = Membership(ChurnPlan(churn, world, seed), rank, world) if churn is not None else None
        budget = scenario.budget()
        model_spec = scenario.resolved_model()
        # `auto` options (DisTrO's exchange) chosen for these links
        cfg = resolve_options(scenario.optimizer_configs()[run_name], scenario.nodes(), models.model_shapes(model_spec))
        model = models.build(model_spec, seed=seed, device=device)
        flops, basis = models.flops_per_token(model_spec, scenario.data.seq_len)
        # A time budget's length is unknown until rank 0 has timed a few steps: until then the schedule
        # sees a run too long to decay (warmup is unaffected), then rank 0's estimate (shared in its decisions).
        strategy = get_strategy(cfg.type)(cfg, list(model.named_parameters()), comm,
                                          budget.expected_steps() or UNKNOWN_TOTAL_STEPS)
        clip = cfg.max_grad_norm if not getattr(strategy, "clips_gradients", False) else None
        data = load_data(scenario, rank, world, seed)
        iface = os.environ.get(environ.WIRE_IFACE)
        wire = WireCounter(iface) if iface else None
        timer = PhaseTimer(device)
        out_dir.mkdir(parents=True, exist_ok=True)
        heartbeat = Heartbeat(out_dir / f"rank{rank}.hb")
        loop = cls(run_name=run_name, rank=rank, world=world, node=node, device=device, scale=scale, seed=seed,
                   cfg=cfg, budget=budget, policy=StopPolicy(budget, scenario.train.eval_every),
                   eval_every=scenario.train.eval_every, model=model, strategy=strategy, clip=clip,
                   params=list(model.parameters()), data=data,
                   comm=comm, timer=timer, wire=wire, heartbeat=heartbeat, out_dir=out_dir,
                   model_facts={"flops_per_token": flops, "flops_basis": basis},
                   membership=membership, detection_s=churn.detection if churn is not None else 0.0)
        probe_x, probe_y = (t.to(device) for t in data.val[0])
        loop.probe = latency_probe(device, lambda: loop.calibration_work(probe_x, probe_y))
        loop.progress.next_check = loop.policy.first_check() if budget.needs_decision else None
        return loop

    def calibration_work(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """One forward and backward, stretched as in training: what precedes each calibration gather."""
        self.heartbeat.beat(-1, "calibrate")
        start = time.perf_counter()
        forward_backward(self.model, x, y)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        stretch_compute(time.perf_counter() - start, self.scale)

    def run(self) -> None:
        """start, then step and what follows it until the budget says stop, then finish and teardown."""
        with open(self.out_dir / f"rank{self.rank}.jsonl", "w", buffering=1) as self.out:
            self.start()
            steps = self.train()
            self.finish(steps)
        self.out = None
        if self.membership is not None:
            self.membership.close()
        close_process_group()

    def emit(self, record: dict[str, Any]) -> None:
        write_record(self.out, record)

    def start(self) -> None:
        """The start record; then the counters restart, so set-up and calibration count for no step."""
        cfg, corpus, probe = self.cfg, self.data.corpus, self.probe
        self.emit({"type": "start", "rank": self.rank, "node": self.node.name, "device": str(self.device),
                   "compute_scale": self.scale, "world_size": self.world, "time": time.time(),
                   "params": sum(p.numel() for p in self.model.parameters()),
                   "profile_tflops": self.node.hardware.tflops,  # the profile's peak (goodput's share of it)
                   # builtin:pydoc comes from this Python's stdlib: a container's Python may ship another text
                   "corpus_bytes": len(corpus), "corpus_sha256": hashlib.sha256(corpus).hexdigest()[:16],
                   "probe_allgather_s": sum(probe) / len(probe) if probe else None, "probe_calls_s": probe,
                   "seed": self.seed, "budget": self.budget.as_dict(), "max_grad_norm": cfg.max_grad_norm,
                   "clipped_by": None if cfg.max_grad_norm is None else ("strategy" if self.clip is None else "worker"),
                   # issue 47: the loss's unit, text bytes per token where the text is known, the model's FLOPs
                   # per token and how they are known (summary.json `loss` and `model`)
                   "loss_unit": self.data.unit, "val_bytes_per_token": self.data.bytes_per_token,
                   "flops_per_token": self.model_facts.get("flops_per_token"),
                   "flops_basis": self.model_facts.get("flops_basis")})
        self.comm.take()
        if self.wire:
            self.wire.delta()

    def train(self) -> int:
        """Steps until the budget is spent; returns how many ran."""
        step = 0
        m = self.membership
        self.initial_evaluation()
        while self.budget.max_steps is None or step < self.budget.max_steps:
            if m is not None and not m.present(step):
                stop = self.away(step)
            else:
                record, result = self.step(step)
                stop = self.between_steps(step, record, result)
                self.emit(record)
            if stop:
                break
            if m is not None:
                self.follow(m.after_step(step, self.progress.train_time))
            step += 1
        return step + 1

    def initial_evaluation(self) -> None:
        """The validation (and tuning) loss of the initial model, before the first step, written as a step
        record with step -1 (steps done 0), 0 training seconds, no tokens, bytes nor lr and no training loss:
        every method's curve starts at t = 0 from the same point (a seed's methods share their initial
        weights), so a time grid from 0 has a real first point. Outside the clock like every evaluation (the
        clock starts with step 0); its times are the moment it ended, when training starts."""
        m = self.membership
        if m is not None and not m.present(0):
            return
        record: dict[str, Any] = {
            "type": "step", "optimizer": self.run_name, "rank": self.rank, "step": -1, "seed": self.seed,
            "loss": None, "val_loss": None, "tune_loss": None, "lr": None,
            "step_time_s": 0.0, "data_s": 0.0, "compute_s": 0.0, "stretch_s": 0.0, "compress_s": 0.0,
            "comm_s": 0.0, "apply_s": 0.0, "t_start": None, "t_ready": None, "train_time_s": 0.0,
            "payload_tx_bytes": 0, "payload_rx_bytes": 0, "collectives": 0, "ring_bytes": 0.0,
            "wire_tx_bytes": None, "wire_rx_bytes": None, "tokens": 0, "param_checksum": None,
            "synced": None,  # no step: nothing synchronised (the replicas start alike: see the checksum)
            "members": len(m.members(0)) if m is not None else self.world,
        }
        self.evaluate(-1, record)
        with self.strategy.consensus():
            record["param_checksum"] = param_checksum(self.model)  # every replica starts from the same weights
        record["t_start"] = record["t_ready"] = time.time()
        self.emit(record)
        if self.wire:
            self.wire.delta()  # not the optimizer's

    def away(self, step: int) -> bool:
        """A step this worker sits out (scenario churn): no compute, nothing sent but its part in rank 0's
        stop decisions, which every rank takes. Returns whether the run stops after this step."""
        self.heartbeat.beat(step, "away")
        last = self.is_last(step)
        if last or not self.decision_due(step, self.evaluation_due(step)):
            return last
        return self.decide(step, None)

    def follow(self, change: Change | None) -> None:
        """The workers of the next step differ: a leaver says what it loses, the others train over the new
        group from the next step on (where a worker that comes back first takes over the shared state)."""
        if change is None:
            return
        if self.rank in change.left:
            lost = self.strategy.unsynced_steps()
            self.emit({"type": "churn", "event": "leave", "optimizer": self.run_name, "rank": self.rank,
                       "seed": self.seed, "step": change.step, "train_time_s": self.progress.train_time,
                       "why": "failure" if change.failure else "scheduled", "lost_steps": lost,
                       "lost_tokens": lost * self.data.batches.batch_size * self.data.batches.seq_len,
                       "members": len(change.after)})
        if self.rank in change.after:
            assert self.membership is not None
            self.comm.use(self.membership.group(change.step))
            self.change = change

    def begin_change(self, step: int) -> None:
        """Inside the first step with new workers: the survivors of a failure wait out its detection, and a
        worker that comes back takes over the shared state from the donor."""
        change, self.change = self.change, None
        if change is None or change.step != step:
            return
        if change.failure and self.rank in change.before and self.detection_s > 0:
            time.sleep(self.detection_s)  # the collective timeout that tells the others a worker is gone
        if not change.joined:
            return
        back = self.rank in change.joined
        # What crossed this worker's interface while it was away: rank 0's control messages only, if the
        # emulation is honest (a step's counters start after it)
        away_tx, away_rx = self.wire.delta() if back and self.wire else (None, None)
        assert self.membership is not None
        nbytes, seconds = hand_over(self.strategy.shared_state(), change, self.rank, self.membership.group(step))
        if back:
            self.strategy.rejoined()
        if nbytes:
            p = self.progress
            clock = time.perf_counter() - (p.first_start or 0.0) - p.paused  # an away worker's train_time is stale
            self.emit({"type": "churn", "event": "join" if back else "handover", "optimizer": self.run_name,
                       "rank": self.rank, "seed": self.seed, "step": step, "train_time_s": clock,
                       "state_bytes": nbytes, "seconds": seconds, "joined": change.joined,
                       "members": len(change.after), "away_wire_tx_bytes": away_tx, "away_wire_rx_bytes": away_rx})

    def step(self, step: int) -> tuple[dict[str, Any], StepResult]:
        """One optimizer step, timed by phase, and its metric record (losses and checksum filled in later)."""
        p = self.progress
        self.heartbeat.beat(step, "compute")
        t_start = time.time()
        step_start = time.perf_counter()
        if p.first_start is None:
            p.first_start, p.first_epoch = step_start, t_start
        if self.change is not None:
            self.begin_change(step)
        lr = self.cfg.lr_at(step, self.strategy.total_steps)
        with self.timer.phase("data"):
            x, y = (t.to(self.device, non_blocking=True) for t in self.data.batches.next())
        compute_start = time.perf_counter()
        with self.timer.phase("compute"):
            loss = forward_backward(self.model, x, y)
        # A straggler that comes and goes (hardware compute_schedule): the scale by this worker's own
        # clock since its first step (harness/distro_bench/scenario/timeline.py compute_scale_at).
        step_scale = compute_scale_at(self.scale, self.node.hardware.compute_schedule,
                                      t_start - p.first_epoch if p.first_epoch is not None else None, step)
        stretch = stretch_compute(time.perf_counter() - compute_start, step_scale)
        t_ready = time.time()
        self.heartbeat.beat(step, "communicate")
        if self.clip is not None:
            with self.timer.phase("apply"):
                torch.nn.utils.clip_grad_norm_(self.params, self.clip, foreach=True)
        result = self.strategy.step(step, self.timer) or StepResult()
        if self.pause_follows(step):
            # The clock pauses after this step (evaluation, stop decision): what the optimizer still has in
            # flight (DisTrO's overlapped exchange) is waited for here, inside the step and its comm_s, or the
            # network would carry it during the pause for free (issue 35).
            self.strategy.drain()
        phases = self.timer.take()
        c = self.comm.take()
        step_end = time.perf_counter()
        step_time = step_end - step_start
        p.train_time = step_end - p.first_start - p.paused
        wire_tx, wire_rx = self.wire.delta() if self.wire else (None, None)
        self.policy.observe(step, step_time)
        record = {
            "type": "step", "optimizer": self.run_name, "rank": self.rank, "step": step, "seed": self.seed,
            "loss": loss.item(), "val_loss": None, "tune_loss": None, "lr": lr,
            "step_time_s": step_time, "data_s": phases.get("data", 0.0),
            "compute_s": phases.get("compute", 0.0) + stretch, "stretch_s": stretch,
            "compress_s": phases.get("compress", 0.0), "comm_s": c.seconds, "apply_s": phases.get("apply", 0.0),
            # Ready to communicate = entering the first collective (after its own compress work), so
            # waiting for a slower peer's compress counts as waiting, not as communication.
            "t_start": t_start, "t_ready": c.first_call_time or t_ready, "train_time_s": p.train_time,
            "payload_tx_bytes": c.tx_bytes, "payload_rx_bytes": c.rx_bytes, "collectives": c.calls, "ring_bytes": c.ring_bytes,
            "wire_tx_bytes": wire_tx, "wire_rx_bytes": wire_rx,
            "tokens": x.numel(), "param_checksum": None, "synced": result.synced,
            # the workers present at this step (with churn fewer than the world): live progress waits for them
            "members": len(self.membership.members(step)) if self.membership is not None else self.world,
            **result.extra,
        }
        return record, result

    def between_steps(self, step: int, record: dict[str, Any], result: StepResult) -> bool:
        """Evaluation, the stop decision and the replica checksum after a step, all outside its timing and the
        budget's clock (and the wire counters). Returns whether this was the last step."""
        pause_start = time.perf_counter()
        last = self.is_last(step)
        evaluated = self.evaluation_due(step)
        if evaluated:
            self.evaluate(step, record)
        stop = last
        decided = not last and self.decision_due(step, evaluated)
        if decided:
            stop = self.decide(step, record)
        if stop and not evaluated:
            self.evaluate(step, record)
            evaluated = True
        self.check_replicas(record, result, evaluated)
        if self.wire and (evaluated or decided):
            self.wire.delta()  # evaluation and decisions are not the optimizer's: keep their bytes and seconds out
        self.progress.paused += time.perf_counter() - pause_start
        return stop

    def is_last(self, step: int) -> bool:
        return self.budget.max_steps is not None and step == self.budget.max_steps - 1

    def evaluation_due(self, step: int) -> bool:
        """Whether an evaluation follows `step` by the schedule (every `eval_every` steps, and the last)."""
        return (step + 1) % self.eval_every == 0 or self.is_last(step)

    def pause_follows(self, step: int) -> bool:
        """Whether the clock pauses after `step` (an evaluation or a stop decision: `between_steps`). Known
        before the step ends, so the step can drain what it has in flight first; an evaluation at an
        unscheduled stop follows a decision, so it is covered."""
        evaluated = self.evaluation_due(step)
        return evaluated or (not self.is_last(step) and self.decision_due(step, evaluated))

    def decision_due(self, step: int, evaluated: bool) -> bool:
        """Whether rank 0 takes a stop decision after `step` (a pure function of the step, so away workers,
        which must take part in it, know too)."""
        m = self.membership
        # A change of workers changes the step time (fewer workers, a state handover): decide again after it,
        # or a time budget's next look, set from the steps before, may come long past the budget.
        changed = m is not None and step > 0 and m.members(step) != m.members(step - 1)
        return self.budget.needs_decision and (
            step == self.progress.next_check or changed or (self.budget.target_val_loss is not None and evaluated))

    def evaluate(self, step: int, record: dict[str, Any]) -> None:
        """Validation (and tuning) loss on the parameters every replica agrees on (Strategy.consensus)."""
        self.heartbeat.beat(step, "evaluate")
        with self.strategy.consensus():
            record["val_loss"] = mean_loss(self.model, self.data.val, self.device)
            if self.data.tune:
                record["tune_loss"] = mean_loss(self.model, self.data.tune, self.device)

    def decide(self, step: int, record: dict[str, Any] | None) -> bool:
        """Rank 0's stop decision, shared with every rank (and recorded by rank 0). Returns whether to stop.
        `record` is this step's (None on an away worker, which is never rank 0)."""
        self.heartbeat.beat(step, "decide")
        p = self.progress
        mine = self.policy.decide(step, p.train_time, record["val_loss"]) if record is not None and self.rank == 0 else None
        decision = share_decision(mine, self.device)
        p.next_check = decision.next_check
        if decision.total_steps:
            self.strategy.total_steps = decision.total_steps
        if self.rank == 0:
            self.emit({"type": "decision", "optimizer": self.run_name, "rank": self.rank, "step": step,
                       "seed": self.seed, "train_time_s": p.train_time, "stop": decision.stop,
                       "next_check": decision.next_check, "total_steps": decision.total_steps,
                       "step_time_s": self.policy.step_time()})
        return decision.stop

    def check_replicas(self, record: dict[str, Any], result: StepResult, evaluated: bool) -> None:
        """Replicas agree only where the strategy synchronised (every step for AdamW/DisTrO, every H steps
        for DiLoCo): compare them at the first sync at or after each evaluation."""
        p = self.progress
        p.checksum_due = p.checksum_due or evaluated
        if p.checksum_due and result.synced:
            p.checksum_due = False
            with self.strategy.consensus():
                record["param_checksum"] = param_checksum(self.model)

    def finish(self, steps: int) -> None:
        """The strategy's final sync, then the end record."""
        # A periodic method syncs what its last local steps left pending (and an overlapped exchange still in
        # flight is applied), so the end checksums compare. A worker away at the end takes no part.
        present = self.membership is None or self.membership.present(steps - 1)
        self.heartbeat.beat(steps, "communicate")
        final = self.strategy.finish(self.timer) if present else None
        self.timer.take()
        c = self.comm.take()
        final_wire = self.wire.delta() if self.wire else (None, None)  # the final sync's bytes count like any sync's
        self.heartbeat.beat(steps, "done")
        cfg, total = self.cfg, self.strategy.total_steps
        self.emit({"type": "end", "optimizer": self.run_name, "rank": self.rank, "seed": self.seed, "time": time.time(),
                   "steps": steps, "train_time_s": self.progress.train_time, "lr_schedule_steps": total,
                   "lr_warmup_steps": cfg.warmup_steps_for(total),
                   "options": cfg.model_dump(mode="json"),  # as this run used them: `auto` choices made for its links
                   "param_checksum": param_checksum(self.model),
                   "final_sync": final is not None, "final_sync_tx_bytes": c.tx_bytes, "final_sync_rx_bytes": c.rx_bytes,
                   "final_sync_collectives": c.calls, "final_sync_comm_s": c.seconds, "final_sync_ring_bytes": c.ring_bytes,
                   "final_sync_wire_tx_bytes": final_wire[0], "final_sync_wire_rx_bytes": final_wire[1],
                   "max_rss_bytes": max_rss_bytes(), "present": present, **self.strategy.sent_statistics()})

