"""The report of one run: report.md, report.html and plots/*.png, from the stored run folder only."""

from __future__ import annotations

from pathlib import Path

from distro_bench.report import describe, markdown, plots, verdict
from distro_bench.report import html as html_render
from distro_bench.report.bottleneck_section import bottleneck_section
from distro_bench.report.check import measured_text, run_checks
from distro_bench.report.churn_section import churn_section
from distro_bench.report.document import Banner, Block, Document, Para, Section, Table
from distro_bench.report.events_section import events_section
from distro_bench.report.load import LoadedRun, load_for_report
from distro_bench.report.prediction import prediction_section
from distro_bench.report.replay_section import is_replay, replay_section
from distro_bench.results.rundir import atomic_write_text, ensure_report_dir, predicted_optimizers
from distro_bench.scenario.presets import HARDWARE
from distro_bench.scenario.replay import WHAT, fraction_words


def _banners(run: LoadedRun) -> list[Banner]:
    out = []
    if note := run.state_note():
        out.append(Banner("error", note))
    out += [Banner("warn", n) for n in run.notes]
    if not len(run.data.metrics):
        out.append(Banner("error", "No training step was recorded: there is nothing to plot."))
    for name, s in run.summary.optimizers.items():
        if s.replicas_identical is False:
            out.append(Banner("error", f"{name}: the workers ended with different parameters (replicas diverged); "
                                       "its results are not those of one model."))
    if is_replay(run.summary):  # a replay's compute is the profile's by design: no hardware stood in for it
        fractions = {n: float(s.replay_fraction or (s.replay or {}).get("fraction") or 1.0)
                     for n, s in run.summary.optimizers.items()}
        out.append(Banner("info", f"A {WHAT}: nothing was trained. The workers sent the messages the byte model "
                                  f"predicts for each method over the links, with compute from the hardware profiles; "
                                  f"{fraction_words(fractions)} (see Replay)."))
    else:
        out += _hardware_banners(run)
    net = run.data.environment.get("network")
    if isinstance(net, dict) and net.get("network_emulated") is False:
        out.append(Banner("warn", f"The network was NOT emulated ({net.get('backend', 'this')} backend): step and "
                                  "communication times do not reflect the scenario's links; bytes per step do."))
    return out


def _hardware_banners(run: LoadedRun) -> list[Banner]:
    """A profile that asks for a GPU the host lacks (this host's CPU stood in, step times are its own, not the
    profile's), and a host busy with other work when the run started (its step times include contention)."""
    out = []
    hardware = run.data.scenario.get("hardware") or {}
    devices = {st.get("device") for st in describe.worker_starts(run).values()}
    if devices and all(str(d).startswith("cpu") for d in devices):
        asked = {}
        for g in run.data.scenario.get("workers") or []:
            hw = g.get("hardware") if isinstance(g, dict) else None
            spec = hardware.get(hw) or HARDWARE.get(hw) if isinstance(hw, str) else hw
            # `device: auto` asks for whatever the host has (a GPU if any, else its CPU): no GPU was asked for
            # unless the profile names one (`cuda`) or a GPU's throughput (`tflops`) for the CPU to stand in for.
            if isinstance(spec, dict) and (spec.get("tflops") or spec.get("device") == "cuda") \
                    and spec.get("device") != "cpu":
                asked[hw if isinstance(hw, str) else "inline"] = spec.get("tflops")
        if asked:
            what = ", ".join(f"{n} ({t:g} TFLOPS GPU)" if t else f"{n} (a GPU)" for n, t in asked.items())
            out.append(Banner("warn", f"Hardware profile not present: {what} asked for, but every worker trained on "
                                      "this host's CPU. Step and compute times are this CPU's (stretched by "
                                      "compute_scale), not the profile's; bytes and losses per step are unaffected."))
    env = run.data.environment
    load, cores = env.get("load_avg"), env.get("cpu_count")
    if isinstance(load, list) and load and isinstance(cores, int) and cores and load[0] > 0.5 * cores:
        out.append(Banner("warn", f"The host was busy when the run started: load average {load[0]:.1f} on {cores} "
                                  "cores. Step times include that contention; compare them only with runs on an idle "
                                  "host with care."))
    return out


def _reduction_sentences(run: LoadedRun) -> list[str]:
    out = []
    for name, s in run.summary.optimizers.items():
        red = s.reduction_vs_baseline
        if name == run.baseline or red is None:
            continue
        verb = "fewer" if red >= 1 else "more"
        factor = red if red >= 1 else 1 / red
        out.append(f"{name} exchanges {describe.fmt_reduction(factor)} {verb} bytes per worker per step than "
                   f"{run.baseline} ({s.reduction_basis or 'payload'} bytes, sent + received).")
    return out


def _checks_section(run: LoadedRun) -> Section:
    report = run_checks(run)
    rows = [[r.check, r.optimizer or "-", measured_text(r), r.threshold, r.status, r.note]
            for r in report.results]
    return Section("Checks (thresholds from the scenario)", [
        Para("What `distro-bench check` reports for this run with the scenario's own thresholds."),
        Table(["check", "optimizer", "measured", "threshold", "result", "note"], rows,
              numeric=[False, False, True, False, False, False])])


