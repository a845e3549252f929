"""One way to read a file a scenario names (a corpus file, a trace, a model's or data's file): opened once,
O_NOFOLLOW (its last component must not be a symlink, so callers pass resolved paths) and non-blocking (a FIFO
cannot hang), judged on the open descriptor (a regular file; with `within`, the file opened lies in that folder,
by the descriptor's own path, so a folder on the way swapped for a symlink is caught), and read within a cap.

The run copies these bytes into its folder, never the path read again (issue 51). Each caller words its own
errors (a corpus, a trace and a data file say different things about what is valid): `ConfinedReadError.why`
says which rule failed and carries the facts to word it.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Why = Literal["missing", "unopenable", "not_regular", "outside", "too_big"]


class ConfinedReadError(Exception):
    """Why a file could not be read: `why` names the rule; `detail` is the OS's reason (unopenable), what the
    file is (not_regular: "a folder", "a FIFO", ...), the path actually opened (outside) or the size seen
    (too_big, None when the file grew past the cap while it was read)."""

    def __init__(self, why: Why, detail: object = None, symlink: bool = False) -> None:
        super().__init__(why, detail)
        self.why = why
        self.detail = detail
        self.symlink = symlink  # unopenable because the last component is a symlink (ELOOP)


@dataclass(frozen=True)
class ConfinedFile:
    """A file's bytes as read once, with its permission bits (a run folder's copy keeps a private file private)."""

    path: Path
    data: bytes
    mode: int


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket")


def read_confined(path: Path, cap: int, within: Path | None = None) -> ConfinedFile:
    """The regular file at `path`, at most `cap` bytes of it; ConfinedReadError otherwise (see the module)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ConfinedReadError("missing") from None
    except OSError as e:
        raise ConfinedReadError("unopenable", e.strerror or type(e).__name__, symlink=e.errno == errno.ELOOP) from None
    except ValueError as e:  # a NUL in the path
        raise ConfinedReadError("unopenable", str(e)) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # checked before fdopen, which refuses a folder with its own error
        os.close(fd)
        raise ConfinedReadError("not_regular", kind_of(st.st_mode))
    with os.fdopen(fd, "rb") as f:
        if within is not None:
            try:
                real = Path(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:  # no /proc: the resolved path the caller checked stands
                real = path
            if not real.is_relative_to(within):
                raise ConfinedReadError("outside", real)
        if st.st_size > cap:
            raise ConfinedReadError("too_big", st.st_size)
        data = f.read(cap + 1)  # a file that grew after fstat stops at the cap too
    if len(data) > cap:
        raise ConfinedReadError("too_big", None)
    return ConfinedFile(path=path, data=data, mode=stat.S_IMODE(st.st_mode))
