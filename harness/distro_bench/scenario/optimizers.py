"""Option models of the shipped optimizer strategies, one class per method, and their base `StrategyConfig`.

This module imports no torch: the scenario schema, `validate`, the JSON Schema and the CLI read it, and
start in well under a second. Each strategy (harness/distro_bench/train/optim/<name>.py) takes its options from here;
each model names its strategy in `strategy`. The names are registered in pyproject.toml's entry-point group
`distro_bench.optimizers`, the one registry (harness/distro_bench/scenario/methods.py), as a plugin's are.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from distro_bench.scenario.units import no_bool_fields

# DisTrO's value codecs (harness/distro_bench/train/optim/codec.py encodes them).
ValueCodec = Literal["fp32", "bf16", "1bit"]
IndexCodec = Literal["auto", "int64", "coded"]

# Bounds past anything a run here uses: an int that sizes a loop or a buffer, or a bucket that would be 0 bytes.
MAX_STEPS = 1_000_000  # the scenario's train.steps cap
MAX_SEED = 2**32 - 1
MIN_BUCKET_MB, MAX_BUCKET_MB = 0.001, 100_000.0  # 1 KB .. 100 GB


class StrategyConfig(BaseModel):
    """Options shared by all strategies; `type` names the strategy in the registry (a registered name or an import
    path). A method's own options model subclasses this (docs/extending.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # `1e400` is not a setting
    # `topk: true` is not 1: a bool is refused wherever an option does not take one.
    @model_validator(mode="before")
    @classmethod
    def _no_bools(cls, data: Any) -> Any:
        return no_bool_fields(cls, data)
    type: str
    lr: float = Field(gt=0, le=10)
    warmup_steps: int = Field(default=0, ge=0, le=MAX_STEPS)
    # Warm-up as a fraction of the schedule's length ('5%' or 0.05), so it scales with the budget: the
    # budget's steps, or for a time budget rank 0's running estimate of them (harness/distro_bench/scenario/budget.py). Not with
    # warmup_steps.
    warmup: float | None = Field(default=None, ge=0, lt=1)
    schedule: Literal["constant", "cosine"] = "constant"
    min_lr_ratio: float = Field(default=0.1, ge=0, le=1)
    # Clip the gradient's global L2 norm to this before the update (None: no clipping). The worker clips
    # each rank's own gradient before `strategy.step`, as DeMo's trainer does, unless the strategy clips
    # itself (`clips_gradients`: AdamW clips the averaged gradient after its all-reduce, as DDP would).
    max_grad_norm: float | None = Field(default=None, gt=0)
    # Whether the method trains on over whichever workers are present when some leave (scenario `churn:`):
    # every collective over the present ones, the replicated state handed to a worker that comes back.
    follows_membership: ClassVar[bool] = False
    # The Strategy these options are for, as an import path ("pkg.module:Class"), where the registry names this
    # model rather than the Strategy (the shipped methods: so `validate` imports no torch). None: the Strategy
    # itself was registered (or named by import path), and this model is its `Config`.
    strategy: ClassVar[str | None] = None

    def churn_problem(self) -> str | None:
        """Why this configuration cannot run with workers leaving and joining (None: it can)."""
        return None if self.follows_membership else f"type {self.type} does not follow a changing set of workers"

    @field_validator("warmup", mode="before")
    @classmethod
    def _warmup_fraction(cls, v):
        hint = "write a fraction of the run like '5%' or 0.05"
        given = v
        if isinstance(v, str):
            text = v.strip()
            try:
                v = float(text[:-1]) / 100 if text.endswith("%") else float(text)
            except ValueError:
                raise ValueError(f"invalid warmup {given!r}; {hint}") from None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not 0 <= v < 1:
            if isinstance(given, str) and given.strip().endswith("%"):
                raise ValueError(f"warmup {given!r} must be from 0% to below 100% of the run")
            raise ValueError(f"warmup {given!r} is not a fraction of the run; {hint}, or give steps as "
                             f"warmup_steps: {given}")
        return v

    @model_validator(mode="after")
    def _one_warmup(self):
        if self.warmup and self.warmup_steps:
            raise ValueError("give warmup (a fraction of the run, '5%') or warmup_steps (a number of steps), not both")
        return self

    def warmup_steps_for(self, total_steps: int) -> int:
        """Warm-up steps of a schedule `total_steps` long (at least one where a fraction is set)."""
        if self.warmup:
            return max(1, round(self.warmup * total_steps))
        return self.warmup_steps

    def lr_at(self, step: int, total_steps: int) -> float:
        """Linear warmup, then constant or cosine decay to `min_lr_ratio * lr`. `step` counts from 0."""
        warmup = self.warmup_steps_for(total_steps)
        if step < warmup:
            return self.lr * (step + 1) / warmup
        if self.schedule == "constant":
            return self.lr
        progress = (step - warmup) / max(total_steps - warmup, 1)
        cos = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
        return self.lr * (self.min_lr_ratio + (1 - self.min_lr_ratio) * cos)


