"""What every launcher reads of its workers while they train, in one place: their per-step records and heartbeats.

The single-host runner (run/runner.py) reads them where its backend says (`Backend.records` and `Backend.heartbeat`:
by default the files its workers write in the run folder, read by train/liveness.py's RecordTail); the multi-host
agent (multihost/agent.py) reads the same files on its host and, driven by a launcher over a pipe (`distro-bench
node --stream`, the ssh backend), passes them on as JSON lines on stdout; the ssh launcher (run/remote.py) reads
those lines back. One vocabulary for the stream, so the two ends cannot drift:

    {"event": "start",     "node_rank": 1, "optimizer": "adamw", "seed": 0, "total_steps": 30}
    {"event": "record",    "node_rank": 1, "optimizer": "adamw", "seed": 0, "record": {...rank<R>.jsonl line...}}
    {"event": "heartbeat", "node_rank": 1, "state": "running", "workers": {"2": [14, "communicate", 0.8]}}
    {"event": "finish",    "node_rank": 1, "optimizer": "adamw", "seed": 0, "rc": 0}
    {"event": "note",      "node_rank": 1, "text": "host 1: shaped eth1 (up 10Mbit, down 50Mbit)"}
    {"event": "end",       "node_rank": 1, "state": "complete", "reason": null, "run_dir": "/tmp/.../ci-smoke-..."}
"""

from __future__ import annotations

import ctypes
import json
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distro_bench.results import runfiles
from distro_bench.train.liveness import heartbeat_age, read_heartbeat

EVENTS = ("start", "record", "heartbeat", "finish", "note", "end")


def worker_heartbeat(out: Path, rank: int) -> list | None:
    """[step, phase, age in seconds] of rank's heartbeat file in `out`, or None before its first beat."""
    beat, age = read_heartbeat(out / f"rank{rank}.hb"), heartbeat_age(out / f"rank{rank}.hb")
    return None if beat is None else [beat[0], beat[1], round(age or 0.0, 1)]


def term_with_parent() -> None:
    """preexec_fn of a launched child (torchrun, ssh): SIGTERM when its launcher dies, however it dies."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


def log_tail(path: Path, lines: int = 15, max_bytes: int = 64 * 1024) -> str:
    """The last `lines` lines of a worker's log (its last `max_bytes` bytes at most), read as every run-folder
    file is (results/runfiles.py: a link, a FIFO or a device in its place is not read); "" when there is none."""
    try:
        data = runfiles.read_bytes(Path(path).parent, Path(path).name, "rank.log", tail=max_bytes)
    except (OSError, runfiles.RunFileError):
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def encode(event: str, node_rank: int, **fields: Any) -> str:
    """One stream line (no newline)."""
    assert event in EVENTS, event
    return json.dumps({"event": event, "node_rank": node_rank, **fields}, default=str, separators=(",", ":"))


@dataclass(frozen=True)
class Event:
    event: str
    node_rank: int
    fields: dict[str, Any] = field(default_factory=dict)


def decode(line: str) -> Event | None:
    """A stream line as an Event; None for anything else (a stray print of a library on stdout is not an event)."""
    try:
        d = json.loads(line)
    except ValueError:
        return None
    if not isinstance(d, dict) or d.get("event") not in EVENTS or not isinstance(d.get("node_rank"), int):
        return None
    return Event(d.pop("event"), d.pop("node_rank"), d)
