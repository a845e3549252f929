"""Every model through one protocol: a factory, given `vocab_size` and its own args, returns an `nn.Module` that
maps token ids [B, T] (int64) to logits [B, T, vocab_size].

A scenario's resolved model (Scenario.resolved_model) names one of three sources, and all three go through the
same `ModelRecipe`: the factory's import path, its args, the vocabulary.

- the built-in Llama-style model (presets and dim/n_layers/...): the registry's `llama`, train/model.py `llama`;
- `factory: "package.module:function"` with `args`: the user's own;
- `hf_config`: transformers' `AutoModelForCausalLM.from_config` (the optional extra `distro-bench[hf]`), the
  registry's `hf`, whose `.logits` are adapted to the protocol.

Parameter shapes come from the model itself, built on the meta device (no weights allocated): the prediction,
the projection, the replay and the FLOPs all read `model_shapes`. FLOPs per token come from the model where it
says (a `flops_per_token(seq_len)` method), else 6 x parameters, stated as an estimate.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from distro_bench.errors import InputError
from distro_bench.train.model import ShapesOnly

# Named factories: the shipped models register here, as a user's would by import path.
REGISTRY: dict[str, str] = {
    "llama": "distro_bench.train.model:llama",
    "hf": "distro_bench.train.hfmodel:from_config",
}
BUILTIN_FIELDS = ("dim", "n_layers", "n_heads", "ffn_dim", "max_seq_len", "rope_theta", "norm_eps", "n_kv_heads")
PROBE_BATCH = 2
PROBE_MAX_LEN = 4096
PROBE_MAX_PARAMS = 50_000_000  # a real forward on the CPU up to here (under a second); the meta device above


@dataclass(frozen=True)
class ModelRecipe:
    """What builds a model: a factory (a registry name or "package.module:function"), its args, the vocabulary."""

    factory: str
    vocab_size: int
    args: dict[str, Any] = field(default_factory=dict)
    where: str = "model.factory"  # the scenario field a problem names

    def describe(self) -> str:
        return {"hf": "the transformers model of this config", "llama": "the built-in model"}.get(self.factory,
                                                                                                  self.factory)


def recipe_of(model: dict[str, Any]) -> ModelRecipe:
    """The recipe of a resolved model dict (Scenario.resolved_model, or a run folder's scenario.yaml `model`)."""
    if "factory" in model:
        return ModelRecipe(str(model["factory"]), int(model["vocab_size"]), dict(model.get("args") or {}))
    if "hf_config" in model:
        cfg = dict(model["hf_config"])
        return ModelRecipe("hf", int(model.get("vocab_size") or cfg["vocab_size"]), {"config": cfg}, "model.hf_config")
    return ModelRecipe("llama", int(model.get("vocab_size", 256)),
                       {k: model[k] for k in BUILTIN_FIELDS if k in model}, "model")


def factory_of(recipe: ModelRecipe) -> Callable[..., Any]:
    """The factory callable; InputError naming the field and what was expected where it cannot be imported."""
    path = REGISTRY.get(recipe.factory, recipe.factory)
    module_name, _, attr = path.partition(":")
    if not attr:
        raise InputError(f"{recipe.where}: {recipe.factory!r} is neither a registered model ({', '.join(REGISTRY)}) "
                         "nor an import path 'package.module:function'")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as e:  # ImportError, or the module's own error at import
        raise InputError(f"{recipe.where}: cannot import module {module_name!r} of {recipe.factory!r} "
                         f"({type(e).__name__}: {e}); expected a module installed in this environment "
                         "(pip install your package)") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InputError(f"{recipe.where}: module {module_name!r} has no {attr!r}; expected a callable "
                             "'package.module:function' given vocab_size and the args")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InputError(f"{recipe.where}: {recipe.factory!r} is a {type(obj).__name__}, not a callable")
    return obj


def _call(recipe: ModelRecipe) -> nn.Module:
    fn = factory_of(recipe)
    try:
        module = fn(vocab_size=recipe.vocab_size, **recipe.args)
    except InputError:
        raise
    except TypeError as e:
        raise InputError(f"{recipe.where}: {recipe.describe()} refused its arguments (vocab_size="
                         f"{recipe.vocab_size}, args {recipe.args}): {e}") from None
    if not isinstance(module, nn.Module):
        raise InputError(f"{recipe.where}: {recipe.describe()} returned {type(module).__name__}, not a "
                         "torch.nn.Module (expected a module mapping token ids [B, T] to logits [B, T, vocab])")
    return module


def build(model: dict[str, Any], seed: int, device: torch.device | str = "cpu") -> nn.Module:
    """The model, its weights drawn from `seed`: the same on every rank, so replicas start identical without a
    broadcast."""
    recipe = recipe_of(model)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = _call(recipe)
    return module.to(device)


def _on_meta(recipe: ModelRecipe) -> nn.Module:
    with torch.device("meta"), ShapesOnly():
        return _call(recipe)


def model_shapes(model: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Parameter names and shapes, from the model built on the meta device (no weights: instant at 70B)."""
    return {n: tuple(p.shape) for n, p in _on_meta(recipe_of(model)).named_parameters()}


def parameter_count(model: dict[str, Any]) -> int:
    return sum(math.prod(s) for s in model_shapes(model).values())


def flops_per_token(model: dict[str, Any], seq_len: int) -> tuple[float, str]:
    """(training FLOPs per token, how it is known): the model's own `flops_per_token(seq_len)` where it has one,
    else 6 x parameters (forward and backward of the matrix products), stated as an estimate."""
    module = _on_meta(recipe_of(model))
    own = getattr(module, "flops_per_token", None)
    if callable(own):
        return float(own(seq_len)), "the model's own count"
    return 6.0 * sum(p.numel() for p in module.parameters()), "6 x parameters (estimate)"


def lm_loss(model: nn.Module, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy (nats per token) of the protocol's logits."""
    logits = model(tokens)
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))


