"""The empirical information floor of a top-k method's packets (issue 37): what an entropy coder fitted to
the positions and signs a run actually sent would need, beside the uniform floor (log2 C(n, k) per chunk,
base.index_set_bits), which assumes every coordinate of a chunk is equally likely to be picked. DCT top-k
picks cluster at low frequencies, so the empirical floor is lower.

Order-0 estimate over the whole run: per group, the histogram of chunk positions picked; a chunk's k
positions then cost k x H(positions) - log2 k! bits (a multiset: their order carries nothing), never less
than 0; signs cost the binary entropy of the share of positive values, values at more bits their declared
bits. An estimate of what a coder could reach, not a bound it could beat: it ignores dependence between
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
    """Accumulates, step by step, the positions (per group) and the signs a worker sent."""

    def __init__(self, chunk_numels: list[int], ks: list[int], value_bits: int, device: torch.device):
        self.ks = ks
        self.value_bits = value_bits
        self.hist = [torch.zeros(n, dtype=torch.int64, device=device) for n in chunk_numels]
        self.chunks = [0] * len(ks)  # chunk-steps seen per group
        self.positive = torch.zeros((), dtype=torch.int64, device=device)
        self.values = 0
        self.steps = 0

    def add(self, sent: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """One step's (indices (chunks, k), values) per group."""
        for gi, (idx, vals) in enumerate(sent):
            self.hist[gi] += torch.bincount(idx.reshape(-1), minlength=self.hist[gi].numel())
            self.chunks[gi] += idx.shape[0]
            self.positive += (vals > 0).sum()
            self.values += vals.numel()
        self.steps += 1

    def figures(self) -> dict:
        """Per step, in bits: the empirical floor of the index sets and of the values (empty before a step)."""
        if not self.steps:
            return {}
        index = 0.0
        for hist, k, chunks in zip(self.hist, self.ks, self.chunks):
            per_chunk = k * _entropy_bits(hist) - math.lgamma(k + 1) / math.log(2)
            index += chunks * max(per_chunk, 0.0)
        if self.value_bits == 1:
            value = self.values * _binary_entropy(int(self.positive) / self.values) if self.values else 0.0
        else:
            value = float(self.values * self.value_bits)
        return {"empirical_index_bits_per_step": index / self.steps, "empirical_value_bits_per_step": value / self.steps,
                "empirical_floor_steps": self.steps}