def verdict_section(run: LoadedRun) -> Section | None:
    """One block per optimizer against the baseline (harness/distro_bench/report/verdict.py, shared with `run`'s output)."""
    summary = run.data.summary  # the verdict's functions take the mapping
    found = verdict.verdicts(summary)
    if not found:
        return None
    scenario = run.summary.run.scenario or run.data.scenario.get("name")
    blocks: list = [Para("In one line: " + "; ".join(verdict.headline(v, summary) for v in found) + ".")]
    if ranked := verdict.ranking(summary):
        blocks.append(Para(f"Ranking of all {len(ranked)} optimizers by mean, not a test: by time to target (restricted "
                           "means: a seed that missed counts the horizon, intervals within it), then by val loss at "
                           f"equal time; bytes per worker per step, tx + rx, {ranked[0].bytes_basis}."))
        blocks.append(Table(verdict.RANKING_COLUMNS, verdict.ranking_rows(ranked),
                            numeric=[True, False, True, False, True, True, True]))
    decisions = {v.optimizer: verdict.decision(v, summary) for v in found}
    local = run.summary.run.backend == "local"
    for v in found:
        d = decisions[v.optimizer]
        if d.decided:
            blocks.append(Para(f"{verdict.heading(v, summary)}: {verdict.sentence(v, scenario)}"))
        else:  # the figures side by side, labelled as what they are: no table reads as a verdict it is not
            blocks.append(Para(f"{verdict.heading(v, summary)}: no verdict ({d.why}). The figures below are "
                               f"measurements{' on loopback' if local else ''}, side by side, not a verdict."))
        blocks.append(Table(["figure", v.optimizer, f"{v.baseline} (baseline)",
                             "comparison" if d.decided else "difference (no verdict)"],
                            [list(r) for r in verdict.rows(v)], numeric=[False, True, True, False]))
        blocks += [Para(f"Note: {n}.") for n in v.notes]
    target = run.summary.target
    if target is not None and target.get("how"):
        blocks.append(Para(f"Target: val loss {describe.fmt(target.get('val_loss'), '.4g')}, {target['how']}. "
                           "Times to target are read on each method's own evaluations, interpolated between the two "
                           "that bracket the crossing, with intervals that carry that width; loss at equal wall-clock "
                           "is each "
                           "optimizer's validation loss at the shortest optimizer's wall-clock, at equal steps at the "
                           "smallest step count all reached."
                           + (" Each side's ± is a 95% Student-t interval over seeds; every comparison is paired seed "
                              "by seed (the same initial weights and data order): a loss gap's interval is that of the "
                              "per-seed differences, a speed-up's [lo, hi] that of the per-seed ratios (a t-interval "
                              "of their logarithms)."
                              if any((v.seeds or 1) > 1 for v in found) else "")))
    title = "Verdict" if any(d.decided for d in decisions.values()) else "Comparison (no verdict)"
    return Section(title, blocks)


def build_document(run: LoadedRun, plots_dir: Path) -> Document:
    s = run.summary.run
    title = f"distro-bench report: {run.data.scenario.get('name', run.data.name)}"
    subtitle = (f"Run {run.data.name}; backend {s.backend or run.data.environment.get('backend', 'unknown')}; "
                f"state {run.state}; {s.world_size or '?'} workers; started {s.started or 'unknown'}.")
    figures = plots.run_plots(run, plots_dir)
    summary_blocks: list[Block] = [describe.summary_table(run)]
    summary_blocks += [Para(t) for t in _reduction_sentences(run)]
    summary_blocks.append(Para("Bytes are per worker per step, step 0 excluded; the step time is the slowest worker's; "
                               "final loss is the training loss over the last 10% of steps, final val loss the "
                               "held-out loss at the last evaluation."))
    replay = is_replay(run.summary)
    sections = [
        *filter(None, [replay_section(run.summary, predicted_optimizers(run.data.path)) if replay
                       else verdict_section(run)]),
        Section("Scenario", describe.scenario_blocks(run)),
        Section("Summary", summary_blocks),
        *filter(None, [bottleneck_section(run.summary, run.data.scenario)]),
        *filter(None, [events_section(run), churn_section(run)]),
        *([] if replay else [_checks_section(run)]),  # a replay has no loss for a gate to read
        Section("Plots", figures or [Para("No plots: no training step was recorded.")]),
        *filter(None, [prediction_section(run)]),
        Section("What was and was not emulated", describe.emulation_blocks(run)),
        Section("Environment", [describe.environment_table(run)]),
    ]
    return Document(title=title, subtitle=subtitle, banners=_banners(run), sections=sections)


def write_run_report(run_dir: Path | str | LoadedRun, out: Path | str | None = None) -> list[Path]:
    """Write report.md, report.html and plots/*.png for the run folder, or a run already loaded with
    `load_for_report` (into `out` if given); return the paths."""
    run = run_dir if isinstance(run_dir, LoadedRun) else load_for_report(run_dir)
    out = ensure_report_dir(Path(out) if out is not None else run.data.path)
    doc = build_document(run, out / "plots")
    md_path, html_path = out / "report.md", out / "report.html"
    atomic_write_text(md_path, markdown.render(doc, md_path), root=out)
    atomic_write_text(html_path, html_render.render(doc), root=out)
    figures = [b.path for sec in doc.sections for b in sec.blocks if hasattr(b, "path")]
    return [md_path, html_path, *figures]
