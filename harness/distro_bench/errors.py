"""Error types the library raises; the CLI turns each into one readable line and an exit code."""

from __future__ import annotations


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
