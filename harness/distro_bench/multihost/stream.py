"""`distro-bench node --stream`: the agent's side of a launcher's pipe (the ssh backend, run/remote.py).

On stdout, JSON lines in run/launch.py's vocabulary: the agent's notes, each optimizer's start and finish, every
record its workers write (tailed from their rank<R>.jsonl, as the single-host runner tails them) and a heartbeat
every HEARTBEAT_S with the agent's state and its workers' last heartbeats, so the launcher sees progress and
liveness without a second connection.

On stdin, nothing but its end: when the launcher goes away (Ctrl-C, killed, its SSH connection dropped), sshd
closes the pipe and the agent takes its SIGTERM path (shaping removed, records kept, node 0's folder finished),
as it would if the launcher had been a terminal that was closed.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from distro_bench.multihost.store import HEARTBEAT_S
from distro_bench.run.launch import encode, worker_heartbeat
from distro_bench.train.liveness import RecordTail


def interrupt_self() -> None:
    """The SIGTERM path (run/lifecycle.py sigterm_as_interrupt): Ctrl-C's clean teardown."""
    os.kill(os.getpid(), signal.SIGTERM)


class HostStream:
    def __init__(self, node_rank: int, out: IO[str] | None = None, stdin_fd: int = 0,
                 on_eof: Callable[[], None] = interrupt_self):
        self.node_rank = node_rank
        self._out = out or sys.stdout
        self._stdin_fd = stdin_fd
        self._on_eof = on_eof
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._dir: Path | None = None  # the current optimizer's worker folder
        self._tails: dict[int, RecordTail] = {}
        self._run: dict[str, Any] = {}
        self._state: Callable[[], str] = lambda: "starting"

    # ---- lines out --------------------------------------------------------------------------------------------
    def emit(self, event: str, **fields: Any) -> None:
        line = encode(event, self.node_rank, **fields) + "\n"
        with self._lock:
            try:
                self._out.write(line)
                self._out.flush()
            except (OSError, ValueError):  # the launcher is gone: stdin's end tells the agent to stop
                pass

    def note(self, text: str) -> None:
        self.emit("note", text=text)

    def start(self, state: Callable[[], str]) -> None:
        """The heartbeat and the watch on stdin, from now until close()."""
        self._state = state
        threading.Thread(target=self._beat, daemon=True, name="stream heartbeat").start()
        threading.Thread(target=self._watch_stdin, daemon=True, name="stream stdin").start()

    def _beat(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                d, ranks = self._dir, list(self._tails)
            workers = {str(r): worker_heartbeat(d, r) for r in ranks} if d is not None else {}
            self.emit("heartbeat", state=self._state(), workers=workers)
            self._stop.wait(HEARTBEAT_S)

    def _watch_stdin(self) -> None:
        # os.read on the descriptor, not sys.stdin: a daemon thread blocked in a buffered reader holds its lock,
        # and the interpreter aborts at exit when it cannot take it ("could not acquire lock for <stdin>").
        try:
            while os.read(self._stdin_fd, 4096):
                pass
        except OSError:
            pass
        if not self._stop.is_set():
            self._on_eof()

    # ---- one optimizer ----------------------------------------------------------------------------------------
    def begin(self, optimizer: str, seed: int, out: Path, ranks: list[int], total_steps: int | None) -> None:
        with self._lock:
            self._dir, self._tails = out, {r: RecordTail(out / f"rank{r}.jsonl") for r in ranks}
        self._run = {"optimizer": optimizer, "seed": seed}
        self.emit("start", **self._run, total_steps=total_steps)

    def pump(self) -> None:
        """Every record written since the last call, as it was written."""
        with self._lock:
            tails = list(self._tails.values())
        for tail in tails:
            for rec in tail.new_records():
                self.emit("record", **self._run, record=rec)

    def finish(self, rc: object) -> None:
        self.pump()
        self.emit("finish", **self._run, rc=rc)
        with self._lock:
            self._dir, self._tails = None, {}

    def close(self, state: str, reason: str | None, run_dir: Path | None) -> None:
        self._stop.set()
        self.emit("end", state=state, reason=reason, run_dir=str(run_dir) if run_dir else None)
