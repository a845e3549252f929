"""The built-in model's config (train/model.py builds it). Its parameter count and shapes are read from the model
itself on the meta device (train/models.py), never from a second formula."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    dim: int
    n_layers: int
    n_heads: int
    ffn_dim: int  # SwiGLU hidden size (Llama uses ~8/3 * dim, rounded)
    vocab_size: int = 256  # byte-level tokens: nothing to download
    max_seq_len: int = 512
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    n_kv_heads: int | None = None  # grouped-query attention (Llama 3); None: one k/v head per query head

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads
