"""Live progress of a run in the terminal (Rich): one bar per optimizer with loss, step time and MB/step."""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from harness.console import console


class RichProgress:
    def __init__(self):
        self.progress = Progress(
            TextColumn("[bold]{task.description:<12}"), BarColumn(bar_width=24), MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"), TextColumn("{task.fields[step_time]}/step"),
            TextColumn("{task.fields[mb]} MB/step"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=console, transient=False,
        )
        self.tasks: dict[str, int] = {}

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.progress.stop()

    def note(self, text: str) -> None:
        self.progress.console.print(f"[dim]{text}[/]")

    def start(self, optimizer: str, total_steps: int) -> None:
        self.tasks[optimizer] = self.progress.add_task(optimizer, total=total_steps, loss="-", step_time="-", mb="-")

    def step(self, optimizer: str, r: dict) -> None:
        mb = (r["payload_tx_bytes"] + r["payload_rx_bytes"]) / 1e6
        self.progress.update(self.tasks[optimizer], completed=r["step"] + 1, loss=f"{r['loss']:.3f}",
                             step_time=f"{r['step_time_s']:.2f}s", mb=f"{mb:.3g}")

    def finish(self, optimizer: str) -> None:
        pass
