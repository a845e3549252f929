"""The files a scenario's model and data name beyond a text corpus: a Hugging Face `config.json`, a `tokenizers`
tokenizer.json, and pre-tokenised token files (nanoGPT's flat `.bin`, a parquet file or a `save_to_disk` folder
with an `input_ids` column).

Each file is read once through scenario/confined.py, as corpora and traces are. The run copies the bytes
validation read into its folder (scenario/loading.py dump_for_run) and the workers read that copy: a file or a
folder on the way swapped for a symlink after `validate` cannot make a worker read another file (issue 51).
numpy, pyarrow, datasets and tokenizers are imported only where a file needs them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from distro_bench.scenario.confined import ConfinedReadError, read_confined

MAX_CONFIG_BYTES = 1 * 2**20  # a config.json is a few kB
MAX_TOKENIZER_BYTES = 64 * 2**20  # GPT-2's tokenizer.json is 1.4 MB, Llama 3's 9 MB
MAX_TOKEN_BYTES = 256 * 2**20  # 128M uint16 tokens: each rank holds them as int64 (1 GiB); more wants a memmap
TOKEN_DTYPES = {"uint16": 2, "uint32": 4}
TOKENS_FIELD = "input_ids"
INSTALL_HF = "pip install 'distro-bench[hf]'"


class DataFileError(ValueError):
    """A file that cannot be read within the rules; the message names it and what is valid."""


def read_file(path: Path, cap: int, what: str, within: Path | None = None) -> bytes:
    """The bytes of the regular file at `path` (its last component not a symlink), at most `cap` of them; with
    `within`, the file opened must lie in that folder (scenario/confined.py)."""
    try:
        return read_confined(path, cap, within).data
    except ConfinedReadError as e:
        if e.why == "missing":
            raise DataFileError(f"{what} {str(path)!r}: no such file") from None
        if e.why == "unopenable":
            raise DataFileError(f"{what} {str(path)!r} cannot be opened ({e.detail}; a symlink is not followed)") from None
        if e.why == "not_regular":
            raise DataFileError(f"{what} {str(path)!r} is not a regular file") from None
        if e.why == "outside":
            raise DataFileError(f"{what} {str(path)!r}: the file opened is {e.detail}, outside {within} (a folder on "
                                "the way is a symlink out of it)") from None
        raise DataFileError(f"{what} {str(path)!r} is more than {cap:,} bytes ({cap // 2**20} MiB), the cap of a "
                            f"{what}") from None


def hf_config(data: bytes, where: str) -> dict[str, Any]:
    """A transformers config.json's content: a JSON object with `model_type` and an integer `vocab_size`."""
    try:
        cfg = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise DataFileError(f"{where}: not JSON ({e})") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("model_type"), str):
        raise DataFileError(f"{where}: a transformers config.json is an object with `model_type` (gpt2, llama, ...)")
    if not isinstance(cfg.get("vocab_size"), int) or isinstance(cfg.get("vocab_size"), bool) or cfg["vocab_size"] < 2:
        raise DataFileError(f"{where}: `vocab_size` must be an integer of at least 2, got {cfg.get('vocab_size')!r}")
    return cfg


