"""Progress of a run on the console: Rich bars on a terminal, plain lines on stderr otherwise (logs, CI, `| cat`).

Both implement runner.ProgressSink. `make_progress()` picks by whether stdout is a terminal. The runner feeds
them through run/progress.py's `AcrossRanks`.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from distro_bench.cli.console import console as default_console
from distro_bench.results.format import fmt_bytes, fmt_seconds

STARTING = "starting workers"


class Overall:
    """Every training of the run together (each optimizer x seed, `plan` says how many): the time since the first
    started and, once one has finished, an ETA: the mean wall time of the finished ones (start-up included)
    times those left, less what the current one has run. None before: start-up dominates a first run's
    seconds, and a time budget's steps are not known in advance."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.planned: int | None = None
        self.t0: float | None = None
        self.current: float | None = None
        self.done: list[float] = []

    def plan(self, trainings: int) -> None:
        self.planned = trainings

    def start(self) -> None:
        now = self.clock()
        self.t0 = now if self.t0 is None else self.t0
        self.current = now

    def finish(self) -> None:
        if self.current is not None:
            self.done.append(self.clock() - self.current)
            self.current = None

    def eta_s(self) -> float | None:
        if not self.planned or not self.done:
            return None
        running = self.clock() - self.current if self.current is not None else 0.0
        left = self.planned - len(self.done)
        return max(0.0, sum(self.done) / len(self.done) * left - running)

    def text(self) -> str:
        """'all: run 2 of 6, 41 s, ETA ~1.6 min' ('ETA after the first run' until one has finished)."""
        elapsed = self.clock() - (self.t0 if self.t0 is not None else self.clock())
        which = min(len(self.done) + (self.current is not None), self.planned or 0)
        head = f"run {which} of {self.planned}, " if self.planned else ""
        eta = self.eta_s()
        tail = "" if not self.planned else (", ETA after the first run" if eta is None else f", ETA ~{fmt_seconds(eta)}")
        return f"all: {head}{fmt_seconds(elapsed)}{tail}"


class RichProgress:
    """One live bar per optimizer with loss, step time, bytes per step and the time elapsed, and one for the whole
    run (`plan`) with its ETA once a training has finished (`Overall`). No time remaining per bar: a time
    budget's steps are not known in advance, and start-up (model, data, connections) dominates the first
    seconds, so an estimate would mislead; until the first step the bar says so."""

    def __init__(self, console=None):
        self.progress = Progress(
            TextColumn("[bold]{task.description:<12}"), BarColumn(bar_width=24), MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"), TextColumn("loss {task.fields[loss]}"),
            TextColumn("{task.fields[step_time]}/step (slowest rank)"), TextColumn("{task.fields[mb]}/step"),
            TextColumn("elapsed"), TimeElapsedColumn(),
            console=console or default_console, transient=False,
        )
        self.tasks: dict[str, int] = {}
        self.overall = Overall()
        self.overall_task: int | None = None

    def __enter__(self):
        self.progress.start()
        return self

    def plan(self, trainings: int) -> None:
        """One more bar for the whole run: trainings done of `trainings`, elapsed, and the ETA once known."""
        self.overall.plan(trainings)
        self.overall_task = self.progress.add_task("all runs", total=trainings, loss="-", step_time="-", mb="-",
                                                   status="ETA after the first run")

    def _update_overall(self) -> None:
        if self.overall_task is not None:
            eta = self.overall.eta_s()
            self.progress.update(self.overall_task, completed=len(self.overall.done),
                                 status="ETA after the first run" if eta is None else f"ETA ~{fmt_seconds(eta)}")

    def __exit__(self, *exc):
        self.progress.stop()

    def note(self, text: str) -> None:
        self.progress.console.print(f"[dim]{escape(text)}[/]")

    def start(self, optimizer: str, total_steps: int | None) -> None:
        # total None (a time or target budget): the bar counts steps without an end
        self.tasks[optimizer] = self.progress.add_task(optimizer, total=total_steps, loss="-", step_time="-", mb="-",
                                                       status=STARTING)
        self.overall.start()

    def step(self, optimizer: str, r: dict) -> None:
        self.progress.update(self.tasks[optimizer], completed=r["step"] + 1, loss=fmt_loss(r["loss"]), status="",
                             step_time=fmt_seconds(r["step_time_s"]),
                             mb=fmt_bytes(r["payload_tx_bytes"] + r["payload_rx_bytes"]))
        self._update_overall()

    def finish(self, optimizer: str) -> None:
        self.overall.finish()
        self._update_overall()


def fmt_loss(loss: float | None) -> str:
    """A step's loss; `-` where nothing trained (a replay)."""
    return "-" if loss is None else f"{loss:.3f}"


class PlainProgress:
    """A plain line every `every` steps or every `interval_s` seconds, whichever comes first, on `stream`.

    `every` defaults to a tenth of the steps, so a run prints about ten lines per optimizer."""

    def __init__(self, stream: TextIO | None = None, every: int | None = None, interval_s: float = 10.0,
                 clock=time.monotonic):
        self.stream = stream or sys.stderr
        self.every, self.interval_s, self.clock = every, interval_s, clock
        self.total: dict[str, int | None] = {}
        self.started: dict[str, float] = {}
        self.last_line: dict[str, float] = {}
        self.last_step: dict[str, int] = {}
        self.last_record: dict[str, dict] = {}
        self.overall = Overall(clock)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def plan(self, trainings: int) -> None:
        """How many trainings (optimizer x seed) the run holds: each line then ends with the run's overall
        elapsed time and ETA (`Overall`)."""
        self.overall.plan(trainings)

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def note(self, text: str) -> None:
        self._print(text)

    def start(self, optimizer: str, total_steps: int | None) -> None:
        now = self.clock()
        self.total[optimizer], self.started[optimizer], self.last_line[optimizer] = total_steps, now, now
        self.last_step[optimizer] = -1
        self.overall.start()
        self._print(f"{optimizer}: {STARTING}, then training {total_steps} steps" if total_steps else
                    f"{optimizer}: {STARTING}, then training to its budget (steps not known in advance)")

    def _line(self, optimizer: str, r: dict) -> str:
        total = self.total.get(optimizer)
        elapsed = self.clock() - self.started.get(optimizer, self.clock())
        of = f"/{total}" if total else ""
        return (f"{optimizer}: step {r['step'] + 1}{of}, loss {fmt_loss(r['loss'])}, "
                f"{fmt_seconds(r['step_time_s'])}/step (slowest rank), "
                f"{fmt_bytes(r['payload_tx_bytes'] + r['payload_rx_bytes'])}/step, {elapsed:.0f} s elapsed"
                + (f"; {self.overall.text()}" if self.overall.planned else ""))

    def step(self, optimizer: str, r: dict) -> None:
        self.last_record[optimizer] = r
        total = self.total.get(optimizer)
        every = self.every or (max(1, total // 10) if total else 10)
        now = self.clock()
        done = r["step"] + 1
        if done % every == 0 or done == total or now - self.last_line.get(optimizer, now) >= self.interval_s:
            self.last_line[optimizer], self.last_step[optimizer] = now, r["step"]
            self._print(self._line(optimizer, r))

    def finish(self, optimizer: str) -> None:
        r = self.last_record.get(optimizer)
        if r is not None and self.last_step.get(optimizer) != r["step"]:
            self._print(self._line(optimizer, r))
        self.overall.finish()


def make_progress(interactive: bool | None = None):
    """Rich bars when stdout is a terminal, else plain lines on stderr."""
    if interactive is None:
        interactive = default_console.is_terminal
    return RichProgress() if interactive else PlainProgress()