class InnerAdamWOptions(StrategyConfig):
    """AdamW's own options: the baseline's, and the local (inner) optimizer of DiLoCo, SparseLoCo, PowerSGD."""

    weight_decay: float = Field(default=0.1, ge=0)  # decoupled; matrices only (Llama practice)
    beta1: float = Field(default=0.9, ge=0, lt=1)
    beta2: float = Field(default=0.95, ge=0, lt=1)
    eps: float = Field(default=1e-8, gt=0)
    max_grad_norm: float | None = Field(default=1.0, gt=0)


class AdamWConfig(InnerAdamWOptions):
    type: Literal["adamw"] = "adamw"
    strategy: ClassVar[str | None] = "distro_bench.train.optim.adamw:AdamW"
    grad_dtype: Literal["fp32", "bf16"] = "fp32"
    bucket_mb: float = Field(default=25.0, ge=MIN_BUCKET_MB, le=MAX_BUCKET_MB)  # DDP's default bucket_cap_mb
    follows_membership: ClassVar[bool] = True


class DisTrOConfig(StrategyConfig):
    """Defaults are DeMo's (topk 32, chunk 64, decay 0.999, fp32 values), bucketed."""

    follows_membership: ClassVar[bool] = True

    def churn_problem(self) -> str | None:
        # An overlapped exchange is in flight across the step a worker leaves at: its aggregate would mix groups.
        return "overlap must be false with churn (an exchange in flight would span a change)" if self.overlap else None

    type: Literal["distro"] = "distro"
    strategy: ClassVar[str | None] = "distro_bench.train.optim.distro:DisTrO"
    topk: int = Field(default=32, ge=1)  # coefficients sent per chunk
    chunk: int = Field(default=64, ge=1, le=1024)  # target chunk length per dimension
    decay: float = Field(default=0.999, ge=0, lt=1)  # momentum decay (stateful only)
    values: ValueCodec = "fp32"
    state: Literal["stateful", "stateless"] = "stateful"
    bucket: bool = True
    weight_decay: float = Field(default=0.0, ge=0)  # decoupled
    # Which tensors weight decay shrinks: matrices only (norm weights are not decayed, as for AdamW here),
    # or `all` as DeMo's reference optimizer does.
    weight_decay_on: Literal["matrices", "all"] = "matrices"
    # Wire format of chunk indices: `auto` the smallest unsigned type holding a chunk index (u16 for 64x64),
    # `int64` DeMo's reference (with `values: fp32, topk: 32` it reproduces the DeMo paper's byte counts),
    # `coded` each chunk's index set as an Elias-Fano code (1.08x the information floor at topk 8 of 64x64).
    index: IndexCodec = "auto"
    # Apply step t's aggregate during step t+1 (one step stale), so the exchange hides behind compute.
    # `eager`: meanwhile step t+1 computes on the parameters with this worker's own step-t packet applied as
    # if it were the aggregate (the "eager updates" of arXiv 2502.12996), replaced by the aggregate on arrival.
    overlap: Literal[False, True, "eager"] = False
    # How buffers travel: gloo's ring all-gather (N-1 rounds), `direct` (every rank sends its buffer to
    # every peer at once: one round), or `auto` (direct where the projection model says it is faster): the
    # default, since direct measured 0.32x the ring's comm time on home-dsl (DisTrO at its best by default).
    exchange: Literal["ring", "direct", "auto"] = "auto"

    @model_validator(mode="after")
    def _topk_fits(self):
        if self.topk > self.chunk * self.chunk:
            raise ValueError(f"topk ({self.topk}) is more than the {self.chunk * self.chunk} coefficients of a "
                             f"{self.chunk}x{self.chunk} chunk; lower topk or raise chunk")
        return self


