"""Corpora, a byte-level tokenizer, token files, per-rank disjoint shards and held-out tuning and validation splits.

A text corpus's bytes are its tokens (vocab 256: nothing to download, every corpus a user points at works)
unless the scenario names a tokenizer.json; pre-tokenised token files are read as they are (docs/models-and-data.md).
The tail of the corpus is held out, so no training window overlaps it. The held-out tail is cut in two:
its first half is the tuning split (`tune_loss`: what a sweep's `--pick best` selects on), its second
half the validation split (`val_loss`: what reports show), so the reported figure is never the one a
setting was selected on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from distro_bench.errors import InputError
from distro_bench.scenario import hfcorpus
from distro_bench.scenario.corpus import CorpusError, read_corpus
from distro_bench.scenario.datafiles import MAX_TOKENIZER_BYTES, DataFileError, token_bytes
from distro_bench.scenario.model import Scenario


def load_corpus(corpus: str) -> bytes:
    """`builtin:pydoc` (CPython's reference text, ~465 KB), a text file, a folder of text files, or
    `hf:<dataset>[:<split>[:<field>]]` through the optional `datasets` library (harness/distro_bench/scenario/hfcorpus.py).
    Files are read within the caps of harness/distro_bench/scenario/corpus.py (regular files only, 64 MiB in all)."""
    if hfcorpus.is_hf(corpus):
        return hfcorpus.load(corpus)
    if corpus == "builtin:pydoc":
        from pydoc_data.topics import topics

        return "\n\n".join(topics[k] for k in sorted(topics)).encode("utf-8")
    if corpus == "builtin:stdlib":
        return stdlib_text()
    try:
        return read_corpus(Path(corpus))
    except CorpusError as e:
        raise InputError(f"data.corpus: {e}") from None


STDLIB_BYTES = 16 * 2**20


def stdlib_text(max_bytes: int = STDLIB_BYTES) -> bytes:
    """`builtin:stdlib`: the running Python's standard-library sources (`*.py`, its test suites, site-packages
    and vendored packages left out), in path order, the first `max_bytes` (16 MiB; CPython 3.11 has ~30 MiB).
    A corpus ~35x `builtin:pydoc` that every machine with Python has, for model-size ladders whose larger
    rungs would see pydoc's 465 KB many times over. It follows the Python version (environment.json says which)."""
    import sysconfig

    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"site-packages", "dist-packages", "test", "tests", "idle_test", "_vendor", "__pycache__"}
    out, total = [], 0
    for path in sorted(root.rglob("*.py")):
        if skip.intersection(path.relative_to(root).parts):
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        out.append(data[: max_bytes - total])
        total += len(out[-1])
        if total >= max_bytes:
            break
    return b"\n\n".join(out)


@dataclass
class Tokens:
    """The run's token ids, as every rank reads them: `ids` (the tail held out unless `held_out` is given), the
    bytes read (hashed into the start record), the loss's unit, and text bytes per token of the held-out part
    where the text is known (bits per byte = nats per token / ln 2 / bytes per token)."""

    ids: torch.Tensor
    held_out: torch.Tensor | None
    raw: bytes
    unit: str
    bytes_per_token: float | None


def load_tokens(scenario: Scenario) -> Tokens:
    """The data a scenario names: a token file (and its held-out file), a text corpus through a tokenizer.json,
    or a text corpus as bytes. A run's workers read the run folder's copies (scenario/loading.py dump_for_run)."""
    d = scenario.data
    unit = scenario.loss_unit()
    if d.tokens is not None:
        raw = _token_file(scenario, "data.tokens")
        held = _token_file(scenario, "data.val_tokens") if d.val_tokens is not None else None
        ids = _ids(raw, d.token_dtype)
        return Tokens(ids, _ids(held, d.token_dtype) if held is not None else None, raw, unit, None)
    text = load_corpus(scenario.corpus_path())
    if d.tokenizer is None:
        return Tokens(encode(text), None, text, unit, 1.0)
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(scenario.file_bytes("data.tokenizer", MAX_TOKENIZER_BYTES, "tokenizer").decode("utf-8"))
    ids = torch.tensor(tok.encode(text.decode("utf-8", errors="replace"), add_special_tokens=False).ids,
                       dtype=torch.long)
    tail = ids[-held_out_length(len(ids), d.val_fraction, d.seq_len):]
    tail_bytes = len(tok.decode(tail.tolist(), skip_special_tokens=False).encode("utf-8"))
    return Tokens(ids, None, text, unit, tail_bytes / max(len(tail), 1))


