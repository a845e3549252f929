"""Option models of every optimizer strategy, one class per method, and the registry of their names.

This module imports no torch: the scenario schema, `validate`, the JSON Schema and the CLI read it, and
start in well under a second. Each strategy (harness/optim/<name>.py) takes its options from here.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# DisTrO's value codecs (harness/optim/codec.py encodes them).
ValueCodec = Literal["fp32", "bf16", "1bit"]
IndexCodec = Literal["auto", "int64"]

class StrategyConfig(BaseModel):
    """Options shared by all strategies; `type` names the strategy in the registry."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    type: str
    lr: float = Field(gt=0, le=10)
    warmup_steps: int = Field(default=0, ge=0)
    schedule: Literal["constant", "cosine"] = "constant"
    min_lr_ratio: float = Field(default=0.1, ge=0, le=1)
    # Clip the gradient's global L2 norm to this before the update (None: no clipping). The worker clips
    # each rank's own gradient before `strategy.step`, as DeMo's trainer does, unless the strategy clips
    # itself (`clips_gradients`: AdamW clips the averaged gradient after its all-reduce, as DDP would).
    max_grad_norm: float | None = Field(default=None, gt=0)

    def lr_at(self, step: int, total_steps: int) -> float:
        """Linear warmup, then constant or cosine decay to `min_lr_ratio * lr`. `step` counts from 0."""
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        if self.schedule == "constant":
            return self.lr
        progress = (step - self.warmup_steps) / max(total_steps - self.warmup_steps, 1)
        cos = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
        return self.lr * (self.min_lr_ratio + (1 - self.min_lr_ratio) * cos)


class AdamWConfig(StrategyConfig):
    type: Literal["adamw"] = "adamw"
    weight_decay: float = Field(default=0.1, ge=0)
    beta1: float = Field(default=0.9, ge=0, lt=1)
    beta2: float = Field(default=0.95, ge=0, lt=1)
    eps: float = Field(default=1e-8, gt=0)
    grad_dtype: Literal["fp32", "bf16"] = "fp32"
    bucket_mb: float = Field(default=25.0, gt=0)  # DDP's default bucket_cap_mb
    max_grad_norm: float | None = Field(default=1.0, gt=0)


class DisTrOConfig(StrategyConfig):
    """Defaults are DeMo's (topk 32, chunk 64, decay 0.999, fp32 values), bucketed."""

    type: Literal["distro"] = "distro"
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
    # `int64` DeMo's reference (with `values: fp32, topk: 32` it reproduces the DeMo paper's byte counts).
    index: IndexCodec = "auto"
    # Apply step t's aggregate during step t+1 (one step stale), so the exchange hides behind compute.
    overlap: bool = False
    # How buffers travel: gloo's ring all-gather (N-1 rounds), `direct` (every rank sends its buffer to
    # every peer at once: one round), or `auto` (direct where the projection model says it is faster).
    exchange: Literal["ring", "direct", "auto"] = "ring"

    @model_validator(mode="after")
    def _topk_fits(self):
        if self.topk > self.chunk * self.chunk:
            raise ValueError(f"topk ({self.topk}) is more than the {self.chunk * self.chunk} coefficients of a "
                             f"{self.chunk}x{self.chunk} chunk; lower topk or raise chunk")
        return self


OPTIONS: dict[str, type[StrategyConfig]] = {
    "adamw": AdamWConfig,
    "distro": DisTrOConfig,
}
