"""Files inside a run folder, read and written without following a link the harness did not make.

A run folder is data, possibly forged: `report`, `check`, `export` and `compare` run as root on folders that
other users can write. So, below the folder the user named (which is followed: `results/latest` may be a
link the user made):

- every folder on the way to a file is opened with O_NOFOLLOW, one component at a time from a descriptor of
  the one above (no window between a check and its use); the harness never makes a link in a run folder,
  so a link met there is refused (`RunFileError`, exit 2, naming the path);
- a write goes to a new file beside the target (O_CREAT|O_EXCL|O_NOFOLLOW) that is then renamed over it;
- a read opens the file with O_NOFOLLOW|O_NONBLOCK and judges the open descriptor (fstat): a FIFO, a device,
  a socket or a folder is refused, and so is a file above the cap of its kind (`CAPS`), read no further
  than the cap either (a file that grows after fstat);
- an error names the file and what is wrong with it, never the file's contents.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path, PurePath

from distro_bench.errors import InputError, RunFolderWriteError

MiB = 2**20
# The most bytes read from one run-folder file of each kind (docs/run-folder.md "Reading a run folder"). Each
# is far above what a real run writes (a summary of 100 optimizers is ~1 MiB; a rank's records of 1e6 steps
# ~600 MiB) and low enough that a forged file cannot exhaust memory.
CAPS: dict[str, int] = {
    "summary.json": 16 * MiB,
    "status.json": 1 * MiB,
    "environment.json": 16 * MiB,
    "prediction.json": 16 * MiB,
    "scenario.yaml": 8 * MiB,
    "metrics.parquet": 512 * MiB,
    "events.parquet": 64 * MiB,
    "rank.jsonl": 1024 * MiB,
    "plot.png": 32 * MiB,
    "report.md": 64 * MiB,
    "report.html": 256 * MiB,
    "summary.csv": 16 * MiB,
}
# Rows of a parquet table (a parquet file is compressed: its size does not bound the memory it takes)
MAX_PARQUET_ROWS = 20_000_000
# Folders deeper than this below a run folder are not looked into (ours go four deep: workers/<opt>/seed<S>/)
MAX_DEPTH = 16
# Entries looked at when a run folder is searched for links; past this the search stops (reads and writes
# still refuse any link they meet)
MAX_ENTRIES = 1_000_000

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class RunFileError(InputError):
    """A run-folder file refused: a link, not a regular file, above its cap, or not what the harness writes."""


def link_error(path: Path | str) -> RunFileError:
    return RunFileError(f"{path}: a symbolic link inside the run folder; distro-bench never makes one there and "
                        "neither reads nor writes through it (remove the link)")


def _kind_of(mode: int) -> str:
    return ("a symbolic link" if stat.S_ISLNK(mode) else "a folder" if stat.S_ISDIR(mode)
            else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")


def _parts(rel: str | PurePath) -> tuple[str, ...]:
    parts = PurePath(rel).parts
    if PurePath(rel).is_absolute() or any(p in ("..", "") for p in parts):
        raise ValueError(f"{rel}: not a path inside a run folder")
    return tuple(p for p in parts if p != ".")


def _refused(dir_fd: int, name: str, path: Path, e: OSError) -> Exception:
    """Why opening `name` (in `dir_fd`) with O_NOFOLLOW failed: a link, something else, or the OSError itself."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return e
    if stat.S_ISLNK(st.st_mode):
        return link_error(path)
    return e


