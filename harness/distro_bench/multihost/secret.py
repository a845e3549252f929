"""The run's secret, which every agent must hold to use the agents' store (multihost/channel.py): from
`--secret-file`, else the environment variable DISTRO_BENCH_SECRET, else (node-rank 0 only) made here and
printed, for the operator to hand to the other hosts. Never taken from the command line: argv is readable
by every user of the host (/proc/PID/cmdline)."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from distro_bench.errors import InputError
from distro_bench.scenario import environ

ENV = environ.SECRET
MIN_CHARS = 32  # 16 random bytes as hex at least; `make()` gives 32 bytes (64 hex digits)


def make() -> str:
    return secrets.token_hex(32)


def _checked(text: str, where: str) -> bytes:
    text = text.strip()
    if len(text) < MIN_CHARS or any(c.isspace() or not c.isprintable() for c in text):
        raise InputError(f"{where}: the secret must be one line of at least {MIN_CHARS} printable characters without "
                         f"spaces (got {len(text)}); make one with `python -c 'import secrets; "
                         "print(secrets.token_hex(32))'`")
    return text.encode()


def read_file(path: Path) -> bytes:
    """The secret in PATH, which only its owner may read (as ssh's private keys)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"--secret-file: {path} is not a regular file")
        if st.st_mode & 0o077:
            raise InputError(f"--secret-file: {path} is readable by others (mode {stat.S_IMODE(st.st_mode):04o}); "
                             f"`chmod 600 {path}`")
        with open(path, encoding="utf-8") as f:
            text = f.read(4096)
    except OSError as e:
        raise InputError(f"--secret-file: cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"--secret-file: {path} is not text") from None
    return _checked(text, f"--secret-file {path}")


def resolve(secret_file: Path | None, node_rank: int) -> tuple[bytes, bool]:
    """(the secret, whether it was made here). InputError for a host other than node-rank 0 without one."""
    if secret_file is not None:
        return read_file(secret_file), False
    if os.environ.get(ENV):
        return _checked(os.environ[ENV], ENV), False
    if node_rank != 0:
        raise InputError(f"--node-rank {node_rank}: no secret for the agents' store; give the one node-rank 0 printed "
                         f"(or that every host shares) with --secret-file FILE (mode 600) or {ENV}")
    return make().encode(), True