class DiLoCoConfig(InnerAdamWOptions):
    """DiLoCo (arXiv 2311.08105), as OpenDiLoCo runs it: `inner_steps` local AdamW steps at `lr`, then the
    pseudo-gradient (parameters at the last sync - now) is averaged over workers and applied by an outer
    Nesterov SGD step. Published: outer lr 0.7, momentum 0.9, H 100-500, fp32/bf16/int8 pseudo-gradients."""

    follows_membership: ClassVar[bool] = True

    type: Literal["diloco"] = "diloco"
    strategy: ClassVar[str | None] = "distro_bench.train.optim.diloco:DiLoCo"
    inner_steps: int = Field(default=100, ge=1, le=MAX_STEPS)  # H: local steps between syncs
    outer_lr: float = Field(default=0.7, gt=0, le=10)
    outer_momentum: float = Field(default=0.9, ge=0, lt=1)
    nesterov: bool = True
    # fp32/bf16: ring all-reduce in that precision; int8: each worker's pseudo-gradient quantised per tensor
    # (absmax scale) and all-gathered, since an int8 sum would overflow
    pseudo_grad: Literal["fp32", "bf16", "int8"] = "fp32"
    bucket_mb: float = Field(default=25.0, ge=MIN_BUCKET_MB, le=MAX_BUCKET_MB)  # all-reduce bucket, as AdamW's


class SparseLoCoConfig(InnerAdamWOptions):
    """SparseLoCo (arXiv 2508.15706): `inner_steps` local AdamW steps, then the pseudo-gradient goes into a
    decayed error-feedback accumulator (in place of outer momentum), whose `topk` largest entries per chunk
    of `chunk` elements are sent with 2-bit values and all-gathered; the mean of what was sent is applied
    with `outer_lr`. Published: H 15-100, 1-3% of each chunk (64 of 4096 = 1.6%), 2-bit values."""

    follows_membership: ClassVar[bool] = True

    type: Literal["sparseloco"] = "sparseloco"
    strategy: ClassVar[str | None] = "distro_bench.train.optim.sparseloco:SparseLoCo"
    inner_steps: int = Field(default=15, ge=1, le=MAX_STEPS)  # H
    outer_lr: float = Field(default=1.0, gt=0, le=10)
    error_decay: float = Field(default=0.95, ge=0, le=1)  # beta of the error-feedback accumulator
    chunk: int = Field(default=4096, ge=2, le=65536)  # elements per chunk of the flattened tensor (64 x 64)
    topk: int = Field(default=64, ge=1, le=65536)  # entries sent per chunk
    values: Literal["2bit", "fp32"] = "2bit"
    # Wire format of indices within a chunk, as DisTrO's: `auto` (u16 for 4096), `int64`, or `coded` (Elias-Fano).
    index: IndexCodec = "auto"
    quant_range: float = Field(default=6.0, gt=0)  # 2-bit bins span mean +- quant_range standard deviations

    @model_validator(mode="after")
    def _topk_fits(self):
        if self.topk > self.chunk:
            raise ValueError(f"topk ({self.topk}) is more than the {self.chunk} entries of a chunk; lower topk or raise chunk")
        return self


class PowerSGDConfig(InnerAdamWOptions):
    """PowerSGD (Vogels et al. 2019) through torch's `ddp_comm_hooks.powerSGD_hook`: rank-`rank` factors of
    each gradient matrix, error feedback and warm start, all-reduced in DDP-sized buckets; plain all-reduce
    until `start_step` (default: `start_fraction` of the run). The averaged gradient then feeds AdamW."""

    type: Literal["powersgd"] = "powersgd"
    strategy: ClassVar[str | None] = "distro_bench.train.optim.powersgd:PowerSGD"
    rank: int = Field(default=2, ge=1, le=64)  # matrix_approximation_rank; published 1-4
    start_fraction: float = Field(default=0.1, ge=0, le=1)
    start_step: int | None = Field(default=None, ge=2)  # overrides start_fraction; torch needs >= 2
    min_compression_rate: float = Field(default=2.0, ge=1)
    error_feedback: bool = True
    warm_start: bool = True
    seed: int = Field(default=0, ge=0, le=MAX_SEED)  # torch's random_seed for the first Qs: the same on every rank
    bucket_mb: float = Field(default=25.0, ge=MIN_BUCKET_MB, le=MAX_BUCKET_MB)

    def start_at(self, total_steps: int) -> int:
        """The first compressed step (torch's start_powerSGD_iter)."""
        if self.start_step is not None:
            return self.start_step
        return max(2, math.ceil(self.start_fraction * total_steps))



