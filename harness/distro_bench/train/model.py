"""A small Llama-style decoder: RMSNorm, rotary position embeddings, SwiGLU MLP, PyTorch SDPA attention.

Reads top to bottom: norm, rotary, attention, MLP, block, model. Shapes follow Llama 2
(untied embeddings, no biases) so parameter counts line up with published models of the same size; `n_kv_heads`
below `n_heads` gives Llama 3's grouped-query attention. It is the registry's `llama` (train/models.py), built
through the same protocol as a user's factory; its shapes are read from the module on the meta device.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from distro_bench.train.model_config import ModelConfig


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
        self.n_kv_heads = cfg.n_kv_heads or cfg.n_heads
        kv_dim = self.head_dim * self.n_kv_heads
        self.wq = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wk = nn.Linear(cfg.dim, kv_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, kv_dim, bias=False)
        self.wo = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q = self.wq(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k, v = (w(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2) for w in (self.wk, self.wv))
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if self.n_kv_heads != self.n_heads:  # grouped-query attention: each k/v head serves a group of q heads
            k, v = (z.repeat_interleave(self.n_heads // self.n_kv_heads, dim=1) for z in (k, v))
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

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token: 6 per weight of every matrix product (the embedding lookup is none) plus
        attention's scores and weighted sum, 12 x layers x dim x seq_len (PaLM, arXiv 2204.02311, appendix B)."""
        matmul = sum(p.numel() for n, p in self.named_parameters() if p.dim() == 2 and not n.startswith("tok_"))
        return 6.0 * matmul + 12.0 * self.cfg.n_layers * self.cfg.dim * seq_len


def build_model(cfg: ModelConfig, seed: int, device: torch.device | str = "cpu") -> Transformer:
    """Same seed, same weights on every rank: replicas start identical without a broadcast."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Transformer(cfg)
    return model.to(device)


class ShapesOnly(TorchFunctionMode):
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


def llama(*, vocab_size: int, dim: int, n_layers: int, n_heads: int, ffn_dim: int, max_seq_len: int = 512,
          rope_theta: float = 10000.0, norm_eps: float = 1e-5, n_kv_heads: int | None = None) -> Transformer:
    """The registry's `llama` factory (train/models.py): the protocol's signature over ModelConfig."""
    return Transformer(ModelConfig(dim=dim, n_layers=n_layers, n_heads=n_heads, ffn_dim=ffn_dim, vocab_size=vocab_size,
                                   max_seq_len=max_seq_len, rope_theta=rope_theta, norm_eps=norm_eps,
                                   n_kv_heads=n_kv_heads))


def parameter_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Parameter names and shapes without allocating the weights (for projections at 1B+ scale)."""
    with torch.device("meta"), ShapesOnly():
        model = Transformer(cfg)
    return {n: tuple(p.shape) for n, p in model.named_parameters()}
