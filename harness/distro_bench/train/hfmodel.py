"""A Hugging Face `transformers` causal LM from its config.json, behind the model protocol (train/models.py).

`AutoModelForCausalLM.from_config` builds it offline (no weights, no hub: the config is all it needs); its output's
`.logits` are what the protocol returns. transformers is the optional extra `distro-bench[hf]`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from distro_bench.errors import InputError

INSTALL = "pip install 'distro-bench[hf]' (or: pip install transformers)"


class CausalLMLogits(nn.Module):
    """Token ids [B, T] -> logits [B, T, vocab] of a transformers causal LM (its `.logits`, no cache)."""

    def __init__(self, lm: nn.Module):
        super().__init__()
        self.lm = lm

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=tokens, use_cache=False).logits


def from_config(*, vocab_size: int, config: dict[str, Any]) -> CausalLMLogits:
    """The registry's `hf` factory: `config` is the config.json's content; `vocab_size` must be its own."""
    try:
        import transformers
    except ImportError:
        raise InputError(f"model.hf_config: a transformers model needs the transformers library: {INSTALL}") from None
    if config.get("vocab_size") != vocab_size:
        raise InputError(f"model.hf_config: its vocab_size {config.get('vocab_size')} is not the data's {vocab_size}")
    try:
        cfg = transformers.AutoConfig.for_model(**config)
        lm = transformers.AutoModelForCausalLM.from_config(cfg)
    except (ValueError, KeyError, TypeError) as e:  # an unknown model_type or a field the class refuses
        raise InputError(f"model.hf_config: transformers cannot build a causal LM from it ({type(e).__name__}: "
                         f"{e})") from None
    return CausalLMLogits(lm)
