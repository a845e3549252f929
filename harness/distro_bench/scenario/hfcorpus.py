"""`hf:<dataset>[:<split>[:<field>]]` corpora through the Hugging Face `datasets` library (optional extra).

The spelling is parsed here without importing `datasets` or torch, so the scenario schema can check it.
The text is streamed (a large dataset is never downloaded whole), capped at `max_bytes`, and cached as
bytes under `~/.cache/distro-bench/corpora/`, so every rank of a run, and every later run, reads the same
bytes: the per-rank shards and the validation tail (harness/distro_bench/train/data.py `split`) are then the same on every
node. `<dataset>` is a hub name (`roneneldan/TinyStories`) or a local folder in the hub's layout (parquet,
json or csv files that `datasets.load_dataset(folder)` reads); a relative folder is read from the
scenario's folder.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from distro_bench.errors import InputError
from distro_bench.scenario import environ

PREFIX = "hf:"
DEFAULT_SPLIT = "train"
DEFAULT_FIELD = "text"
# Byte-level tokens: 32 MB is ~30x what the tiny/small presets see in a long run; more only costs start-up.
MAX_BYTES = int(os.environ.get(environ.HF_MAX_BYTES, str(32 * 2**20)))
INSTALL = "pip install 'distro-bench[hf]' (or: pip install datasets)"


@dataclass(frozen=True)
class HFCorpus:
    dataset: str
    split: str = DEFAULT_SPLIT
    field: str = DEFAULT_FIELD

    @property
    def is_local(self) -> bool:
        return self.dataset.startswith((".", "/", "~"))

    def spec(self) -> str:
        return f"{PREFIX}{self.dataset}:{self.split}:{self.field}"


def is_hf(corpus: str) -> bool:
    return corpus.startswith(PREFIX)


def parse(corpus: str) -> HFCorpus:
    """ValueError with what to write when the spelling is wrong."""
    parts = corpus[len(PREFIX):].split(":")
    if len(parts) > 3 or not parts[0] or any(not p for p in parts):
        raise ValueError(f"invalid corpus {corpus!r}; write hf:<dataset>[:<split>[:<field>]], "
                         "e.g. hf:roneneldan/TinyStories:train:text")
    return HFCorpus(*parts)


def resolve(corpus: str, base_dir: Path) -> str:
    """The spec with a relative local folder made absolute (workers run elsewhere)."""
    c = parse(corpus)
    if c.is_local:
        c = HFCorpus(str((base_dir / Path(c.dataset).expanduser()).resolve()), c.split, c.field)
    return c.spec()


def available() -> bool:
    return importlib.util.find_spec("datasets") is not None


def cache_dir() -> Path:
    root = os.environ.get(environ.CACHE) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "distro-bench")
    return Path(root) / "corpora"


def cached_path(corpus: str, max_bytes: int = MAX_BYTES) -> Path:
    """Where `load` keeps (or will keep) a hub dataset's bytes."""
    c = parse(corpus)
    return cache_dir() / (hashlib.sha256((c.spec() + f"|{max_bytes}").encode()).hexdigest()[:24] + ".bin")


def hub_caches() -> list[Path]:
    """The Hugging Face caches `datasets` reads a hub dataset from without the network."""
    home = Path(os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"))
    datasets_cache = Path(os.environ.get("HF_DATASETS_CACHE") or home / "datasets")
    hub_cache = Path(os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or home / "hub")
    return [datasets_cache, hub_cache]


def _in_hub_cache(name: str) -> bool:
    datasets_cache, hub_cache = hub_caches()
    flat = name.replace("/", "___")
    return (hub_cache / ("datasets--" + name.replace("/", "--"))).is_dir() or any(
        p.is_dir() for p in (datasets_cache / flat, datasets_cache / flat.lower()))


def _offline() -> bool:
    return any(os.environ.get(k, "").lower() in ("1", "true", "yes", "on") for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def reachability_problem(corpus: str, timeout_s: float = 5.0) -> str | None:
    """For a hub dataset (not a local folder): None when its bytes are in our cache or the Hugging Face caches, or
    the hub answers for it within `timeout_s`; else the problem, naming the caches looked in (validate says it,
    not a worker's traceback once the run has started)."""
    c = parse(corpus)
    if c.is_local or cached_path(corpus).is_file() or _in_hub_cache(c.dataset):
        return None
    looked = ", ".join(str(p) for p in (cache_dir(), *hub_caches()))
    if _offline():
        return (f"data.corpus {corpus!r}: not in the caches looked in ({looked}) and the hub is off "
                "(HF_HUB_OFFLINE / HF_DATASETS_OFFLINE); download it once where the network is reachable, or "
                "name a local folder (hf:./folder)")
    try:
        from huggingface_hub import HfApi

        HfApi().dataset_info(c.dataset, timeout=timeout_s)
    except ImportError:
        return f"data.corpus {corpus!r} needs the datasets library: {INSTALL}"
    except Exception as e:  # unreachable, unknown or gated: one line, with the caches looked in
        return (f"data.corpus {corpus!r}: not in the caches looked in ({looked}) and the hub cannot give it "
                f"({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}); download it once where the "
                "network is reachable, or name a local folder (hf:./folder)")
    return None


def _stream_text(c: HFCorpus, max_bytes: int) -> bytes:
    import datasets

    path = str(Path(c.dataset).expanduser()) if c.is_local else c.dataset
    ds = datasets.load_dataset(path, split=c.split, streaming=True)
    chunks, size = [], 0
    for row in ds:
        if c.field not in row:
            raise KeyError(f"no field {c.field!r} in {c.dataset} (fields: {', '.join(sorted(row))})")
        text = row[c.field]
        if isinstance(text, list) and text and isinstance(text[0], int):
            raise KeyError(f"field {c.field!r} holds token ids, not text; give them as data.tokens (a parquet file "
                           "or a save_to_disk folder with input_ids) with data.vocab_size")
        if not isinstance(text, str) or not text:
            continue
        data = text.encode("utf-8")
        chunks.append(data)
        size += len(data) + 2
        if size >= max_bytes:
            break
    return b"\n\n".join(chunks)[:max_bytes]


def load(corpus: str, max_bytes: int = MAX_BYTES) -> bytes:
    """The corpus's bytes, from the cache when this spec (and, for a local folder, its files) was read before."""
    c = parse(corpus)
    key = c.spec() + f"|{max_bytes}"
    if c.is_local:
        folder = Path(c.dataset).expanduser()
        if not folder.exists():
            raise InputError(f"data.corpus: no such dataset folder {c.dataset!r}")
        key += "|" + "|".join(f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
                              for p in sorted(folder.rglob("*")) if p.is_file())
    cached = cache_dir() / (hashlib.sha256(key.encode()).hexdigest()[:24] + ".bin")  # cached_path's, for a hub name
    if cached.is_file():
        return cached.read_bytes()
    if not available():
        raise InputError(f"data.corpus {corpus!r} needs the datasets library: {INSTALL}")
    try:
        data = _stream_text(c, max_bytes)
    except KeyError as e:
        raise InputError(f"data.corpus {corpus!r}: {e.args[0]}") from None
    except Exception as e:  # the hub, the network or the files: one readable line
        raise InputError(f"data.corpus {corpus!r}: cannot be read ({type(e).__name__}: {e})") from None
    if not data:
        raise InputError(f"data.corpus {corpus!r}: split {c.split!r} has no text in field {c.field!r}")
    cached.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".corpus.", dir=cached.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, cached)  # ranks racing here write the same bytes; the rename is atomic
    return data
