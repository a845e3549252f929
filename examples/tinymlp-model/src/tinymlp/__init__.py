"""A model factory for distro-bench, in its own distribution: `model: {factory: "tinymlp:build", args: {...}}`.

The protocol (docs/models-and-data.md): a callable given `vocab_size` and the scenario's `args`, returning an
`nn.Module` that maps token ids [B, T] to logits [B, T, vocab_size]. This one is Bengio et al.'s (2003) neural
probabilistic language model: the embeddings of the `context` previous tokens, concatenated, through an MLP.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class TinyMLP(nn.Module):
    def __init__(self, vocab_size: int, dim: int, context: int, hidden: int):
        super().__init__()
        self.context = context
        self.embed = nn.Embedding(vocab_size, dim)
        self.hidden = nn.Linear(context * dim, hidden)
        self.out = nn.Linear(hidden, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        b, t = tokens.shape
        x = self.embed(tokens)  # [B, T, dim]
        # Causal: position i sees tokens i-context+1 .. i (zeros before the start).
        x = F.pad(x, (0, 0, self.context - 1, 0))
        windows = x.unfold(1, self.context, 1)  # [B, T, dim, context]
        h = torch.tanh(self.hidden(windows.transpose(2, 3).reshape(b, t, -1)))
        return self.out(h)


def build(*, vocab_size: int, dim: int = 32, context: int = 8, hidden: int = 256) -> nn.Module:
    return TinyMLP(vocab_size, dim, context, hidden)
