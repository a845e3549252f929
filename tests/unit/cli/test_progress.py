"""Plain progress lines (no TTY): with a known step count and with a budget whose steps are not known."""

from __future__ import annotations

from io import StringIO

from distro_bench.cli.progress import PlainProgress


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

    from distro_bench.cli.progress import RichProgress

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


def _rank_record(rank: int, step: int, step_time: float) -> dict:
    return {"type": "step", "optimizer": "distro", "rank": rank, "step": step, "seed": 0, "loss": 3.0 + rank,
            "val_loss": None, "lr": 1e-3, "step_time_s": step_time, "data_s": 0.0, "compute_s": step_time / 2,
            "stretch_s": 0.0, "compress_s": 0.0, "comm_s": 0.01, "apply_s": 0.0, "t_start": 100.0 + step,
            "t_ready": 100.0 + step + step_time / 2, "train_time_s": float(step), "payload_tx_bytes": 1000,
            "payload_rx_bytes": 3000, "collectives": 1, "ring_bytes": 1000.0, "wire_tx_bytes": None,
            "wire_rx_bytes": None, "tokens": 64, "param_checksum": None}


def test_live_progress_summary_and_verdict_show_the_slowest_ranks_step_time():
    """Issue 27: rank 0 fast (0.1 s), rank 1 slow (0.4 s): progress used to show rank 0's 0.1 s while the
    summary and the verdict read 0.4 s. Every place shows the slowest rank's figure now."""
    from distro_bench.report.verdict import rows, verdicts
    from distro_bench.results.format import fmt_seconds
    from distro_bench.results.metrics import records_to_frame, summarize_optimizer
    from distro_bench.run.progress import AcrossRanks

    steps, fast, slow = 5, 0.1, 0.4
    records = [_rank_record(rank, s, fast if rank == 0 else slow) for s in range(steps) for rank in (0, 1)]
    out = StringIO()
    plain = PlainProgress(stream=out, every=1, clock=lambda: 0.0)
    plain.start("distro", steps)
    live = AcrossRanks(plain, ranks=2)
    for r in records:  # the runner's order: every rank's new records in turn
        live.step("distro", r)
    plain.finish("distro")
    lines = out.getvalue().splitlines()[1:]
    assert len(lines) == steps  # one line per step, once both ranks wrote it
    assert all(f"{fmt_seconds(slow)}/step (slowest rank)" in ln for ln in lines), lines
    assert all(f"{fmt_seconds(fast)}/step" not in ln for ln in lines)
    assert all("loss 3.500" in ln for ln in lines)  # the mean over ranks, as the summary's final_loss

    s = summarize_optimizer(records_to_frame(records), {})
    assert s["step_time_s_mean"] == s["step_time_s_p50"] == slow

    base = dict(s, step_time_s_mean=2 * slow)
    (v,) = verdicts({"baseline": "adamw", "optimizers": {"adamw": base, "distro": dict(s)}})
    (row,) = [r for r in rows(v) if r[0] == "step time"]
    assert row[1].startswith(f"{slow:g}"), row


def test_a_periodic_methods_syncs_count_in_the_mean_step_time_the_last_one_amortised():
    """DiLoCo-style: local steps of 0.1 s, a sync step (step 3) of 1.0 s on the slowest rank, and the final
    sync after the last step (each rank's `end` record, 0.6 s on the slowest): the mean amortises both, the
    median is the typical local step."""
    from distro_bench.results.metrics import records_to_frame, summarize_optimizer

    records = [_rank_record(rank, s, (1.0 if s == 3 else 0.1) - 0.05 * rank) for s in range(6) for rank in (0, 1)]
    ends = [{"type": "end", "rank": rank, "final_sync_comm_s": 0.6 - 0.1 * rank} for rank in (0, 1)]
    s = summarize_optimizer(records_to_frame(records), {}, ends)
    # steps 1-5 (step 0 left out): 0.1, 0.1, 1.0, 0.1, 0.1, plus the 0.6 s final sync over those 5 steps
    assert abs(s["step_time_s_mean"] - (0.1 * 4 + 1.0 + 0.6) / 5) < 1e-9
    assert s["step_time_s_p50"] == 0.1


def test_one_overall_line_with_elapsed_and_an_eta_once_a_training_has_finished():
    # Issue 52: each training restarted its elapsed count and nothing said how long the whole run would take
    t = [0.0]
    out = StringIO()
    p = PlainProgress(stream=out, every=5, clock=lambda: t[0])
    p.plan(3)
    for name in ["adamw seed 0", "distro seed 0", "adamw seed 1"]:
        p.start(name, 5)
        for s in range(5):
            t[0] += 2.0
            p.step(name, _record(s))
        p.finish(name)
        t[0] += 10.0  # start-up of the next training
    lines = [ln for ln in out.getvalue().splitlines() if "step 5/5" in ln]
    assert lines[0].endswith("; all: run 1 of 3, 10 s, ETA after the first run")
    # after one training of 10 s (its start-up not yet seen), two left: ~20 s less the 10 s the second has run
    assert lines[1].endswith("; all: run 2 of 3, 30 s, ETA ~10 s"), lines[1]
    assert lines[2].endswith("; all: run 3 of 3, 50 s, ETA ~0 s"), lines[2]


def test_rich_progress_adds_a_bar_for_the_whole_run():
    from rich.console import Console

    from distro_bench.cli.progress import RichProgress

    p = RichProgress(console=Console(file=StringIO(), width=200, color_system=None))
    p.plan(2)
    p.start("adamw seed 0", 3)
    p.step("adamw seed 0", _record(0))
    p.finish("adamw seed 0")
    c = Console(file=StringIO(), width=200, color_system=None)
    c.print(p.progress.get_renderable())
    shown = c.file.getvalue()
    assert "all runs" in shown and "1/2" in shown and "ETA ~" in shown