def check(model: dict[str, Any], seq_len: int) -> dict[str, Any]:
    """Build the model and run a tiny batch through it; InputError naming the field and what was expected when
    the factory cannot be imported, returns no module, or its output is not logits [B, T, vocab]. On the
    CPU up to PROBE_MAX_PARAMS (a real forward: the meta device's imports torch._dynamo, 5 s), else on meta.
    Returns {"parameters", "flops_per_token", "flops_basis"}."""
    recipe = recipe_of(model)
    meta = _on_meta(recipe)
    params = sum(p.numel() for p in meta.parameters())
    if params == 0:
        raise InputError(f"{recipe.where}: {recipe.describe()} returned a module without parameters; nothing to train")
    t = max(1, min(PROBE_MAX_LEN, seq_len))  # the run's own length: a position table shorter than it fails here
    out = None
    if recipe.factory != "llama":  # the built-in model is tested in the project's own suite
        out = _probe(recipe, model, meta, params, t)
    if out is not None:
        want = (PROBE_BATCH, t, recipe.vocab_size)
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else None
        if shape != want:
            got = f"shape {list(shape)}" if shape is not None else f"a {type(out).__name__}"
            raise InputError(f"{recipe.where}: {recipe.describe()} maps token ids [{PROBE_BATCH}, {t}] to {got}; "
                             f"expected logits {list(want)} ([batch, time, vocab_size {recipe.vocab_size}])")
    own = getattr(meta, "flops_per_token", None)
    flops, basis = (float(own(seq_len)), "the model's own count") if callable(own) else (
        6.0 * params, "6 x parameters (estimate)")
    return {"parameters": params, "flops_per_token": flops, "flops_basis": basis}


def _probe(recipe: ModelRecipe, model: dict[str, Any], meta: nn.Module, params: int, t: int) -> Any:
    """The model's output for token ids [PROBE_BATCH, t]; None where it cannot be run here affordably."""
    try:
        with torch.no_grad():
            if params <= PROBE_MAX_PARAMS:
                return build(model, seed=0)(torch.zeros(PROBE_BATCH, t, dtype=torch.long))
            return meta(torch.zeros(PROBE_BATCH, t, dtype=torch.long, device="meta"))
    except InputError:
        raise
    except Exception as e:
        if params > PROBE_MAX_PARAMS:  # no meta kernel for one of its operations: the run's workers will tell
            return None
        raise InputError(f"{recipe.where}: {recipe.describe()} failed on token ids of shape [{PROBE_BATCH}, {t}] "
                         f"({type(e).__name__}: {e})") from None
