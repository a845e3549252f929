"""Network events in the report (issue 18): synthetic run folders whose step times and events are known, so
the windows' means, the time lost, the section and the plot marks can be checked against the answer."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.helpers import make_timed_run

# 0.1 s steps until 2.1 s, ten 1.0 s steps (2.1-12.1 s), then 0.1 s steps again
SLOW_WINDOW = [0.1] * 21 + [1.0] * 10 + [0.1] * 20
STEADY = [0.1] * 151


def _schedule(opt: str, seed: int = 0) -> list[dict]:
    return [{"optimizer": opt, "seed": seed, "t_s": 2.1, "step": 21, "kind": "schedule", "field": "rate",
             "requested": "1Mbit", "detail": "node1 up rate 10Mbit -> 1Mbit"},
            {"optimizer": opt, "seed": seed, "t_s": 12.1, "step": 31, "kind": "schedule", "field": "rate",
             "requested": "10Mbit", "detail": "node1 up rate 1Mbit -> 10Mbit"}]


def _outage(opt: str, seed: int = 0, late: float = 0.0) -> list[dict]:
    # 5 s outage at 2 s: the schedule's clock; the restore row closes it
    return [{"optimizer": opt, "seed": seed, "t_s": 2.0 + late, "scheduled_s": 2.0, "until_s": 7.0, "step": 20,
             "kind": "outage", "field": "down", "requested": "5s", "verified": "down"},
            {"optimizer": opt, "seed": seed, "t_s": 7.0, "until_s": None, "step": 25, "kind": "restore",
             "field": "down", "requested": "up", "verified": "up"}]


def _load(run):
    from distro_bench.report.load import load_for_report

    return load_for_report(run)


def _summary(analysis, optimizer: str, index: int):
    return next(s for s in analysis.summaries if s.optimizer == optimizer and s.index == index)


def test_window_means_and_time_lost_of_a_known_schedule(tmp_path):
    run = _load(make_timed_run(tmp_path, step_times={"adamw": SLOW_WINDOW, "distro": STEADY},
                               events=_schedule("adamw") + _schedule("distro")))
    a = run.events
    down = _summary(a, "adamw", 0)
    assert down.label == "up 1Mbit" and down.at_s == pytest.approx(2.1)
    assert down.before.mean == pytest.approx(0.1, rel=1e-4)
    assert down.during.mean == pytest.approx(1.0, rel=1e-4)
    assert down.after.mean == pytest.approx(0.1, rel=1e-4)  # the 10Mbit change that ends it does not cut `after`
    assert down.lost.mean == pytest.approx(10 * (1.0 - 0.1), rel=1e-4)  # ten steps, 0.9 s each over the pace
    assert down.lost_pct.mean == pytest.approx(900, rel=1e-3)
    back = _summary(a, "adamw", 1)
    assert back.before.mean == pytest.approx(1.0, rel=1e-4) and back.during.mean == pytest.approx(0.1, rel=1e-4)
    assert abs(back.lost.mean) < 1e-3
    # distro's steps never changed: nothing lost
    assert _summary(a, "distro", 0).during.mean == pytest.approx(0.1, rel=1e-4)
    totals = {lo.optimizer: lo for lo in a.losses}
    assert totals["adamw"].lost.mean == pytest.approx(9.0, rel=1e-3)
    assert abs(totals["distro"].lost.mean) < 1e-3
    assert totals["adamw"].largest.label == "up 1Mbit"


def test_an_outage_window_ends_at_until_s_and_restores_get_no_row(tmp_path):
    steps = [0.1] * 20 + [1.0] * 5 + [0.1] * 20  # 1 s steps exactly through the 2-7 s outage
    run = _load(make_timed_run(tmp_path, step_times={"adamw": steps}, events=_outage("adamw")))
    a = run.events
    assert [s.kind for s in a.summaries] == ["outage"]
    s = a.summaries[0]
    assert s.label == "outage 5s"
    assert (s.before.mean, s.during.mean, s.after.mean) == pytest.approx((0.1, 1.0, 0.1), rel=1e-4)
    assert s.lost.mean == pytest.approx(5 * 0.9, rel=1e-4)
    imp = next(i for i in a.impacts if i.change.kind == "outage")
    assert imp.during.end - imp.during.start == pytest.approx(5.0)
    assert imp.before.steps == pytest.approx(19, rel=1e-4)  # 5 s before it, step 0 (warm-up) left out
    assert imp.after.steps == pytest.approx(20, rel=1e-4)  # only 2 s of run left after it


def test_an_outage_inside_a_slow_window_has_its_own_row_and_is_counted_once(tmp_path):
    events = _schedule("adamw")
    events.insert(1, {"optimizer": "adamw", "t_s": 5.1, "until_s": 6.1, "step": 24, "kind": "outage",
                      "field": "down", "requested": "1s"})
    # another node's change inside the window does not end it either
    events.insert(2, {"optimizer": "adamw", "t_s": 8.1, "step": 27, "node": "node2", "kind": "schedule",
                      "field": "loss", "requested": "1%"})
    a = _load(make_timed_run(tmp_path, step_times={"adamw": SLOW_WINDOW}, events=events)).events
    slow, outage = _summary(a, "adamw", 0), _summary(a, "adamw", 1)
    assert slow.label == "node1 up 1Mbit"
    imp = next(i for i in a.impacts if i.change.index == 0)
    assert (imp.during.start, imp.during.end) == pytest.approx((imp.change.start, imp.change.start + 10.0))
    assert slow.during.mean == pytest.approx(1.0, rel=1e-4) and slow.lost.mean == pytest.approx(9.0, rel=1e-4)
    assert outage.before.mean == pytest.approx(1.0, rel=1e-4) and outage.lost.mean == pytest.approx(0.9, rel=1e-4)
    assert a.losses[0].lost.mean == pytest.approx(9.0, rel=1e-3)  # not 9.9: the outage's second counted once


def test_a_step_straddling_a_window_counts_by_its_fraction_inside():
    from distro_bench.report.events import window

    # step 1: a 40 s step from 10 s, which a 5 s window (20-25 s) cuts an eighth out of
    spans = pd.DataFrame({"step": [0, 1, 2], "start": [0.0, 10.0, 50.0], "dur": [10.0, 40.0, 1.0]})
    spans["end"] = spans["start"] + spans["dur"]
    w = window(spans, 20.0, 25.0)
    assert w.steps == pytest.approx(1 / 8) and w.mean_step_s == pytest.approx(40.0)
    assert window(spans, 0.0, 10.0).steps == 0  # step 0 is warm-up
    assert window(spans, 51.0, 60.0).mean_step_s is None


def test_training_clock_stays_flat_across_an_evaluation_gap():
    from distro_bench.report.events import to_elapsed

    # two 1 s steps with a 10 s evaluation between them; the training clock leaves it out
    spans = pd.DataFrame({"step": [0, 1], "start": [100.0, 111.0], "dur": [1.0, 1.0], "elapsed": [1.0, 2.0]})
    spans["end"] = spans["start"] + spans["dur"]
    assert to_elapsed(spans, [100.5, 105.0, 111.5, 113.0]) == pytest.approx([0.5, 1.0, 1.5, 3.0])


def test_several_seeds_are_averaged_with_an_interval(tmp_path):
    per_seed = [[0.1] * 21 + [d] * 10 + [0.1] * 20 for d in (0.8, 1.0, 1.2)]
    events = []
    for seed, d in enumerate((0.8, 1.0, 1.2)):
        down, back = _schedule("adamw", seed)
        events += [down, {**back, "t_s": 2.1 + 10 * d}]  # the link comes back after the ten slow steps
    run = _load(make_timed_run(tmp_path, step_times={"adamw": per_seed}, seeds=3, events=events))
    s = _summary(run.events, "adamw", 0)
    assert s.seeds == 3 and s.during.n == 3
    assert s.during.mean == pytest.approx(1.0, rel=1e-3)
    assert s.during.lo < 0.95 and s.during.hi > 1.05
    # in each seed ten steps of d over a 0.1 s pace: 7, 9 and 11 s lost
    assert s.lost.mean == pytest.approx(9.0, rel=1e-3) and s.lost.half > 1.0
    from distro_bench.report.events_section import loss_sentences

    (total,) = run.events.losses  # two changes (down, back up): the one it lost most to is named
    assert total.lost.mean == pytest.approx(9.0, rel=1e-3) and total.lost.n == 3 and total.lost.lo > 0
    assert total.changes == 2 and total.largest.label == "up 1Mbit" and total.largest.at_s == pytest.approx(2.1)
    # the wording over seeds: a mean with its half-width, the largest change, the seeds (not "within noise")
    (sentence,) = loss_sentences(run.events)
    assert sentence.startswith("adamw lost ") and " ±" in sentence and sentence.endswith("; means of 3 seeds.")
    assert "within noise" not in sentence and "; the most, " in sentence


def test_simultaneous_rows_are_one_change_named_by_their_nodes(tmp_path):
    events = [{**e, "node": node} for node in ("node1", "node2") for e in _schedule("adamw")[:1]]
    run = _load(make_timed_run(tmp_path, step_times={"adamw": SLOW_WINDOW}, events=events))
    assert len(run.events.changes) == 1
    assert run.events.changes[0].label == "2 nodes up 1Mbit" and run.events.changes[0].rows == 2


def test_the_same_change_on_several_nodes_is_one_table_row(tmp_path):
    from distro_bench.report.events_section import events_table

    events = [{**_schedule("adamw")[0], "node": f"node{n}", "t_s": 2.1 + 0.01 * n, "scheduled_s": 2.1}
              for n in range(4)]
    events[3]["verified"], events[3]["ok"] = "2Mbit", False
    a = _load(make_timed_run(tmp_path, step_times={"adamw": SLOW_WINDOW}, events=events)).events
    _, rows, _ = events_table(a)
    assert rows == [["adamw", "2.1 s", "21", "4 nodes", "up 1Mbit", "1Mbit, 2Mbit (mismatch)", "30 ms"]]


def test_fields_changed_together_are_one_change(tmp_path):
    rate = _schedule("adamw")[0]
    loss = {**rate, "field": "loss", "requested": "5%"}
    run = _load(make_timed_run(tmp_path, step_times={"adamw": SLOW_WINDOW}, events=[rate, loss]))
    assert [c.label for c in run.events.changes] == ["up 1Mbit, loss 5%"]


def test_row_labels():
    from distro_bench.report.events import row_label

    assert row_label({"kind": "schedule", "field": "rate", "requested": "1Mbit", "direction": "up"}) == "up 1Mbit"
    assert row_label({"kind": "schedule", "field": "loss", "requested": "5%", "direction": "down"}) == "down loss 5%"
    assert row_label({"kind": "outage", "t_s": 30.1, "until_s": 35.0, "requested": "5s"}) == "outage 5s"
    assert row_label({"kind": "outage", "t_s": 30.1, "scheduled_s": 30.0, "until_s": 35.0}) == "outage 5s"
    assert row_label({"kind": "compute", "field": "compute_scale", "requested": "0.25"}) == "compute 0.25x"
    assert row_label({"kind": "restore"}) == "restored"


def test_report_has_a_network_events_section(tmp_path):
    from distro_bench.report.run_report import write_run_report

    run = make_timed_run(tmp_path, step_times={"adamw": [0.1] * 20 + [1.0] * 5 + [0.1] * 20, "distro": STEADY},
                         events=_outage("adamw") + _outage("distro", late=0.05))
    write_run_report(run)
    losses = {lo.optimizer: lo for lo in _load(run).events.losses}
    assert losses["adamw"].lost.mean == pytest.approx(5 * 0.9, rel=1e-3)  # five 1 s steps over a 0.1 s pace
    assert losses["adamw"].lost_pct.mean == pytest.approx(900, rel=1e-3)
    assert losses["distro"].lost.mean == pytest.approx(0.0, abs=1e-3)
    md = (run / "report.md").read_text()
    section = md[md.index("## Network events"):md.index("## Checks")]
    # the loss sentences' wording, here once (the console prints the same sentences)
    assert "adamw lost 4.5 s (+900%) to outage 5s at 2 s." in section
    assert "distro lost no time to outage 5s at 2 s: 0 s, +0% against its pre-event pace." in section
    assert "| distro | 2.0 s | 20 | node1 | outage 5s | down | 50 ms |" in section  # applied 50 ms late
    assert "| adamw | 7.0 s | 25 | node1 | restored | up | 0 ms |" in section
    assert "| outage 5s @2s | adamw | 100 ms | 1 s | 100 ms | +4.5 s | +900% |" in section
    assert max(len(line) for line in section.splitlines() if line.startswith("|")) <= 80
    html = (run / "report.html").read_text()
    assert "<h2>Network events</h2>" in html and "outage 5s @2s" in html
    assert (run / "plots" / "step_time_vs_time.png").is_file()
    assert "step_time_vs_time.png" in md


def test_a_read_back_mismatch_and_a_trace_are_reported(tmp_path):
    from distro_bench.report.events_section import events_section

    events = [{**_schedule("adamw")[0], "verified": "2Mbit", "ok": False}]
    events += [{"optimizer": "adamw", "t_s": 0.5 * k, "kind": "trace", "field": "rate", "node": "node2",
                "direction": "down", "requested": f"{1 + k % 4}Mbit"} for k in range(12)]
    section = events_section(_load(make_timed_run(tmp_path, step_times={"adamw": SLOW_WINDOW}, events=events)))
    texts = [getattr(b, "text", "") for b in section.blocks]
    rows = next(b.rows for b in section.blocks if getattr(b, "headers", [None])[0] == "run")
    assert rows[0][5] == "2Mbit (mismatch)"
    assert len(rows) == 1  # trace rows are summarised, not listed
    assert any(t.startswith("node2 down followed a recorded trace: 12 rate changes per run, between 1 Mbit/s and "
                            "4 Mbit/s") for t in texts)


def test_a_run_without_events_has_no_section_and_no_marks(tmp_path):
    from distro_bench.report.run_report import write_run_report

    run = make_timed_run(tmp_path, step_times={"adamw": SLOW_WINDOW})
    loaded = _load(run)
    assert loaded.events.empty and not loaded.events.summaries
    files = write_run_report(run)
    assert "Network events" not in (run / "report.md").read_text()
    assert "Network events" not in (run / "report.html").read_text()
    assert not (run / "plots" / "step_time_vs_time.png").exists()
    assert all("step_time_vs_time" not in str(p) for p in files)


def _drawn(monkeypatch, plot, run) -> dict[str, int]:
    """Count the event artists (by gid) a plot function draws, catching its figure before it is saved."""
    from distro_bench.report import plots

    seen = {}
    real_save = plots.save

    def spy(fig, path, root=None):
        for ax in fig.axes:
            for artist in [*ax.lines, *ax.patches, *ax.texts, *ax.collections]:
                gid = artist.get_gid()
                if gid:
                    seen[gid] = seen.get(gid, 0) + 1
        real_save(fig, path, root=root)

    monkeypatch.setattr(plots, "save", spy)
    fig = plot(_load(run), run / "plots")
    return seen if fig is not None else {"no figure": 1}


@pytest.mark.parametrize("name", ["loss_vs_time", "step_time_vs_time"])
def test_time_plots_mark_events_and_draw_a_trace_as_a_line(tmp_path, monkeypatch, name):
    from distro_bench.report import plots

    events = _schedule("adamw") + _outage("distro")
    events += [{"optimizer": "adamw", "t_s": 0.5 * k, "kind": "trace", "field": "rate", "node": "node2",
                "direction": "down", "requested": f"{1 + k % 4}Mbit"} for k in range(12)]
    run = make_timed_run(tmp_path, step_times={"adamw": SLOW_WINDOW, "distro": STEADY}, events=events)
    (run / "plots").mkdir()
    seen = _drawn(monkeypatch, getattr(plots, name), run)
    assert seen.get("event-line") == 3  # adamw's two schedule changes, distro's restore
    assert seen.get("event-span") == 1  # distro's outage window
    assert seen.get("event-label") == 4  # up 1Mbit, up 10Mbit, outage 5s, restored
    assert seen.get("event-trace") == 1  # one line, not twelve marks


def test_loss_vs_time_is_unchanged_without_events_and_differs_with_them(tmp_path, monkeypatch):
    from distro_bench.report import plots

    plain = make_timed_run(tmp_path, "plain", step_times={"adamw": SLOW_WINDOW})
    marked = make_timed_run(tmp_path, "marked", step_times={"adamw": SLOW_WINDOW}, events=_schedule("adamw"))
    for run in (plain, marked):
        (run / "plots").mkdir()
    assert _drawn(monkeypatch, plots.loss_vs_time, plain) == {}
    assert plots.step_time_vs_time(_load(plain), plain / "plots") is None
    plots.loss_vs_time(_load(marked), marked / "plots")
    assert (plain / "plots" / "loss_vs_time.png").read_bytes() != (marked / "plots" / "loss_vs_time.png").read_bytes()


def test_a_straggler_is_named_by_its_node(tmp_path):
    events = [{"optimizer": "adamw", "t_s": 2.1, "until_s": 12.1, "node": "node3", "direction": "", "kind": "compute",
               "field": "compute_scale", "requested": "0.25"}]
    a = _load(make_timed_run(tmp_path, step_times={"adamw": SLOW_WINDOW}, events=events)).events
    s = a.summaries[0]
    assert s.label == "node3 compute 0.25x" and s.during.mean == pytest.approx(1.0, rel=1e-4)


def test_report_command_prints_what_each_optimizer_lost(tmp_path, cli):
    run = make_timed_run(tmp_path, step_times={"adamw": [0.1] * 20 + [1.0] * 5 + [0.1] * 20, "distro": STEADY},
                         events=_outage("adamw") + _outage("distro"))
    from distro_bench.report.events_section import loss_sentences

    r = cli("report", run)
    assert r.exit_code == 0, r.output
    sentences = loss_sentences(_load(run).events)  # their wording: test_report_has_a_network_events_section
    assert [lo.optimizer for lo in _load(run).events.losses] == ["adamw", "distro"] and len(sentences) == 2
    assert all(s in " ".join(r.output.split()) for s in sentences)
    assert all(len(line) <= 80 for line in r.output.splitlines() if "lost" in line)
    plain = make_timed_run(tmp_path, "plain", step_times={"adamw": STEADY})
    assert " lost " not in cli("report", plain).output


def test_a_comparison_says_which_run_had_network_events(tmp_path):
    from distro_bench.report.compare import write_comparison

    plain = make_timed_run(tmp_path, "plain", step_times={"adamw": SLOW_WINDOW})
    marked = make_timed_run(tmp_path, "marked", step_times={"adamw": SLOW_WINDOW}, events=_schedule("adamw"))
    md = write_comparison([plain, marked], tmp_path / "cmp")[0].read_text()
    notes = [line for line in md.splitlines() if "network changed" in line]
    assert len(notes) == 1 and "R2" in notes[0] and "2 network event(s), the first up 1Mbit at 2 s" in notes[0]


def test_a_damaged_events_file_is_a_note_not_a_crash(tmp_path):
    from distro_bench.report.events_section import events_section

    run = make_timed_run(tmp_path, step_times={"adamw": SLOW_WINDOW})
    (run / "events.parquet").write_bytes(b"not parquet")
    section = events_section(_load(run))
    assert section is not None and "events.parquet could not be read" in section.blocks[0].text


def test_a_run_that_a_long_outage_ended_says_so(tmp_path):
    from distro_bench.report.events_section import events_section

    events = [{"optimizer": "adamw", "t_s": 2.0, "until_s": 602.0, "step": 20, "kind": "outage", "field": "down",
               "requested": "10min"}]
    run = _load(make_timed_run(tmp_path, step_times={"adamw": [0.1] * 20 + [3.0]}, events=events))
    (s,) = run.events.summaries
    assert s.run_ended_inside == 1
    section = events_section(run)
    assert "its run ended during outage 10min at 2 s" in section.blocks[0].text
    rows = next(b.rows for b in section.blocks if getattr(b, "headers", [None])[0] == "event")
    assert rows[0][4] == "run ended"


def test_run_command_ends_with_what_each_optimizer_lost(tmp_path, cli, monkeypatch):
    from distro_bench import api
    from distro_bench.run.runner import RunResult

    run = make_timed_run(tmp_path, step_times={"adamw": [0.1] * 20 + [1.0] * 5 + [0.1] * 20},
                         events=_outage("adamw"))
    loaded = api.load_run(run)
    monkeypatch.setattr(api, "run", lambda *a, **k: RunResult(run, "complete", loaded.summary))
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: x\n")
    r = cli("run", scenario)
    assert r.exit_code == 0, r.output
    from distro_bench.report.events_section import loss_sentences

    (sentence,) = loss_sentences(loaded.events)  # its wording: test_report_has_a_network_events_section
    lines = r.output.splitlines()
    assert sentence in lines and lines[-1] == str(run)


def test_a_comparison_measures_the_events_against_a_run_without_them(tmp_path):
    from distro_bench.report.compare import write_comparison
    from distro_bench.report.events import against_unchanged

    plain = make_timed_run(tmp_path, "plain", step_times={"adamw": [0.1] * 51})
    marked = make_timed_run(tmp_path, "marked", step_times={"adamw": SLOW_WINDOW}, events=_schedule("adamw"))
    (f,) = against_unchanged(_load(marked).data.metrics, _load(plain).data.metrics, ["adamw"])
    assert f.steps == 51 and f.extra_s == pytest.approx(9.0, rel=1e-4)
    assert f.extra_pct == pytest.approx(9.0 / 5.1 * 100, rel=1e-3)
    assert f.at_s == pytest.approx(5.0, rel=1e-4)  # plain's last evaluation (step 49)
    assert f.val_with > f.val_without  # at equal time the slowed run has made fewer steps
    md = write_comparison([plain, marked], tmp_path / "cmp")[0].read_text()
    assert "## Network events: R2 synth against R1 synth" in md
    assert "| adamw | 51 | +9 s | +176% | 5 s |" in md
