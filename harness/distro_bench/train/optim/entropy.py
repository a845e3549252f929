"""The empirical information floor of a top-k method's packets (issue 37): what an entropy coder fitted to
the positions and signs a run actually sent would need, beside the uniform floor (log2 C(n, k) per chunk,
base.index_set_bits), which assumes every coordinate of a chunk is equally likely to be picked. DCT top-k
picks cluster at low frequencies, so the empirical floor is lower.

Order-0 estimate over the whole run: per group, the histogram of chunk positions picked; a chunk's k
positions then cost k x H(positions) - log2 k! bits (a multiset: their order carries nothing), never less
than 0; signs cost the binary entropy of the share of positive values, quantisation codes the entropy of
their histogram, values at more bits their declared bits. An estimate of what a coder could reach, not a bound it could beat: it ignores dependence between
chunks and steps, which a better model could exploit."""

from __future__ import annotations

import math

import torch


def _entropy_bits(counts: torch.Tensor) -> float:
    total = float(counts.sum())
    if total <= 0:
        return 0.0
    p = counts[counts > 0].double() / total
    return float(-(p * p.log2()).sum())


def _binary_entropy(q: float) -> float:
    return 0.0 if q <= 0 or q >= 1 else -(q * math.log2(q) + (1 - q) * math.log2(1 - q))


class SentStatistics:
    """Accumulates, sync by sync (a DisTrO step, a SparseLoCo round), the positions (per group of chunks of one
    size) and the values a worker sent. Values: 1 declared bit is a sign (the binary entropy of the share of
    positive values); `levels` > 0 are quantisation codes (the entropy of their histogram, plus `table_bits`
    of decode tables per sync at their declared bits); else every value costs its declared `value_bits`."""

    def __init__(self, chunk_numels: list[int], ks: list[int], value_bits: int, device: torch.device, *,
                 levels: int = 0, table_bits: int = 0):
        self.ks = ks
        self.value_bits = value_bits
        self.table_bits = table_bits
        self.hist = [torch.zeros(n, dtype=torch.int64, device=device) for n in chunk_numels]
        self.chunks = [0] * len(ks)  # chunk-syncs seen per group
        self.positive = torch.zeros((), dtype=torch.int64, device=device)
        self.codes = torch.zeros(levels, dtype=torch.int64, device=device) if levels else None
        self.values = 0
        self.syncs = 0

    def add(self, sent: list[tuple[torch.Tensor, torch.Tensor]], codes: list[torch.Tensor] | None = None) -> None:
        """One sync's (indices (chunks, k), values) per group, and its values' codes where they are quantised."""
        for gi, (idx, vals) in enumerate(sent):
            self.hist[gi] += torch.bincount(idx.reshape(-1), minlength=self.hist[gi].numel())
            self.chunks[gi] += idx.shape[0]
            self.positive += (vals > 0).sum()
            self.values += vals.numel()
        if self.codes is not None and codes:
            for c in codes:
                self.codes += torch.bincount(c.reshape(-1), minlength=self.codes.numel())
        self.syncs += 1

    def _value_bits(self) -> float:
        if self.codes is not None:
            return self.values * _entropy_bits(self.codes) + self.syncs * self.table_bits
        if self.value_bits == 1:
            return self.values * _binary_entropy(int(self.positive) / self.values) if self.values else 0.0
        return float(self.values * self.value_bits)

    def figures(self) -> dict:
        """Per sync, in bits: the empirical floor of the index sets and of the values (empty before a sync)."""
        if not self.syncs:
            return {}
        index = 0.0
        for hist, k, chunks in zip(self.hist, self.ks, self.chunks):
            per_chunk = k * _entropy_bits(hist) - math.lgamma(k + 1) / math.log(2)
            index += chunks * max(per_chunk, 0.0)
        return {"empirical_index_bits_per_sync": index / self.syncs,
                "empirical_value_bits_per_sync": self._value_bits() / self.syncs, "empirical_floor_syncs": self.syncs}
