"""A small Llama-style decoder: RMSNorm, rotary position embeddings, SwiGLU MLP, PyTorch SDPA attention.

Reads top to bottom: norm, rotary, attention, MLP, block, model. Shapes follow Llama 2
(untied embeddings, no biases) so parameter counts line up with published models of the same size. Its config
and parameter count are in train/model_config.py, torch-free, so reports can size a model without loading torch.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from distro_bench.train.model_config import ModelConfig
from distro_bench.train.model_config import parameter_count as parameter_count  # re-exported for callers of this module


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in fp32: bf16 squares lose the small components.
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rotary_tables(head_dim: int, seq_len: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    # On the CPU even inside parameter_shapes' meta context: arange on meta runs torch's Python reference,
    # which imports torch._dynamo (1 s); the tables are small and model.to(device) moves them.
    freqs = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device="cpu") / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32, device="cpu"), freqs)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: (batch, heads, seq, head_dim); rotate interleaved pairs.
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2).type_as(x)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.head_dim = cfg.n_heads, cfg.head_dim
        self.wq = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wo = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (w(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(b, t, d))


class SwiGLU(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.w2 = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.ffn = SwiGLU(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.ffn(self.ffn_norm(x))


class Transformer(nn.Module):
    rope_cos: torch.Tensor  # buffers (register_buffer below), so the type checker knows them as tensors
    rope_sin: torch.Tensor

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        cos, sin = rotary_tables(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(self._init)
        # GPT-2 style: scale residual projections by depth so the residual stream stays O(1).
        for name, p in self.named_parameters():
            if name.endswith(("wo.weight", "w2.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.shape[1]
        x = self.tok_embeddings(tokens)
        cos, sin = self.rope_cos[:t], self.rope_sin[:t]
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.output(self.norm(x))

    def loss(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self(tokens)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def build_model(cfg: ModelConfig, seed: int, device: torch.device | str = "cpu") -> Transformer:
    """Same seed, same weights on every rank: replicas start identical without a broadcast."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Transformer(cfg)
    return model.to(device)


class _ShapesOnly(TorchFunctionMode):
    """Initialisers do nothing: on a meta tensor each runs torch's Python reference, and the first imports
    torch._dynamo, 1-1.7 s of CPU in every worker's and every run's start (issue 38). A torch function mode
    is this thread's alone, so a model built meanwhile in another thread is initialised as usual. nn.init's
    functions reach a mode as themselves (they dispatch on torch functions), the tensors' methods as methods."""

    _SKIPPED = frozenset({nn.init.normal_, nn.init.uniform_, nn.init.kaiming_uniform_, nn.init.ones_,
                          nn.init.zeros_, torch.Tensor.normal_, torch.Tensor.uniform_, torch.Tensor.fill_,
                          torch.Tensor.zero_})

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self._SKIPPED:
            return args[0] if args else (kwargs or {})["tensor"]
        return func(*args, **(kwargs or {}))


def parameter_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Parameter names and shapes without allocating the weights (for projections at 1B+ scale)."""
    with torch.device("meta"), _ShapesOnly():
        model = Transformer(cfg)
    return {n: tuple(p.shape) for n, p in model.named_parameters()}
