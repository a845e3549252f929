"""A corpus on disk, a text file or a folder of text files, found and read within caps.

The harness often runs as root and every rank reads the whole corpus into memory (one int64 token per
byte): a scenario's `corpus: /` walked the whole filesystem, `/dev/zero` never ended, a FIFO blocked and an
8 GiB sparse file was read until memory ran out. So: regular files only (a folder's symlinks are not
followed, its FIFOs and devices are skipped), at most MAX_CORPUS_BYTES in all, at most MAX_CORPUS_FILES
files out of at most MAX_WALK_ENTRIES entries looked at, each file opened once (O_NOFOLLOW, non-blocking)
and checked on its open descriptor. Validation reads it (harness/distro_bench/scenario/problems.py), the run copies
those bytes into its folder (data/corpus.txt) and the workers read that copy: a file or folder swapped for a
symlink after validation reaches no worker.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from distro_bench.scenario.confined import ConfinedReadError, kind_of, read_confined

TEXT_SUFFIXES = {".txt", ".md", ".rst", ".py", ".json", ".yaml", ".yml", ".csv", ".tex", ".html"}
MAX_CORPUS_BYTES = 64 * 2**20  # 64 MiB of bytes: 512 MiB of int64 tokens per rank; ~140x builtin:pydoc
MAX_CORPUS_FILES = 10_000
MAX_WALK_ENTRIES = 100_000


class CorpusError(ValueError):
    """A corpus that cannot be read within the rules; the message names the path and what is valid."""


def _stat(path: Path) -> os.stat_result:
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise CorpusError(f"no such file or folder {str(path)!r}") from None
    except (OSError, ValueError) as e:  # a symlink loop, a name too long, a NUL
        raise CorpusError(f"{str(path)!r} cannot be read ({getattr(e, 'strerror', None) or e})") from None


def corpus_files(path: Path) -> list[tuple[Path, int]]:
    """(file, size) of every file the corpus at `path` is read from, in order; CorpusError past a cap."""
    st = _stat(path)
    if stat.S_ISREG(st.st_mode):
        if st.st_size > MAX_CORPUS_BYTES:
            raise CorpusError(f"{str(path)!r} is {st.st_size:,} bytes; a corpus is at most {MAX_CORPUS_BYTES:,} bytes "
                              f"({MAX_CORPUS_BYTES // 2**20} MiB)")
        return [(path, st.st_size)]
    if not stat.S_ISDIR(st.st_mode):
        raise CorpusError(f"{str(path)!r} is {kind_of(st.st_mode)}; a corpus is a text file or a folder of text files")
    files: list[tuple[Path, int]] = []
    total = seen = 0
    # Iterative, symlinks not followed: a loop or a link to / cannot make the walk endless.
    stack = [path]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as e:
            raise CorpusError(f"folder {str(folder)!r} cannot be listed ({e.strerror or e})") from None
        subfolders = []
        for entry in entries:
            seen += 1
            if seen > MAX_WALK_ENTRIES:
                raise CorpusError(f"folder {str(path)!r} holds more than {MAX_WALK_ENTRIES:,} entries; a corpus folder "
                                  f"holds at most {MAX_CORPUS_FILES:,} text files")
            if entry.is_dir(follow_symlinks=False):
                subfolders.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False) and Path(entry.name).suffix.lower() in TEXT_SUFFIXES:
                size = entry.stat(follow_symlinks=False).st_size
                total += size
                files.append((Path(entry.path), size))
                if len(files) > MAX_CORPUS_FILES or total > MAX_CORPUS_BYTES:
                    raise CorpusError(f"folder {str(path)!r} holds more than {MAX_CORPUS_FILES:,} text files or "
                                      f"{MAX_CORPUS_BYTES:,} bytes ({MAX_CORPUS_BYTES // 2**20} MiB), the caps of a corpus")
        stack.extend(reversed(subfolders))
    if not files:
        raise CorpusError(f"folder {str(path)!r} holds no text files ({', '.join(sorted(TEXT_SUFFIXES))})")
    files.sort(key=lambda f: f[0])  # the order the corpus was always read in: sorted paths
    return files


def _read_one(path: Path, budget: int, within: Path | None = None) -> bytes:
    try:
        return read_confined(path, budget, within).data
    except ConfinedReadError as e:
        if e.why in ("missing", "unopenable"):
            why = "No such file or directory" if e.why == "missing" else e.detail
            raise CorpusError(f"{str(path)!r} cannot be opened ({why}; symlinks in a corpus folder are not "
                              "followed)") from None
        if e.why == "not_regular":
            raise CorpusError(f"{str(path)!r} is {e.detail}, not a regular file") from None
        if e.why == "outside":
            raise CorpusError(f"{str(path)!r}: the file opened is {e.detail}, outside {within} (a folder on the way "
                              "is a symlink out of it)") from None
        raise CorpusError(f"{str(path)!r}: the corpus grew past {MAX_CORPUS_BYTES:,} bytes while it was read") from None


def read_corpus(path: Path, within: Path | None = None) -> bytes:
    """The corpus's bytes (a folder's files joined by a blank line), each file opened once and checked on its
    descriptor (with `within`: to lie in that folder), the whole within MAX_CORPUS_BYTES."""
    files = corpus_files(path)
    if len(files) == 1 and files[0][0] == path:
        return _read_one(path, MAX_CORPUS_BYTES, within)
    parts, left = [], MAX_CORPUS_BYTES
    for p, _ in files:
        data = _read_one(p, left, within)
        left -= len(data)
        parts.append(data)
    return b"\n\n".join(parts)
