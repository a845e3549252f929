"""SparseLoCo (Sarfi et al., arXiv 2508.15706): DiLoCo's local steps with a sparse, 2-bit, error-fed sync.

Every H steps, on each worker r (Delta_r: the pseudo-gradient, anchor - params_r):

    e_r <- beta * e_r + Delta_r                      (error feedback; it replaces the outer momentum)
    s_r  = Q(TopK(e_r))                              (top-k per chunk, values quantised to 2 bits)
    e_r <- e_r - s_r                                 (what was sent leaves the accumulator)
    anchor <- anchor - alpha * (1/R) sum_r s_r       (all-gathered; every rank sums in rank order)

Chunks are `chunk` consecutive elements of each flattened tensor; the last chunk is zero-padded. A tensor
smaller than a chunk is one chunk that sends the configured fraction of it, `topk * length / chunk` rounded
(at least one), not `topk` of it: a 128-element norm at 64 of 4096 sends 2 entries (1.6%), not 64 (50%).
The 2-bit quantiser is the reference's (templar's TopKCompressor with 4 bins): per tensor, the sent values
are centred on their mean `shift`, `scale = quant_range * std / 4` (std unbiased), code =
round(c / scale + 2) clamped to 0..3, and each code decodes to the mean of the centred values that got it,
plus `shift` (the 4-entry fp32 table that travels has `shift` added in). Error feedback subtracts the
decoded value, so sent + residual = total.

Wire format of one worker's packet (one all-gather per sync): for every tensor its table (2bit: 4 x fp32),
then for every tensor its values (2bit: 4 codes per byte, low bits first; fp32: 4 bytes each), then for
every tensor its indices within the chunk (`index`: u8/u16/u32, int64 or an Elias-Fano code per chunk, as
harness/distro_bench/train/optim/codec.py writes them; with `coded` the values in ascending index order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from distro_bench.scenario.optimizers import IndexCodec, SparseLoCoConfig
from distro_bench.train.optim import codec
from distro_bench.train.optim.base import Collective, Period, PhaseTimer, index_set_bits
from distro_bench.train.optim.entropy import SentStatistics
from distro_bench.train.optim.local import LocalSteps

LEVELS = 4  # 2 bits


@dataclass(frozen=True)
class Slice:
    """How one tensor is cut: `chunks` chunks of `length` elements, `k` sent per chunk, their indices as `index`."""

    numel: int
    length: int
    chunks: int
    k: int
    index: codec.IndexFormat

    @property
    def sent(self) -> int:
        return self.chunks * self.k


def plan(numels: list[int], chunk: int, topk: int, index: IndexCodec = "auto") -> list[Slice]:
    out = []
    for n in numels:
        length = min(chunk, max(n, 1))
        # A short tensor keeps the configured density (topk/chunk), so small tensors do not dominate the packet.
        k = topk if length == chunk else min(length, max(1, round(topk * length / chunk)))
        out.append(Slice(n, length, math.ceil(n / length), k, codec.index_format(length, k, index)))
    return out


def packet_nbytes(slices: list[Slice], values: str) -> int:
    if values == "fp32":
        return sum(4 * s.sent + s.index.nbytes(s.chunks) for s in slices)
    return sum(4 * LEVELS + math.ceil(s.sent / 4) + s.index.nbytes(s.chunks) for s in slices)


def packet_floor_bits(slices: list[Slice], values: str) -> float:
    """The packet's information floor (issue 37): log2 C(length, k) per chunk, the values at their declared
    bits (2-bit codes and each slice's 4-entry fp32 table, or fp32)."""
    index = sum(s.chunks * index_set_bits(s.length, s.k) for s in slices)
    if values == "fp32":
        return index + sum(32 * s.sent for s in slices)
    return index + sum(32 * LEVELS + 2 * s.sent for s in slices)


def quantize_2bit(v: torch.Tensor, quant_range: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes 0..3 as int64, 4-entry table) of values `v`; v is decoded as table[codes].

    As the reference: centre on the mean, bins of width quant_range * std / 4 around it (so at 6 std the
    four codes are c < -2.25 std, < -0.75 std, < 0.75 std, and above), each decoded as its values' mean."""
    shift = v.mean()
    c = v - shift
    std = c.norm() / math.sqrt(max(c.numel() - 1, 1))
    scale = quant_range * std / LEVELS
    if not (scale > 0 and torch.isfinite(scale)):  # all values equal (or one): the reference's fallback
        scale = torch.ones((), dtype=v.dtype, device=v.device)
    codes = (c / scale + LEVELS // 2).round_().clamp_(0, LEVELS - 1).long()
    sums = torch.zeros(LEVELS, dtype=v.dtype, device=v.device).scatter_add_(0, codes, c)
    counts = torch.bincount(codes, minlength=LEVELS).to(v.dtype)
    lookup = torch.where(counts > 0, sums / counts.clamp(min=1), torch.zeros_like(sums))
    return codes, lookup + shift


def pack_2bit(codes: torch.Tensor) -> torch.Tensor:
    c = codes.reshape(-1).to(torch.uint8)
    pad = (-c.numel()) % 4
    if pad:
        c = torch.cat([c, c.new_zeros(pad)])
    c = c.view(-1, 4)
    return c[:, 0] | (c[:, 1] << 2) | (c[:, 2] << 4) | (c[:, 3] << 6)


def unpack_2bit(buf: torch.Tensor, count: int) -> torch.Tensor:
    shifts = torch.tensor([0, 2, 4, 6], dtype=torch.uint8, device=buf.device)
    return ((buf[:, None] >> shifts) & 3).reshape(-1)[:count].long()


class SparseLoCo(LocalSteps[SparseLoCoConfig]):
    Config = SparseLoCoConfig

    def __init__(self, cfg: SparseLoCoConfig, params, comm, total_steps):
        super().__init__(cfg, params, comm, total_steps)
        self.slices = plan([p.numel() for p in self.tensors], cfg.chunk, cfg.topk, cfg.index)
        # The error-feedback accumulator per tensor, chunked (chunks, length), padding included (it stays 0).
        self.error = [torch.zeros(s.chunks, s.length, device=p.device) for s, p in zip(self.slices, self.tensors)]
        self.last_sent: list[torch.Tensor] = []  # dense, chunked: what the last sync sent (for tests)
        self._nbytes = packet_nbytes(self.slices, cfg.values)
        two_bit = cfg.values == "2bit"
        self._stats = SentStatistics([s.length for s in self.slices], [s.k for s in self.slices], 2 if two_bit else 32,
                                     self.error[0].device if self.error else torch.device("cpu"),
                                     levels=LEVELS if two_bit else 0, table_bits=32 * LEVELS * len(self.slices) if two_bit else 0)

    def sent_statistics(self) -> dict:
        """The empirical floor of what this worker sent (train/optim/entropy.py) beside its packet's bits and
        the uniform floor, per outer sync."""
        return {**self._stats.figures(), "uniform_floor_bits_per_sync": packet_floor_bits(self.slices, self.cfg.values),
                "packet_bits_per_sync": 8 * self._nbytes}

    def _accumulate(self, pseudo: list[torch.Tensor]) -> None:
        for e, d in zip(self.error, pseudo):
            flat = e.view(-1)
            flat.mul_(self.cfg.error_decay)
            flat[: d.numel()].add_(d.reshape(-1))

    def _select(self) -> list[tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]]:
        """Per tensor: (indices (chunks, k), decoded values (chunks, k), (codes, table) or None); error feedback
        applied."""
        out: list[tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]] = []
        self.last_sent = []
        for s, e in zip(self.slices, self.error):
            idx = s.index.arrange(e.abs().topk(s.k, dim=1, sorted=False).indices)
            vals = e.gather(1, idx)
            codes = None
            if self.cfg.values == "2bit":
                codes, table = quantize_2bit(vals.reshape(-1), self.cfg.quant_range)
                vals = table[codes].view_as(vals)
                out.append((idx, vals, (codes, table)))
            else:
                out.append((idx, vals, None))
            e.scatter_add_(1, idx, -vals)  # e <- e - sent
            e.view(-1)[s.numel:] = 0  # padding sent (a chunk with fewer than k entries) leaves nothing behind
            self.last_sent.append(torch.zeros_like(e).scatter_(1, idx, vals))
        return out

    def _pack(self, selected) -> torch.Tensor:
        if self.cfg.values == "2bit":
            head = [table.float().view(torch.uint8) for _, _, (_, table) in selected]
            values = [pack_2bit(codes) for _, _, (codes, _) in selected]
        else:
            head, values = [], [vals.float().reshape(-1).view(torch.uint8) for _, vals, _ in selected]
        idx = [s.index.encode(i) for s, (i, _, _) in zip(self.slices, selected)]
        buf = torch.cat(head + values + idx)
        assert buf.numel() == self._nbytes, (buf.numel(), self._nbytes)
        return buf

    def _unpack(self, buf: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        pos, tables = 0, []
        if self.cfg.values == "2bit":
            for _ in self.slices:
                tables.append(buf[pos : pos + 4 * LEVELS].view(torch.float32))
                pos += 4 * LEVELS
        vals = []
        for i, s in enumerate(self.slices):
            if self.cfg.values == "2bit":
                n = math.ceil(s.sent / 4)
                vals.append(tables[i][unpack_2bit(buf[pos : pos + n], s.sent)].view(s.chunks, s.k))
            else:
                n = 4 * s.sent
                vals.append(buf[pos : pos + n].view(torch.float32).view(s.chunks, s.k))
            pos += n
        out = []
        for s, v in zip(self.slices, vals):
            n = s.index.nbytes(s.chunks)
            out.append((s.index.decode(buf[pos : pos + n], s.chunks), v))
            pos += n
        return out

    def sync(self, pseudo: list[torch.Tensor], timer: PhaseTimer) -> dict:
        with timer.phase("compress"):
            self._accumulate(pseudo)
            selected = self._select()
            buf = self._pack(selected)
        self._stats.add([(i, v) for i, v, _ in selected], [q[0] for _, _, q in selected if q is not None])
        gathered = self.comm.all_gather(buf)
        with timer.phase("apply"):
            total = [torch.zeros(s.chunks, s.length, device=buf.device) for s in self.slices]
            for b in gathered:  # rank order: the same sums on every rank
                for t, (idx, vals) in zip(total, self._unpack(b)):
                    t.scatter_add_(1, idx, vals)
            scale = -self.cfg.outer_lr / self.comm.world_size
            for a, t, s in zip(self.anchor, total, self.slices):
                a.view(-1).add_(t.view(-1)[: s.numel], alpha=scale)
        return {"outer_lr": self.cfg.outer_lr}

    @classmethod
    def predict_period(cls, cfg: SparseLoCoConfig, shapes, world_size) -> Period:
        slices = plan([math.prod(s) for s in shapes.values()], cfg.chunk, cfg.topk, cfg.index)
        return Period(cfg.inner_steps, [Collective("all_gather", packet_nbytes(slices, cfg.values),
                                                   packet_floor_bits(slices, cfg.values))])
