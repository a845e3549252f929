"""MuLoCo (Thérien et al., arXiv 2505.23725): DiLoCo with Muon as the inner optimizer.

Between syncs each worker steps its hidden matrices with Muon (torch.optim.Muon, after Keller Jordan's
Muon: momentum `b = mu * b + (1 - mu) * g`, Nesterov look-ahead `u = (1 - mu) * g + mu * b`, five
Newton-Schulz iterations that push `u` towards its orthogonal polar factor, decoupled weight decay, a
per-shape lr scale) and everything else (embeddings, the output head, norm weights) with AdamW, as the
paper does. Every H steps the pseudo-gradient is exchanged and applied by DiLoCo's outer Nesterov step
(harness/distro_bench/train/optim/diloco.py), so bytes are DiLoCo's: the inner optimizer changes what is sent, not its size.
"""

from __future__ import annotations

import torch

from distro_bench.scenario.optimizers import MuLoCoConfig
from distro_bench.train.optim.adamw import build_adamw
from distro_bench.train.optim.base import PhaseTimer, StepResult
from distro_bench.train.optim.diloco import DiLoCo


def split_params(cfg: MuLoCoConfig, params) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(Muon's, AdamW's): Muon takes 2-D tensors except those named in `adamw_params`."""
    muon: list[torch.Tensor] = []
    adamw: list[torch.Tensor] = []
    for name, p in params:
        (muon if p.ndim == 2 and name.split(".")[0] not in cfg.adamw_params else adamw).append(p)
    return muon, adamw


class MuLoCo(DiLoCo):
    Config = MuLoCoConfig
    cfg: MuLoCoConfig

    def __init__(self, cfg: MuLoCoConfig, params, comm, total_steps):
        super().__init__(cfg, params, comm, total_steps)
        muon, adamw = split_params(cfg, params)
        self.opt = build_adamw(cfg, adamw)
        # torch's Muon refuses an empty parameter list (a model of vectors only): AdamW alone then
        self.muon = torch.optim.Muon(
            muon, lr=cfg.muon_lr or cfg.lr, weight_decay=cfg.weight_decay, momentum=cfg.muon_momentum,
            nesterov=cfg.muon_nesterov, ns_steps=cfg.ns_steps, adjust_lr_fn=cfg.muon_adjust_lr) if muon else None

    @torch.no_grad()
    def step(self, step: int, timer: PhaseTimer) -> StepResult:
        cfg = self.cfg
        with timer.phase("apply"):
            if cfg.max_grad_norm:
                torch.nn.utils.clip_grad_norm_(self.tensors, cfg.max_grad_norm, foreach=True)
            lr = cfg.lr_at(step, self.total_steps)
            for group in self.opt.param_groups:
                group["lr"] = lr
            self.opt.step()
            if self.muon is not None:
                # Muon's own lr follows the same warmup and decay
                for group in self.muon.param_groups:
                    group["lr"] = lr * (cfg.muon_lr or cfg.lr) / cfg.lr
                self.muon.step()
        self.pending += 1
        if (step + 1) % cfg.inner_steps:
            return StepResult(synced=False)
        return self._sync(timer)
