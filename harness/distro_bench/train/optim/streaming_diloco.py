"""Streaming DiLoCo (Douillard et al., arXiv 2501.18512), without its overlap of communication and compute.

DiLoCo (harness/distro_bench/train/optim/diloco.py) with the model cut into P fragments of transformer blocks, strided (block
i in fragment i mod P: the paper's choice over sequential fragments). A tensor outside a block joins the
fragment of the block before it (the embeddings, in front of every block, join fragment 0; the final norm
and head join the last block's). Every step is a local AdamW step; fragment p syncs after the steps where
(step + 1) mod H = p H / P: its pseudo-gradient `anchor_p - params_p` is averaged over the workers, the
outer Nesterov SGD steps its anchor (its own momentum), and its parameters restart from it. Each sync thus
sends about 1/P of the model, once per H steps per fragment: the same bytes per step as DiLoCo, a peak P
times lower. The wire formats are DiLoCo's (fp32/bf16 ring all-reduce, or int8 all-gather standing in for
the paper's 4-bit outer gradients, summed in fp32 after decoding).

Left out: overlapping a fragment's exchange with the next tau inner steps and mixing (alpha) the stale
result into the local parameters. Replicas are identical only where no fragment has pending local steps
(P = 1 at every sync: then this is DiLoCo); `finish` syncs every fragment with pending steps.
"""

from __future__ import annotations

import math

import torch

from distro_bench.scenario.optimizers import StreamingDiLoCoConfig
from distro_bench.train.optim.adamw import _buckets, adamw_step, build_adamw
from distro_bench.train.optim.base import Collective, Period, PhaseTimer, StepResult, Strategy, holding
from distro_bench.train.optim.diloco import _DTYPES, decode_int8, encode_int8, int8_nbytes


def fragments_of(names: list[str], count: int) -> list[list[int]]:
    """Tensor indices per fragment: block `layers.i` in fragment i mod count, other tensors with the block
    before them (fragment 0 before any block)."""
    out: list[list[int]] = [[] for _ in range(count)]
    current = 0
    for i, name in enumerate(names):
        parts = name.split(".")
        if parts[0] == "layers" and len(parts) > 1 and parts[1].isdigit():
            current = int(parts[1]) % count
        out[current].append(i)
    return out


