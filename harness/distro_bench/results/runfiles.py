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
import re
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
    "rank.log": 1024 * MiB,
    "rank.hb": 4096,
    "owner.json": 64 * 1024,
    "sweep.json": 16 * MiB,
}
# Rows of a parquet table (a parquet file is compressed: its size does not bound the memory it takes)
MAX_PARQUET_ROWS = 20_000_000
# Columns of a parquet table, and the bytes its columns take once decoded (the metadata's uncompressed sizes,
# and text columns counted row by row from their dictionary: 2,000 rows naming one 2 MiB string are 4 GiB).
# Ours: ~45 columns; 1e6 steps of them ~400 MiB.
MAX_PARQUET_COLUMNS = 256
MAX_PARQUET_BYTES = 1024 * MiB
# Lines of one JSON-lines file and bytes of one line (a step record is ~600 bytes; 1e6 steps of 8 ranks)
MAX_JSONL_LINES = 10_000_000
MAX_LINE_BYTES = 1 * MiB
# Files of one pattern read from one folder (iter_files): ours hold one per rank and seed
MAX_FILES = 10_000
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


# What a name from data may not hold to become one component of a path: a separator, a control character
# (C0, C1, DEL) or a bidirectional override (it would show another name than the one written).
_NOT_IN_NAME = re.compile("[/\\\\\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
MAX_NAME_BYTES = 255  # NAME_MAX on Linux


def safe_name(name: object, what: str) -> str:
    """`name` (an optimizer, a scenario, a sweep value: anything from a run folder or a scenario) as one path
    component, or RunFileError naming `what` and why: empty, `.` or `..`, a separator, a control character
    or a bidirectional override, or longer than NAME_MAX. Every name from data that becomes a path goes
    through here (safe_join), so no such name can point outside the folder it is joined to."""
    text = name if isinstance(name, str) else None
    why = ("not text" if text is None else "empty" if text == "" else "`.` or `..`" if text in (".", "..")
           else "holds a path separator, a control character or a bidirectional override" if _NOT_IN_NAME.search(text)
           else f"longer than {MAX_NAME_BYTES} bytes" if len(text.encode("utf-8", "replace")) > MAX_NAME_BYTES
           else None)
    if why is not None:
        raise RunFileError(f"{what} {ascii(name)[:120]}: not usable as a file or folder name ({why}); refused")
    assert text is not None
    return text


def safe_join(root: Path | str, *names: object, what: str = "a name") -> Path:
    """root/name/...: each name one safe component (safe_name), so the result lies below `root`."""
    path = Path(root)
    for n in names:
        path = path / safe_name(n, what)
    return path


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


def _open_regular(root: Path, rel: str | PurePath, cap: int, kind: str, *, whole: bool) -> tuple[int, os.stat_result]:
    """A descriptor of root/rel opened as every run-folder file is: each folder and the file itself with
    O_NOFOLLOW, the file O_NONBLOCK (a FIFO opens at once instead of waiting for a writer), judged by fstat:
    a regular file, and when `whole` (it is read whole) at most `cap` bytes. The caller closes it."""
    *folders, name = _parts(rel)
    path = Path(root, rel)
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
    if whole and st.st_size > cap:
        os.close(fd)
        raise RunFileError(f"{path}: {st.st_size} bytes, above the cap of {cap} bytes ({_size(cap)}) for {kind}; "
                           "refused")
    return fd, st


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n} bytes"


def read_bytes(root: Path, rel: str | PurePath, kind: str | None = None, *, head: int | None = None,
               offset: int = 0, tail: int | None = None, capped: bool | None = None) -> bytes:
    """The bytes of root/rel, a regular file within the cap of its kind (CAPS; default the file's name); or
    only `head` bytes from `offset` (a file still being written: the whole file is held to its cap too when
    `capped`), or its last `tail` bytes (a log's end). FileNotFoundError when absent; RunFileError
    for anything else refused. The same reader serves a stored run folder and a live one (the coordinator
    reading its workers' records, logs and heartbeats while they run): a worker's files are as untrusted."""
    kind = kind or _parts(rel)[-1]
    path = Path(root, rel)
    cap = CAPS[kind]
    whole = (head is None and tail is None) if capped is None else capped
    fd, st = _open_regular(root, rel, cap, kind, whole=whole)
    with os.fdopen(fd, "rb") as f:
        want = cap if head is None and tail is None else min(head if head is not None else tail or 0, cap)
        try:
            if tail is not None:
                f.seek(max(0, st.st_size - want))
            elif offset:
                f.seek(offset)
            data = f.read(want + (1 if head is None and tail is None else 0))
        except OSError as e:
            raise RunFileError(f"{path}: cannot be read ({(e.strerror or type(e).__name__).lower()})") from None
    if head is None and tail is None and len(data) > cap:
        raise RunFileError(f"{path}: above the cap of {cap} bytes for {kind} (it grew while read); refused")
    return data


def iter_lines(root: Path, rel: str | PurePath, kind: str, *, max_lines: int = MAX_JSONL_LINES,
               max_line: int = MAX_LINE_BYTES) -> Iterator[str]:
    """The lines of root/rel (opened as read_bytes opens it, held to its cap), read a line at a time so memory
    stays at one line: a line longer than `max_line` bytes or more than `max_lines` lines is a RunFileError
    naming the file and the limit (a sparse 1,000 MiB file of NULs is one line far too long). Bytes that are
    not UTF-8 are replaced (the line then fails as JSON, as a cut line does)."""
    path = Path(root, rel)
    fd, _ = _open_regular(root, rel, CAPS[kind], kind, whole=True)
    with os.fdopen(fd, "rb") as f:
        for count in range(max_lines + 1):
            try:
                line = f.readline(max_line + 1)
            except OSError as e:
                raise RunFileError(f"{path}: cannot be read ({(e.strerror or type(e).__name__).lower()})") from None
            if not line:
                return
            if count == max_lines:
                raise RunFileError(f"{path}: more than {max_lines} lines, the limit for {kind}; refused")
            if len(line) > max_line:
                raise RunFileError(f"{path}: line {count + 1} is longer than {max_line} bytes, the limit for a line "
                                   f"of {kind}; refused")
            yield line.decode("utf-8", "replace")


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
    found: list[PurePath] = []
    for folder, name, st in _walk(root, rel):
        if stat.S_ISREG(st.st_mode) and fnmatch.fnmatchcase(name, pattern):
            found.append(folder / name)
            if len(found) > MAX_FILES:
                raise RunFileError(f"{Path(root, rel)}: more than {MAX_FILES} files named {pattern}, the limit read "
                                   "from one folder; refused")
    yield from sorted(found)


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
