"""The model's shape (train/model.py builds it) and its parameter count by arithmetic, without torch:
reports and projections size a model from its config alone."""

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

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


def parameter_count(cfg: ModelConfig) -> int:
    """Transformer(cfg)'s parameter count, by arithmetic (no weights, no modules: instant at any size).
    Per block: two RMSNorms, wq/wk/wv/wo and SwiGLU's w1/w3/w2; around them the embedding, the final
    norm and the untied output projection."""
    d, f, v = cfg.dim, cfg.ffn_dim, cfg.vocab_size
    block = 2 * d + 4 * d * d + 3 * d * f
    return v * d + cfg.n_layers * block + d + d * v