def open_dir(root: Path, rel: str | PurePath = "", *, create: bool = False) -> int:
    """A descriptor of root/rel: `root` followed (the user named it), every component of `rel` opened with
    O_NOFOLLOW (made first when `create`). RunFileError for a link on the way; FileNotFoundError when a
    folder is missing and not `create`; NotADirectoryError for a file where a folder should be."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    path = Path(root)
    try:
        for name in _parts(rel):
            path = path / name
            if create:
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                raise _refused(fd, name, path, e) from None
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


def lstat(root: Path, rel: str | PurePath) -> os.stat_result | None:
    """What root/rel is (not following a link at its end), or None when it is absent."""
    *folders, name = _parts(rel)
    try:
        fd = open_dir(root, PurePath(*folders) if folders else "")
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    finally:
        os.close(fd)


def is_file(root: Path, rel: str | PurePath) -> bool:
    """root/rel exists and is a regular file; a link there is refused (RunFileError), not followed."""
    st = lstat(root, rel)
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise link_error(Path(root, rel))
    return st is not None and stat.S_ISREG(st.st_mode)


def read_bytes(root: Path, rel: str | PurePath, kind: str | None = None, *, head: int | None = None) -> bytes:
    """The bytes of root/rel, a regular file within the cap of its kind (CAPS; default the file's name), or
    only its first `head` bytes. FileNotFoundError when absent; RunFileError for anything else refused."""
    *folders, name = _parts(rel)
    path = Path(root, rel)
    cap = CAPS[kind or name]
    try:
        dir_fd = open_dir(root, PurePath(*folders) if folders else "")
        try:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0),
                             dir_fd=dir_fd)
            except OSError as e:
                raise _refused(dir_fd, name, path, e) from None
        finally:
            os.close(dir_fd)
    except (FileNotFoundError, RunFileError):
        raise
    except OSError as e:  # a file where a folder should be, no permission, a name too long
        raise RunFileError(f"{path}: cannot be opened ({(e.strerror or type(e).__name__).lower()})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise RunFileError(f"{path}: {_kind_of(st.st_mode)}, not a regular file; refused")
    with os.fdopen(fd, "rb") as f:
        if head is None and st.st_size > cap:
            raise RunFileError(f"{path}: {st.st_size} bytes, above the cap of {cap} bytes ({cap // MiB} MiB) "
                               f"for {kind or name}; refused")
        want = min(head, cap) if head is not None else cap
        try:
            data = f.read(want + (0 if head is not None else 1))
        except OSError as e:
            raise RunFileError(f"{path}: cannot be read ({(e.strerror or type(e).__name__).lower()})") from None
    if head is None and len(data) > cap:
        raise RunFileError(f"{path}: above the cap of {cap} bytes for {kind or name} (it grew while read); refused")
    return data


def read_text(root: Path, rel: str | PurePath, kind: str | None = None) -> str:
    try:
        return read_bytes(root, rel, kind).decode("utf-8")
    except UnicodeDecodeError:
        raise RunFileError(f"{Path(root, rel)}: not UTF-8 text") from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number a run folder holds")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999
        raise ValueError("a number beyond the float range is not one a run folder holds")
    return value


def parse_json(text: str | bytes, path: Path | str) -> object:
    """JSON as the harness writes it: NaN and Infinity refused (the writer stores null), as are nesting deep
    enough to exhaust the parser and integers of thousands of digits. RunFileError naming the file and where."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as e:
        raise RunFileError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except (ValueError, RecursionError) as e:  # NaN/Infinity, a 5000-digit integer, 100k levels of nesting
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e).split(";")[0].split(":")[0]
        raise RunFileError(f"{path}: not valid JSON ({why})") from None


def read_json(root: Path, rel: str | PurePath, kind: str | None = None) -> object:
    return parse_json(read_bytes(root, rel, kind), Path(root, rel))


def _walk(root: Path, rel: str | PurePath = "", only: tuple[str, ...] | None = None
          ) -> Iterator[tuple[PurePath, str, os.stat_result]]:
    """(folder relative to `root`, name, lstat) of every entry below root/rel that is no link, to MAX_DEPTH,
    nothing followed: a link is refused (RunFileError naming it; the harness never makes one, so any link is
    foreign), and so is a tree of more than MAX_ENTRIES entries (what cannot be checked is not read). `only`:
    just these entries of root/rel (and what is below them)."""
    stack = [PurePath(*_parts(rel))]
    top = stack[0]
    seen = 0
    while stack:
        folder = stack.pop()
        try:
            fd = open_dir(root, folder)
        except (FileNotFoundError, NotADirectoryError):
            continue
        try:
            for name in os.listdir(fd):
                if only is not None and folder == top and name not in only:
                    continue
                seen += 1
                if seen > MAX_ENTRIES:
                    raise RunFileError(f"{Path(root, rel)}: more than {MAX_ENTRIES} entries; refused")
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    raise link_error(Path(root, folder, name))
                if stat.S_ISDIR(st.st_mode) and len(folder.parts) < MAX_DEPTH:
                    stack.append(folder / name)
                yield folder, name, st
        finally:
            os.close(fd)


def iter_files(root: Path, rel: str | PurePath, pattern: str) -> Iterator[PurePath]:
    """The regular files below root/rel (any depth up to MAX_DEPTH) whose name matches `pattern`, as paths
    relative to `root`, sorted; links are refused (RunFileError), FIFOs and the like passed over."""
    yield from sorted(folder / name for folder, name, st in _walk(root, rel)
                      if stat.S_ISREG(st.st_mode) and fnmatch.fnmatchcase(name, pattern))


def refuse_links(root: Path, only: tuple[str, ...] | None = None) -> None:
    """RunFileError naming the first link found in the run folder (searched to MAX_DEPTH and MAX_ENTRIES
    without following anything): the harness never makes one, so any link there is foreign. `only`: just
    these entries of `root` (and what is below them), for a folder that is not all ours (`report --out`)."""
    for _ in _walk(root, only=only):
        pass


def write_bytes(root: Path, rel: str | PurePath, data: bytes) -> Path:
    """root/rel replaced atomically by `data`: a new file beside it (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0666 less
    the umask) renamed over it; folders below `root` made as needed, none of them (nor the target) a link.
    RunFileError for a link; RunFolderWriteError for a failed write ("no space left on device writing <path>")."""
    *folders, name = _parts(rel)
    path = Path(root, rel)
    try:
        Path(root).mkdir(parents=True, exist_ok=True)
        dir_fd = open_dir(root, PurePath(*folders) if folders else "", create=True)
    except RunFileError:
        raise
    except OSError as e:
        raise RunFolderWriteError.of(e, path) from None
    tmp = None
    try:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise link_error(path)
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise RunFileError(f"{path}: a folder where distro-bench writes a file; refused")
        tmp = f".{name}.{secrets.token_hex(6)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                     0o666, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        tmp = None
    except OSError as e:
        if isinstance(e, RunFolderWriteError):
            raise
        raise RunFolderWriteError.of(e, path) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
        os.close(dir_fd)
    return path