def tokenizer_vocab(data: bytes, where: str) -> int:
    """The vocabulary size of a `tokenizers` tokenizer.json (added tokens included)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise DataFileError(f"{where}: reading a tokenizer.json needs the tokenizers library: {INSTALL_HF}") from None
    try:
        return int(Tokenizer.from_str(data.decode("utf-8")).get_vocab_size(with_added_tokens=True))
    except Exception as e:  # the library's own parse errors: one readable line
        raise DataFileError(f"{where}: not a tokenizers tokenizer.json ({type(e).__name__}: {e})") from None


def token_format(path: Path) -> str:
    """`bin` (a flat array), `parquet` or `dataset` (a save_to_disk folder), from the name and kind."""
    if path.suffix == ".parquet":
        return "parquet"
    if path.is_dir():
        return "dataset"
    return "bin"


def token_bytes(path: Path, dtype: str, within: Path | None = None) -> bytes:
    """The token ids at `path` as a flat little-endian array of `dtype`: a `.bin` file as it is; a parquet file's
    or a save_to_disk folder's `input_ids` rows joined in order (dtype then says the width they are stored at)."""
    fmt = token_format(path)
    if fmt == "bin":
        data = read_file(path, MAX_TOKEN_BYTES, "token file", within)
        if len(data) % TOKEN_DTYPES[dtype]:
            raise DataFileError(f"token file {str(path)!r}: {len(data):,} bytes is not a whole number of {dtype} "
                                "tokens; say the dtype it was written with (data.dtype: uint16 or uint32)")
        return data
    import numpy as np
    import pyarrow as pa  # type: ignore[import-untyped]

    column = _parquet_column(path, within) if fmt == "parquet" else _dataset_column(path)
    try:  # the rows joined in Arrow, never as Python lists (a 256 MiB file would be gigabytes of int objects)
        values = pa.chunked_array(column).combine_chunks().flatten() if len(column) else pa.array([], pa.int64())
        if not pa.types.is_integer(values.type):
            raise TypeError(f"values of type {values.type}")
        flat = values.to_numpy(zero_copy_only=False).astype(np.int64)
    except (TypeError, ValueError, AttributeError, pa.ArrowException) as e:
        raise DataFileError(f"token file {str(path)!r}: `{TOKENS_FIELD}` rows are not lists of integers ({e})") from None
    limit = 2 ** (8 * TOKEN_DTYPES[dtype])
    if len(flat) and (flat.min() < 0 or flat.max() >= limit):
        raise DataFileError(f"token file {str(path)!r}: ids from {flat.min()} to {flat.max()} do not fit {dtype}; "
                            "data.dtype: uint32 holds ids below 2^32")
    out = flat.astype("<u2" if dtype == "uint16" else "<u4")
    if out.nbytes > MAX_TOKEN_BYTES:
        raise DataFileError(f"token file {str(path)!r}: {len(out):,} tokens are more than {MAX_TOKEN_BYTES:,} bytes")
    return out.tobytes()


def _parquet_column(path: Path, within: Path | None) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    data = read_file(path, MAX_TOKEN_BYTES, "token file", within)  # read once, no-follow; parsed from memory
    try:
        table = pq.read_table(pa.BufferReader(data))
    except Exception as e:
        raise DataFileError(f"token file {str(path)!r}: not a parquet file ({type(e).__name__}: {e})") from None
    if TOKENS_FIELD not in table.column_names:
        raise DataFileError(f"token file {str(path)!r} has no `{TOKENS_FIELD}` column (columns: "
                            f"{', '.join(table.column_names)})")
    return table.column(TOKENS_FIELD)


def _dataset_column(path: Path) -> Any:
    try:
        import datasets
    except ImportError:
        raise DataFileError(f"token folder {str(path)!r} (a save_to_disk dataset) needs the datasets library: "
                            f"{INSTALL_HF}") from None
    try:
        ds = datasets.load_from_disk(str(path))
    except Exception as e:
        raise DataFileError(f"token folder {str(path)!r}: not a dataset saved with save_to_disk "
                            f"({type(e).__name__}: {e})") from None
    if isinstance(ds, datasets.DatasetDict):
        if "train" not in ds:
            raise DataFileError(f"token folder {str(path)!r}: a DatasetDict without a `train` split "
                                f"(splits: {', '.join(ds)})")
        ds = ds["train"]
    if TOKENS_FIELD not in ds.column_names:
        raise DataFileError(f"token folder {str(path)!r} has no `{TOKENS_FIELD}` column (columns: "
                            f"{', '.join(ds.column_names)})")
    return ds.data.column(TOKENS_FIELD)  # its Arrow table's column: no rows decoded


def max_token_id(data: bytes, dtype: str) -> int:
    import numpy as np

    arr = np.frombuffer(data, dtype="<u2" if dtype == "uint16" else "<u4")
    return int(arr.max()) if len(arr) else -1