def _token_file(scenario: Scenario, field: str) -> bytes:
    path = scenario.file_path(field)
    assert path is not None, field
    try:
        return token_bytes(path, scenario.data.token_dtype)
    except DataFileError as e:
        raise InputError(f"{field}: {e}") from None


def _ids(raw: bytes, dtype: str) -> torch.Tensor:
    return torch.frombuffer(bytearray(raw), dtype=torch.uint16 if dtype == "uint16" else torch.uint32).long()


def held_out_length(n_tokens: int, val_fraction: float, seq_len: int) -> int:
    return max(int(n_tokens * val_fraction), 2 * (seq_len + 2))  # room for one window in each split


def encode(text: str | bytes) -> torch.Tensor:
    raw = text.encode("utf-8") if isinstance(text, str) else text
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).long()


def decode(tokens: torch.Tensor) -> str:
    return bytes(tokens.to(torch.uint8).tolist()).decode("utf-8", errors="replace")


@dataclass
class Batches:
    """Random windows from this rank's shard; the generator is seeded by (seed, rank), so runs repeat."""

    shard: torch.Tensor
    seq_len: int
    batch_size: int
    generator: torch.Generator

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(0, len(self.shard) - self.seq_len - 1, (self.batch_size,), generator=self.generator)
        windows = torch.stack([self.shard[s : s + self.seq_len + 1] for s in starts.tolist()])
        return windows[:, :-1], windows[:, 1:]


def split(tokens: torch.Tensor, val_fraction: float, rank: int, world_size: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(this rank's training shard, the shared held-out tail). Shards are disjoint and contiguous.
    `held_out_splits` cuts the tail into the tuning and validation splits."""
    n_val = held_out_length(len(tokens), val_fraction, seq_len)
    train, val = tokens[:-n_val], tokens[-n_val:]
    per_rank = len(train) // world_size
    if per_rank < seq_len + 2:
        raise InputError(f"data.corpus: {len(tokens)} tokens are too few for {world_size} shards of seq_len {seq_len}")
    return train[rank * per_rank : (rank + 1) * per_rank], val


def split_shard(tokens: torch.Tensor, rank: int, world_size: int, seq_len: int) -> torch.Tensor:
    """This rank's training shard of data whose held-out split is a file of its own."""
    per_rank = len(tokens) // world_size
    if per_rank < seq_len + 2:
        raise InputError(f"data.tokens: {len(tokens)} tokens are too few for {world_size} shards of seq_len {seq_len}")
    return tokens[rank * per_rank : (rank + 1) * per_rank]


def held_out_splits(held_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(tuning split, validation split): the held-out tail's first and second halves, disjoint."""
    half = len(held_out) // 2
    return held_out[:half], held_out[half:]


def train_batches(shard: torch.Tensor, seq_len: int, batch_size: int, seed: int, rank: int) -> Batches:
    g = torch.Generator().manual_seed(seed * 1_000_003 + rank)
    return Batches(shard, seq_len, batch_size, g)


def validation_batches(val: torch.Tensor, seq_len: int, batch_size: int, n_batches: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Fixed, evenly spaced windows: the same on every rank and at every evaluation."""
    n_windows = n_batches * batch_size
    span = len(val) - seq_len - 1
    starts = [int(i * span / max(n_windows - 1, 1)) for i in range(n_windows)]
    windows = torch.stack([val[s : s + seq_len + 1] for s in starts])
    return [(w[:, :-1], w[:, 1:]) for w in windows.split(batch_size)]
