"""One line for a failed worker or torchrun: the cause its workers printed, without the C++ stack traces that torch
attaches to every c10d/gloo error (dozens of `frame #N:` lines per worker, two or more per failure)."""

from __future__ import annotations

import re

# `frame #3: c10d::... (0x7f.. in libtorch.so)`, `Exception raised from recvFromRank at ...`, and the banner
# of torchrun's ChildFailedError summary: what a user reads past to find the cause.
_RANK = r"(?:\[(?:default)?rank\d+\]:\s*)?"  # torch prefixes each line of a worker's error with `[rank1]: `
_NOISE = re.compile(r"^\s*" + _RANK + r"(frame #\d+:|Exception raised from |\(most recent call first\)|=+$|-+$)")
_CAUSE = re.compile(r"^" + _RANK + r"((?:[\w.]+\.)?(\w*(?:Error|Exception)\w*)): (.+)$")
# Gloo prefixes its message with its source location: `[../third_party/gloo/.../pair.cc:534] Connection ...`
_SOURCE = re.compile(r"^\[[^\]]+\.(?:cc|cpp|h):\d+\]\s*")
_SENTENCE = re.compile(r"(?<=[^.])\. (?=[A-Z])")
_WRAPPERS = {"ChildFailedError"}  # torchrun's summary of the failure, not its cause


def without_cpp_frames(text: str) -> str:
    """`text` less the C++ stack frames and separators."""
    return "\n".join(line for line in text.splitlines() if not _NOISE.match(line))


# torchrun's summary of a worker that raised nothing (killed): `rank : 0 (local_rank: 0)`, `exitcode : -9 (pid: 1)  (SIGKILL)`
_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
_ROOT_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)\s*\(pid: \d+\)\s*(?:\((\w+)\))?")


def cause(text: str) -> str | None:
    """The first exception a worker raised (`RuntimeError: Connection closed by peer [10.0.0.2]:40405`), else
    torchrun's root cause (`worker rank 0 exited with code -9 (SIGKILL)`), or None when the log names neither."""
    for line in text.splitlines():
        m = _CAUSE.match(line.strip())
        if m and m.group(2) not in _WRAPPERS:
            message = _SOURCE.sub("", m.group(3)).strip()
            # gloo's "Connection closed by peer [addr]:port. This is typically caused by ... GLHF!": the first sentence
            first = _SENTENCE.split(message, maxsplit=1)[0].rstrip(".")
            return f"{m.group(2)}: {first}"
    lines = text.split("Root Cause", 1)[1].splitlines() if "Root Cause" in text else []
    rank = next((m.group(1) for line in lines if (m := _ROOT_RANK.match(line))), None)
    code = next((m for line in lines if (m := _ROOT_EXIT.match(line))), None)
    if code is not None:
        who = f"worker rank {rank}" if rank is not None else "a worker"
        return f"{who} exited with code {code.group(1)}" + (f" ({code.group(2)})" if code.group(2) else "")
    return None


# What a worker says when a peer's end of a connection went away: the peer's failure, not its own.
_PEER_GONE = re.compile(r"Connection (closed|reset) by peer|Socket closed|Broken pipe", re.IGNORECASE)


def peer_gone(said: str | None) -> bool:
    """Whether a cause (cause()'s line) is a peer's connection closing under this worker."""
    return bool(said and _PEER_GONE.search(said))