class StreamingDiLoCo(Strategy[StreamingDiLoCoConfig]):
    Config = StreamingDiLoCoConfig
    clips_gradients = True  # the inner AdamW step clips the local gradient

    def __init__(self, cfg: StreamingDiLoCoConfig, params, comm, total_steps):
        super().__init__(cfg, params, comm, total_steps)
        self.tensors = [p for _, p in params]
        self.opt = build_adamw(cfg, self.tensors)
        self.anchor = [p.detach().float().clone() for p in self.tensors]
        # One outer SGD over every anchor: it steps only the tensors given a grad (one fragment's)
        self.outer = torch.optim.SGD(self.anchor, lr=cfg.outer_lr, momentum=cfg.outer_momentum, nesterov=cfg.nesterov)
        self.fragments = fragments_of([n for n, _ in params], cfg.fragments)
        self.pending = [0] * cfg.fragments

    @torch.no_grad()
    def step(self, step: int, timer: PhaseTimer) -> StepResult:
        with timer.phase("apply"):
            adamw_step(self.opt, self.cfg, self.tensors, step, self.total_steps)
        # an empty fragment (more fragments than blocks) never holds anything pending
        self.pending = [n + 1 if self.fragments[f] else 0 for f, n in enumerate(self.pending)]
        for f in range(self.cfg.fragments):
            if (step + 1) % self.cfg.inner_steps == self.cfg.offset(f):
                self._sync(f, timer)
        return StepResult(synced=not any(self.pending))

    def consensus(self):
        return holding(self.tensors, self.anchor)  # each fragment as of its last sync: the shared model

    @torch.no_grad()
    def finish(self, timer: PhaseTimer) -> StepResult | None:
        if not any(self.pending):
            return None
        for f in range(self.cfg.fragments):
            if self.pending[f]:
                self._sync(f, timer)
        return StepResult(synced=True)

    def _sync(self, f: int, timer: PhaseTimer) -> None:
        self.pending[f] = 0
        idx = self.fragments[f]
        if not idx:
            return
        world = self.comm.world_size
        with timer.phase("compress"):
            pseudo = [self.anchor[i] - self.tensors[i].detach().float() for i in idx]
        if self.cfg.pseudo_grad == "int8":
            with timer.phase("compress"):
                buf = encode_int8(pseudo)
            gathered = self.comm.all_gather(buf)
            with timer.phase("apply"):
                numels = [t.numel() for t in pseudo]
                mean = [torch.zeros_like(t) for t in pseudo]
                for b in gathered:  # rank order: the same sum on every rank
                    for m, d in zip(mean, decode_int8(b, numels)):
                        m.view(-1).add_(d)
                for i, m in zip(idx, mean):
                    self.anchor[i].grad = m.div_(world)
        else:
            dtype = _DTYPES[self.cfg.pseudo_grad]
            for bucket in self._buckets(self.cfg, [t.numel() for t in pseudo]):
                with timer.phase("compress"):
                    flat = torch.cat([pseudo[j].reshape(-1) for j in bucket]).to(dtype)
                self.comm.all_reduce(flat)
                with timer.phase("apply"):
                    flat = flat.float().div_(world)
                    pos = 0
                    for j in bucket:
                        a = self.anchor[idx[j]]
                        a.grad = flat[pos : pos + a.numel()].view_as(a).clone()
                        pos += a.numel()
        with timer.phase("apply"):
            self.outer.step()
            for i in idx:
                self.anchor[i].grad = None
                self.tensors[i].copy_(self.anchor[i])

    @staticmethod
    def _buckets(cfg: StreamingDiLoCoConfig, numels: list[int]) -> list[list[int]]:
        elem = torch.tensor([], dtype=_DTYPES[cfg.pseudo_grad]).element_size()
        return _buckets(numels, elem, cfg.bucket_mb * 2**20)

    @classmethod
    def _fragment_collectives(cls, cfg: StreamingDiLoCoConfig, shapes, f: int) -> list[Collective]:
        numels = [math.prod(s) for s in shapes.values()]
        frag = [numels[i] for i in fragments_of(list(shapes), cfg.fragments)[f]]
        if not frag:
            return []
        if cfg.pseudo_grad == "int8":
            return [Collective("all_gather", int8_nbytes(frag))]
        elem = torch.tensor([], dtype=_DTYPES[cfg.pseudo_grad]).element_size()
        return [Collective("all_reduce", sum(frag[j] for j in b) * elem) for b in cls._buckets(cfg, frag)]

    @classmethod
    def predict_step(cls, cfg: StreamingDiLoCoConfig, shapes, world_size, step, total_steps):
        return [c for f in range(cfg.fragments) if (step + 1) % cfg.inner_steps == cfg.offset(f)
                for c in cls._fragment_collectives(cfg, shapes, f)]

    @classmethod
    def predict_period(cls, cfg: StreamingDiLoCoConfig, shapes, world_size) -> Period:
        """Every fragment once per H steps (the bytes of one DiLoCo sync, spread over the period)."""
        return Period(cfg.inner_steps, [c for f in range(cfg.fragments) for c in cls._fragment_collectives(cfg, shapes, f)])

    @classmethod
    def predict_finish(cls, cfg: StreamingDiLoCoConfig, shapes, world_size, steps_done):
        # fragment f last synced at the latest step s < steps_done with (s + 1) mod H = offset(f)
        return [c for f in range(cfg.fragments) if steps_done and steps_done % cfg.inner_steps != cfg.offset(f)
                for c in cls._fragment_collectives(cfg, shapes, f)]
