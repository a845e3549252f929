"""Progress of a run: Rich bars on a terminal, plain lines on stderr otherwise (logs, CI, `| cat`).

Both implement runner.ProgressSink. `make_progress()` picks by whether stdout is a terminal. The runner feeds
them through `AcrossRanks`, so the step time shown live is the one the summary, verdict and report use: the
slowest rank's `step_time_s` of that step (docs/run-folder.md, "Step time").
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from distro_bench.results.format import fmt_bytes, fmt_seconds
from distro_bench.run.console import console as default_console

STARTING = "starting workers"


def step_time_of(records: list[dict]) -> float:
    """A step's time: the slowest rank's `step_time_s` (a synchronous step ends with its slowest rank; a
    periodic method's local steps are timed the same way, its sync steps carry the sync). metrics.py's
    summary applies the same rule per step before its mean and median."""
    return max(float(r["step_time_s"]) for r in records)


class AcrossRanks:
    """Feeds `sink` one record per step once every rank has written it: step time by `step_time_of`, loss and
    payload bytes the mean over ranks (as the summary's). Ranks write their steps in order, so steps come out
    in order; a step some rank never wrote (it died) is not shown."""

    def __init__(self, sink, ranks: int):
        self.sink, self.ranks = sink, ranks
        self.pending: dict[tuple[str, int], dict[int, dict]] = {}

    def step(self, optimizer: str, r: dict) -> None:
        if int(r["step"]) < 0:  # the evaluation before the first step (train/loop.py initial_evaluation): no step
            return
        got = self.pending.setdefault((optimizer, int(r["step"])), {})
        got[int(r.get("rank", 0))] = r
        if len(got) < int(r.get("members") or self.ranks):  # with churn, the workers present at that step
            return
        del self.pending[(optimizer, int(r["step"]))]
        recs = [got[k] for k in sorted(got)]
        n = len(recs)
        self.sink.step(optimizer, {
            **recs[0], "rank": None, "ranks": n, "step_time_s": step_time_of(recs),
            "slowest_rank": max(recs, key=lambda x: float(x["step_time_s"]))["rank"],
            "loss": sum(float(x["loss"]) for x in recs) / n,
            "payload_tx_bytes": sum(x["payload_tx_bytes"] for x in recs) / n,
            "payload_rx_bytes": sum(x["payload_rx_bytes"] for x in recs) / n,
        })


class RichProgress:
    """One live bar per optimizer with loss, step time, bytes per step and the time elapsed. No time
    remaining: a time budget's steps are not known in advance, and start-up (model, data, connections)
    dominates the first seconds, so an estimate would mislead; until the first step the bar says so."""

    def __init__(self, console=None):
        self.progress = Progress(
            TextColumn("[bold]{task.description:<12}"), BarColumn(bar_width=24), MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"), TextColumn("loss {task.fields[loss]}"),
            TextColumn("{task.fields[step_time]}/step (slowest rank)"), TextColumn("{task.fields[mb]}/step"),
            TextColumn("elapsed"), TimeElapsedColumn(),
            console=console or default_console, transient=False,
        )
        self.tasks: dict[str, int] = {}

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.progress.stop()

    def note(self, text: str) -> None:
        self.progress.console.print(f"[dim]{escape(text)}[/]")

    def start(self, optimizer: str, total_steps: int | None) -> None:
        # total None (a time or target budget): the bar counts steps without an end
        self.tasks[optimizer] = self.progress.add_task(optimizer, total=total_steps, loss="-", step_time="-", mb="-",
                                                       status=STARTING)

    def step(self, optimizer: str, r: dict) -> None:
        self.progress.update(self.tasks[optimizer], completed=r["step"] + 1, loss=f"{r['loss']:.3f}", status="",
                             step_time=fmt_seconds(r["step_time_s"]),
                             mb=fmt_bytes(r["payload_tx_bytes"] + r["payload_rx_bytes"]))

    def finish(self, optimizer: str) -> None:
        pass


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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def note(self, text: str) -> None:
        self._print(text)

    def start(self, optimizer: str, total_steps: int | None) -> None:
        now = self.clock()
        self.total[optimizer], self.started[optimizer], self.last_line[optimizer] = total_steps, now, now
        self.last_step[optimizer] = -1
        self._print(f"{optimizer}: {STARTING}, then training {total_steps} steps" if total_steps else
                    f"{optimizer}: {STARTING}, then training to its budget (steps not known in advance)")

    def _line(self, optimizer: str, r: dict) -> str:
        total = self.total.get(optimizer)
        elapsed = self.clock() - self.started.get(optimizer, self.clock())
        of = f"/{total}" if total else ""
        return (f"{optimizer}: step {r['step'] + 1}{of}, loss {r['loss']:.3f}, "
                f"{fmt_seconds(r['step_time_s'])}/step (slowest rank), "
                f"{fmt_bytes(r['payload_tx_bytes'] + r['payload_rx_bytes'])}/step, {elapsed:.0f} s elapsed")

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


def make_progress(interactive: bool | None = None):
    """Rich bars when stdout is a terminal, else plain lines on stderr."""
    if interactive is None:
        interactive = default_console.is_terminal
    return RichProgress() if interactive else PlainProgress()
