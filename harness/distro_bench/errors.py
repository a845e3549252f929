"""Error types the library raises; the CLI turns each into one readable line and an exit code."""

from __future__ import annotations

import re

# C0 and C1 control characters, DEL, the bidirectional marks, embeddings, overrides and isolates that reorder
# what a terminal shows (U+202E turns `txt.exe` into `exe.txt`), and the Unicode line separators: a name or a
# message carrying `\x1b]0;...` or `\x1b[2J` must not drive the user's terminal. Newline and tab are kept
# unless `oneline`.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_ONELINE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def terminal_text(text: object, *, oneline: bool = False) -> str:
    """`text` made safe to print: each control character shown as \\xNN (or \\uNNNN), nothing else changed.
    The one escape for the terminal: every string from a run folder, a scenario or another host goes through
    it before it is printed (the CLI's markup_text adds Rich's markup escape on top). `oneline`: newline and
    tab shown too (a field that is one line, so a forged one cannot print a line of its own)."""
    return (_CONTROL_ONELINE if oneline else _CONTROL).sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", str(text))


class HarnessError(Exception):
    """Base class: a problem a user can act on. `exit_code` follows the CLI contract."""

    exit_code = 1


class InputError(HarnessError):
    """Bad input (scenario, flag, run folder): exit 2."""

    exit_code = 2


class ScenarioError(InputError):
    """A scenario with one or more located problems ("workers[1].link: unknown link 'dls'")."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(problems))


class CapabilityError(HarnessError):
    """The host cannot emulate what was asked (missing qdisc, no root, no engine): exit 2."""

    exit_code = 2


class WorkerFailed(HarnessError):
    """A worker exited non-zero, hung, or was killed."""

    def __init__(self, message: str, rank: int | None = None, log_tail: str = ""):
        self.rank = rank
        self.log_tail = log_tail
        super().__init__(message)


class Interrupted(HarnessError):
    """Ctrl-C or SIGTERM during a run: exit 130."""

    exit_code = 130


class RunFolderWriteError(HarnessError, OSError):
    """A run-folder file could not be written (disk full, read-only, gone): the cause and the path in one line.
    Still an OSError, so code that tolerates a failed write keeps doing so."""

    @classmethod
    def of(cls, e: OSError, path) -> RunFolderWriteError:
        import os

        why = os.strerror(e.errno) if e.errno else str(e)
        err = cls(f"{why[:1].lower()}{why[1:]} writing {path}")
        err.errno = e.errno
        return err
