"""Running commands inside a network namespace, named (`ip netns add`) or any other (a container's
`/proc/<pid>/ns/net`), through `nsenter --net=PATH`: one code path for our namespaces and Docker's."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from harness.errors import HarnessError

NETNS_DIR = "/run/netns"


class NetCommandError(HarnessError):
    """A network command (ip, tc, ethtool, ...) failed; the message carries its stderr."""


@dataclass(frozen=True)
class NetnsRef:
    """A network namespace by the path of its handle; `path=None` is the caller's own namespace."""

    path: str | None
    label: str = ""

    @classmethod
    def named(cls, name: str) -> NetnsRef:
        return cls(path=f"{NETNS_DIR}/{name}", label=name)

    @classmethod
    def of_pid(cls, pid: int) -> NetnsRef:
        return cls(path=f"/proc/{pid}/ns/net", label=f"pid {pid}")

    @classmethod
    def current(cls) -> NetnsRef:
        return cls(path=None, label="root")

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` as a command that runs inside this namespace (only the network namespace is entered)."""
        return list(argv) if self.path is None else ["nsenter", f"--net={self.path}", *argv]

    def __str__(self) -> str:
        return self.label or str(self.path)


def run(argv: list[str], *, input: str | None = None, check: bool = True, timeout: float = 30.0,
        what: str = "") -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise NetCommandError(f"{what or argv[0]}: command {argv[0]!r} not found") from None
    except subprocess.TimeoutExpired:
        raise NetCommandError(f"{what or ' '.join(argv)}: no answer within {timeout:.0f}s") from None
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().replace("\n", "; ")
        raise NetCommandError(f"{what or ' '.join(argv)} failed (exit {proc.returncode}): {detail}")
    return proc


def run_in(ns: NetnsRef, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("what", f"[{ns}] {' '.join(argv)}")
    return run(ns.wrap(argv), **kwargs)
