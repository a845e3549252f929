"""Plain progress lines (no TTY): with a known step count and with a budget whose steps are not known."""

from __future__ import annotations

from io import StringIO

from harness.progress import PlainProgress


def _record(step: int) -> dict:
    return {"step": step, "loss": 3.0, "step_time_s": 0.5, "payload_tx_bytes": 1000, "payload_rx_bytes": 3000}


def _run(total: int | None, steps: int) -> list[str]:
    t = [0.0]
    out = StringIO()
    p = PlainProgress(stream=out, clock=lambda: t[0])
    p.start("distro", total)
    for s in range(steps):
        p.step("distro", _record(s))
    p.finish("distro")
    return out.getvalue().splitlines()


def test_known_total_prints_every_tenth_and_the_last():
    lines = _run(50, 50)
    assert lines[0] == "distro: starting workers, then training 50 steps"
    assert [ln.split(",")[0] for ln in lines[1:]] == [f"distro: step {k}/50" for k in range(5, 51, 5)]


def test_unknown_total_of_a_time_budget_counts_steps_without_an_end():
    lines = _run(None, 25)
    assert "budget" in lines[0] and "None" not in "".join(lines)
    # every 10 steps, then the last step at finish
    assert [ln.split(",")[0] for ln in lines[1:]] == ["distro: step 10", "distro: step 20", "distro: step 25"]


def test_rich_bar_says_starting_workers_and_elapsed_never_a_literal_eta():
    from rich.console import Console

    from harness.progress import RichProgress

    def shown(p) -> str:
        c = Console(file=StringIO(), width=160, color_system=None)
        c.print(p.progress.get_renderable())
        return c.file.getvalue()

    p = RichProgress(console=Console(file=StringIO(), width=160, color_system=None))
    p.start("distro", 30)
    first = shown(p)
    p.step("distro", _record(0))
    then = shown(p)
    assert "starting workers" in first and "starting workers" not in then
    assert "elapsed" in then and "ETA" not in first + then