class MuLoCoConfig(DiLoCoConfig):
    """MuLoCo (arXiv 2505.23725): DiLoCo whose inner optimizer is Muon (momentum, then Newton-Schulz
    orthogonalisation of each 2-D update) on the hidden matrices, and AdamW on embeddings, the output head
    and norms, as the paper and Muon's authors do. The outer step and the pseudo-gradient's wire format are
    DiLoCo's (the paper: compatible with quantised pseudo-gradients and long H)."""

    type: Literal["muloco"] = "muloco"  # type: ignore[assignment]  # the discriminator names this subclass
    strategy: ClassVar[str | None] = "distro_bench.train.optim.muloco:MuLoCo"
    muon_lr: float | None = Field(default=None, gt=0, le=10)  # None: `lr` (with match_rms_adamw scaling)
    muon_momentum: float = Field(default=0.95, ge=0, lt=1)
    muon_nesterov: bool = True
    ns_steps: int = Field(default=5, ge=1, le=20)  # Newton-Schulz iterations (Keller Jordan's quintic)
    # Per-matrix lr scale: `match_rms_adamw` 0.2 * sqrt(max(rows, cols)) (Moonlight, arXiv 2502.16982: one
    # lr serves Muon and AdamW), `original` sqrt(max(1, rows / cols)) (Keller Jordan's Muon)
    muon_adjust_lr: Literal["match_rms_adamw", "original"] = "match_rms_adamw"
    # Parameter names (their first component) stepped by AdamW even though 2-D: embeddings and head
    adamw_params: tuple[str, ...] = ("tok_embeddings", "output")


class SPARTAConfig(InnerAdamWOptions):
    """SPARTA, sparse parameter averaging (Beton et al., EXO Labs, ICLR 2025 workshop, openreview stFPf3gzq1):
    every step a local AdamW step, then every worker averages the same random `fraction` of all parameters
    (indices drawn from a generator seeded alike on every rank). Published: 0.05-0.5% per step (0.1% typical);
    the replicas agree fully only after the final average (`finish`)."""

    follows_membership: ClassVar[bool] = True

    type: Literal["sparta"] = "sparta"
    strategy: ClassVar[str | None] = "distro_bench.train.optim.sparta:SPARTA"
    fraction: float = Field(default=0.001, gt=0, le=1)  # p: share of all parameters averaged per step
    seed: int = Field(default=0, ge=0, le=MAX_SEED)  # of the index generator, the same on every rank
    bucket_mb: float = Field(default=25.0, ge=MIN_BUCKET_MB, le=MAX_BUCKET_MB)  # the final full average's all-reduce buckets

    def count(self, total: int) -> int:
        """Parameters averaged per step out of `total`: round(fraction x total), at least one."""
        return max(1, min(total, round(self.fraction * total)))


class DESLOCConfig(InnerAdamWOptions):
    """DES-LOC (Iacob et al., arXiv 2505.22549): local AdamW on every worker; parameters averaged every
    `param_period` (Kx) steps, Adam's first moment every `momentum_period` (Ku), its second every
    `variance_period` (Kv), each on its own clock. Published: Ku = 3 Kx, Kv = 6 Kx (the defaults when null)."""

    type: Literal["desloc"] = "desloc"
    strategy: ClassVar[str | None] = "distro_bench.train.optim.desloc:DESLOC"
    param_period: int = Field(default=32, ge=1, le=MAX_STEPS)  # Kx
    momentum_period: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # Ku; null: 3 Kx
    variance_period: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # Kv; null: 6 Kx
    bucket_mb: float = Field(default=25.0, ge=MIN_BUCKET_MB, le=MAX_BUCKET_MB)  # all-reduce buckets, as AdamW's

    def periods(self) -> tuple[int, int, int]:
        """(Kx, Ku, Kv)."""
        kx = self.param_period
        return kx, self.momentum_period or 3 * kx, self.variance_period or 6 * kx


class StreamingDiLoCoConfig(DiLoCoConfig):
    """Streaming DiLoCo (arXiv 2501.18512): DiLoCo whose parameters are split into `fragments` (transformer
    blocks, strided: block i in fragment i mod P), each synced every H steps on a staggered clock (fragment
    p at steps where (step + 1) mod H = p H / P), so a sync sends 1/P of the model. `pseudo_grad: int8`
    emulates the paper's low-bit outer gradients (it used 4-bit E3M0 floats). Overlapping the exchange with
    compute is left out."""

    follows_membership: ClassVar[bool] = False  # fragments in flight across a change: not yet

    type: Literal["streaming-diloco"] = "streaming-diloco"  # type: ignore[assignment]  # as MuLoCo's
    strategy: ClassVar[str | None] = "distro_bench.train.optim.streaming_diloco:StreamingDiLoCo"
    fragments: int = Field(default=2, ge=1, le=1024)  # P

    @model_validator(mode="after")
    def _fragments_fit(self):
        if self.fragments > self.inner_steps:
            raise ValueError(f"fragments ({self.fragments}) is more than inner_steps ({self.inner_steps}): two "
                             f"fragments would share a sync step; lower fragments or raise inner_steps")
        return self

    def offset(self, fragment: int) -> int:
        """The step phase at which `fragment` syncs: after steps where (step + 1) mod H equals this."""
        return fragment * self.inner_steps // self.fragments

class NoLoCoConfig(InnerAdamWOptions):
    """NoLoCo (Kolehmainen et al., Gensyn, arXiv 2506.10911): `inner_steps` local AdamW steps, then no
    all-reduce: the workers split into random groups of `group_size` (a permutation drawn from a generator
    seeded alike on every rank) and each averages only within its group, through an outer momentum step
    that also pulls its outer weights toward the group's mean. Defaults: the authors' NoLoCo runs
    (github.com/jkolehm/noloco, configs noloco_mean_*: H 50, pairs, outer lr 0.7, momentum 0.5)."""

    type: Literal["noloco"] = "noloco"
    strategy: ClassVar[str | None] = "distro_bench.train.optim.noloco:NoLoCo"
    inner_steps: int = Field(default=50, ge=1, le=MAX_STEPS)  # H: local steps between gossip rounds
    outer_lr: float = Field(default=0.7, gt=0, le=10)  # beta: on the group's mean outer gradient
    outer_momentum: float = Field(default=0.5, ge=0, lt=1)  # alpha
    # gamma: the pull toward the group's mean outer weights; null: outer_lr, as the authors' code has it
    # (then only the local weights travel, one model's bytes; else the outer weights too, two)
    gamma: float | None = Field(default=None, ge=0, le=10)
    group_size: int = Field(default=2, ge=2, le=64)  # workers averaging together; the world must split evenly
    seed: int = Field(default=0, ge=0, le=MAX_SEED)  # of the group generator, the same on every rank
    bucket_mb: float = Field(default=25.0, ge=MIN_BUCKET_MB, le=MAX_BUCKET_MB)  # exchange buckets, and the final full average's

    def sent_copies(self) -> int:
        """Model-sized fp32 tensors a worker sends each peer per round: the local weights, plus the outer
        weights where gamma differs from outer_lr."""
        return 1 if self.gamma is None else 2


class StoredOptions(StrategyConfig):
    """A method's options as a run folder recorded them, read where the method's code is not installed: the
    readers (report, check, compare, export, load_run) show them as data; only `run` needs the code."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)
    code_missing: ClassVar[bool] = True
    lr: float | None = None  # type: ignore[assignment]  # as recorded; never a reason a reader refuses a run

    @model_validator(mode="before")
    @classmethod
    def _no_bools(cls, data: Any) -> Any:
        return data  # recorded values are shown as they were written


def option_names(cls: type[StrategyConfig]) -> list[str]:
    """The options a method takes (its fields but `type`), for error messages."""
    return sorted(n for n in cls.model_fields if n != "type")
