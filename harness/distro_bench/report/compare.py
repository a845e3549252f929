"""Comparison across run folders: a table and plots of step time, bytes per step and final loss per run and
optimizer. Differences within noise are named "not significant"; runs from different environments are flagged.

Noise is judged over seeds, never over steps: a run's steps share its seed, its host load and its moment, so
thousands of per-step samples are not independent repeats (a Welch test on them called two seeds of one
configuration "significantly" 16-20% apart). Each figure is taken per seed from the summaries' `per_seed`,
paired where both runs ran the same seed (the same initial weights and data order), with the 95% Student-t
interval of harness/distro_bench/results/stats.py: a ratio on the log scale for step time and bytes, a difference for loss.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

import numpy as np

from distro_bench.errors import InputError, ScenarioError
from distro_bench.report import analysis, markdown
from distro_bench.report import html as html_render
from distro_bench.report.describe import fmt, fmt_reduction
from distro_bench.report.differences import run_differences
from distro_bench.report.document import Banner, Bullets, Document, Figure, Para, Section, Table
from distro_bench.report.events import against_unchanged
from distro_bench.report.events_section import fmt_secs
from distro_bench.report.load import LoadedRun, load_for_report
from distro_bench.report.stats import NOT_SIGNIFICANT, Sample
from distro_bench.report.style import bar_style, human_bytes, new_figure, note_on_axes, save
from distro_bench.results import figures as figure_table
from distro_bench.results import stats as seed_stats
from distro_bench.results.rundir import atomic_write_text, ensure_report_dir
from distro_bench.results.summary import OptimizerSummary

# What makes two runs' environments different enough to say so.
ENV_KEYS = ["git_commit", "git_dirty", "host", "torch", "python", "harness_version", "cuda", "kernel"]


def default_out(root: Path = Path("results")) -> Path:
    return root / f"compare-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def environment_differences(runs: list[LoadedRun], labels: list[str]) -> list[str]:
    out = []
    for key in ENV_KEYS:
        values = [r.data.environment.get(key) for r in runs]
        if len({str(v) for v in values}) > 1:
            shown = [str(v)[:12] if key == "git_commit" and v else str(v) for v in values]
            out.append(f"{key}: " + ", ".join(f"{lab} {v}" for lab, v in zip(labels, shown)))
    return out


def _bytes_basis(runs: list[LoadedRun]) -> str:
    """Runs compared side by side: the one basis rule (results/figures.py) over every optimizer of every run."""
    return figure_table.reduction_basis(s for r in runs for s in r.summary.optimizers.values())


FIGURES = {"step_time": "step_time_s_mean", "final_loss": "final_loss"}  # plus "bytes": tx + rx on the basis


def seed_figures(run: LoadedRun, optimizer: str, basis: str) -> dict[str, dict[str, float]]:
    """figure -> {seed: value} for one optimizer of one run, from summary.json's `per_seed` (a run folder
    without it: its summary, as one seed "-")."""
    s = run.summary.optimizers.get(optimizer)
    per: dict = (s.per_seed or {"-": s.to_dict()}) if s is not None else {}
    out: dict[str, dict[str, float]] = {k: {} for k in ("step_time", "bytes", "final_loss")}
    for seed, v in per.items():
        if not isinstance(v, dict):
            continue
        for key, col in FIGURES.items():
            if seed_stats.finite(v.get(col)):
                out[key][str(seed)] = float(v[col])
        b = analysis.total_bytes(v, basis)
        if b is not None:
            out["bytes"][str(seed)] = b
    return out


def samples(run: LoadedRun, optimizer: str, basis: str) -> dict[str, Sample]:
    """Each compared figure's seeds as a sample (mean and standard deviation over seeds) for the table and bars."""
    return {k: Sample.of(v.values()) for k, v in seed_figures(run, optimizer, basis).items()}


def seed_change(ref: dict[str, float], other: dict[str, float], kind: str) -> str:
    """How `other` differs from `ref` over seeds: '+12.3% [5, 20]' (kind 'ratio': the paired log-ratio's
    interval, in percent) or '+0.050 [0.010, 0.090]' (kind 'diff'), 'not significant' when the interval holds
    no change, 'no change' when every seed is equal. Paired on the seeds both ran; with none in common the two
    sets of seeds are compared unpaired (Welch, exact t quantile). With one seed a side there is no noise to
    judge: the change is given with '1 seed' beside it."""
    common = seed_stats.paired(other, ref)
    if not ref or not other:
        return "n/a"
    if common and all(abs(x - y) <= 1e-12 * max(abs(x), abs(y), 1e-30) for _, x, y in common):
        return "no change"
    if kind == "ratio":
        if any(x <= 0 or y <= 0 for _, x, y in common):
            return "n/a"
        iv = seed_stats.ratio_interval(other, ref) if len(common) >= 2 else None
        if iv is None:
            iv = _unpaired(list(other.values()), list(ref.values()), log=True)
        if iv is None:
            return "n/a"
        if iv.n < 2:
            return f"{(iv.mean - 1) * 100:+.1f}%, 1 seed"
        if iv.lo == iv.hi:  # every seed changed by the same factor (bytes): no noise
            return f"{(iv.mean - 1) * 100:+.1f}%"
        return NOT_SIGNIFICANT if iv.spans else \
            f"{(iv.mean - 1) * 100:+.1f}% [{(iv.lo - 1) * 100:+.0f}, {(iv.hi - 1) * 100:+.0f}]"
    iv = seed_stats.paired_difference(other, ref) if len(common) >= 2 else None
    if iv is None:
        iv = _unpaired(list(other.values()), list(ref.values()), log=False)
    if iv is None:
        return "n/a"
    if iv.n < 2:
        return f"{iv.mean:+.3f}, 1 seed"
    return NOT_SIGNIFICANT if iv.spans else f"{iv.mean:+.3f} [{iv.lo:+.3f}, {iv.hi:+.3f}]"


def _unpaired(a: list[float], b: list[float], *, log: bool) -> seed_stats.Interval | None:
    """a against b over seeds that are not paired (harness/distro_bench/results/stats.py `unpaired_difference`, of the logs
    and shown as a ratio when `log`)."""
    if log:
        a, b = [math.log(x) for x in a if x > 0], [math.log(x) for x in b if x > 0]
    iv = seed_stats.unpaired_difference(a, b)
    return seed_stats.as_ratio(iv) if log and iv is not None else iv


def _grouped_bars(labels: list[str], optimizers: list[str], values: dict, title: str, ylabel: str,
                  path: Path, log: bool = False, annotate=None) -> Figure:
    fig, axes = new_figure(width=max(6.5, 2.5 + 1.3 * len(labels) * max(1, len(optimizers)) ** 0.5))
    ax = axes[0][0]
    width = 0.8 / max(1, len(optimizers))
    x = np.arange(len(labels))
    for j, opt in enumerate(optimizers):
        pairs = [(i, values[(lab, opt)]) for i, lab in enumerate(labels)
                 if (lab, opt) in values and values[(lab, opt)].n and values[(lab, opt)].mean > 0]
        if not pairs:
            continue
        pos = [x[i] + (j - (len(optimizers) - 1) / 2) * width for i, _ in pairs]
        ax.bar(pos, [s.mean for _, s in pairs], width, yerr=[s.std for _, s in pairs], capsize=3, label=opt,
               error_kw={"elinewidth": 0.8}, **bar_style(j))
        if annotate:  # a value on every bar: on a linear axis a 500x smaller bar is a sliver
            for p, (_, s) in zip(pos, pairs):
                ax.annotate(annotate(s.mean), (p, s.mean), ha="center", va="bottom", xytext=(0, 2),
                            textcoords="offset points", fontsize=7)
    ax.set_xticks(x, labels)
    if log:
        ax.set_yscale("log")
    ax.set(title=title, ylabel=ylabel)
    if ax.patches:
        ax.legend(title="optimizer")
    else:
        note_on_axes(ax, "no data")
    save(fig, path, root=path.parent.parent)  # nothing below the report's folder followed
    return Figure(path, title, title + " (bars: mean over seeds; whiskers: one standard deviation over seeds).")


def labels_of(runs: list[LoadedRun]) -> list[str]:
    return [f"R{i + 1} {r.data.scenario.get('name', r.data.name)}" for i, r in enumerate(runs)]


def build_document(runs: list[LoadedRun], plots_dir: Path, differences: list[str] | None = None) -> Document:
    """The comparison; `differences` (run_differences, given with --allow-different) head it: a banner and the
    first section."""
    labels = labels_of(runs)
    optimizers: list[str] = []
    for r in runs:
        optimizers += [o for o in r.optimizers if o not in optimizers]
    basis = _bytes_basis(runs)
    banners = []
    if differences:
        banners.append(Banner("error", f"These runs differ in more than the optimizers under test ({len(differences)} "
                                       "difference(s), listed first below): every change in this comparison mixes "
                                       "the optimizers' effect with those differences. Compared because "
                                       "--allow-different was given."))
    diffs = environment_differences(runs, labels)
    if diffs:
        banners.append(Banner("warn", "These runs come from DIFFERENT ENVIRONMENTS, so part of any difference may be "
                                      "the environment rather than the scenario: " + "; ".join(diffs) + "."))
    for lab, r in zip(labels, runs):
        if note := r.state_note():
            banners.append(Banner("error", f"{lab} ({r.data.name}): {note}"))
        banners += [Banner("warn", f"{lab}: {n}") for n in r.notes]
        if r.events.changes or len(r.events.trace):  # issue 18: a changing network is part of its figures
            first = min(r.events.changes, key=lambda c: c.start, default=None)
            what = (f"{len({c.index for c in r.events.changes})} network event(s), the first {first.label} at "
                    f"{first.t_s:.0f} s") if first else "a link that followed a recorded trace"
            banners.append(Banner("info", f"{lab} ({r.data.name}): its network changed while it trained ({what}); its "
                                          "step times and losses include that (its own report's Network events "
                                          "section gives the impact)."))

    run_rows = []
    emulated: dict[object, str] = {True: "yes", False: "NO"}
    for lab, r in zip(labels, runs):
        env, net = r.data.environment, r.data.environment.get("network") or {}
        run_rows.append([lab, r.data.name, r.summary.run.backend or env.get("backend", "?"),
                         emulated.get(net.get("network_emulated"), "unknown"), r.state,
                         str(env.get("git_commit") or "?")[:12], str(env.get("host", "?")), str(env.get("torch", "?"))])

    per_seed = {(lab, o): seed_figures(r, o, basis) for lab, r in zip(labels, runs) for o in r.optimizers}
    stats = {k: {f: Sample.of(v.values()) for f, v in figs.items()} for k, figs in per_seed.items()}
    rows = []
    for opt in optimizers:
        ref_label = next((lab for lab in labels if (lab, opt) in stats), "")  # "": no run has it (none is shown)
        for lab, r in zip(labels, runs):
            if (lab, opt) not in stats:
                continue
            st, s = stats[(lab, opt)], r.summary.optimizers.get(opt) or OptimizerSummary()
            ref = per_seed[(ref_label, opt)]
            change = {key: "reference" if lab == ref_label else
                      seed_change(ref[key], per_seed[(lab, opt)][key], "diff" if key == "final_loss" else "ratio")
                      for key in ("step_time", "bytes", "final_loss")}

            rows.append([opt, lab, f"{fmt(st['step_time'].mean)} ± {fmt(st['step_time'].std, '.2g')}", change["step_time"],
                         fmt(st["bytes"].mean / 1e6 if st["bytes"].n else None, ".4g"), change["bytes"],
                         fmt_reduction(s.reduction_vs_baseline),
                         f"{fmt(st['final_loss'].mean, '.4f')} ± {fmt(st['final_loss'].std, '.2g')}", change["final_loss"],
                         fmt(s.final_val_loss, ".4f")])
    table = Table(["optimizer", "run", "step time s", "vs first run", f"{basis} MB/step", "vs first run",
                   "reduction vs baseline", "final loss", "vs first run", "final val loss"], rows,
                  numeric=[False, False, True, True, True, True, True, True, True, True])

    plots_dir.mkdir(parents=True, exist_ok=True)
    figures = [
        _grouped_bars(labels, optimizers, {k: v["step_time"] for k, v in stats.items()},
                      "Step time per run and optimizer", "seconds per step", plots_dir / "compare_step_time.png"),
        _grouped_bars(labels, optimizers, {k: v["bytes"] for k, v in stats.items()},
                      f"Bytes per worker per step ({basis}, tx + rx, linear from zero)", "bytes per worker per step",
                      plots_dir / "compare_bytes.png", annotate=human_bytes),
        _grouped_bars(labels, optimizers, {k: v["final_loss"] for k, v in stats.items()},
                      "Final training loss per run and optimizer (last 10% of steps)", "loss (nats/token)",
                      plots_dir / "compare_final_loss.png"),
    ]
    scenarios = sorted({r.data.scenario.get("name", "?") for r in runs})
    return Document(
        title=f"distro-bench comparison: {len(runs)} runs",
        subtitle="Scenarios: " + ", ".join(scenarios) + f". Generated {datetime.now().isoformat(timespec='seconds')}.",
        banners=banners,
        sections=[
            *([Section("Differences between the runs", [
                Para("Every difference of each run from the first (R1) beyond the optimizers under test: the "
                     "resolved scenarios' fields by dotted path, then backend, network emulation and host."),
                Bullets(differences)])] if differences else []),
            Section("Runs", [Table(["run", "folder", "backend", "network emulated", "state", "git commit", "host", "torch"],
                                   run_rows, numeric=[False] * 8)]),
            Section("Comparison", [
                table,
                Para("Each optimizer is compared with its first run in the list, seed by seed (each seed's mean step "
                     "time, bytes per step and final training loss; seeds both runs ran are paired). A change is given "
                     "with its 95% interval only when the interval over seeds excludes no change (a ratio for step "
                     "time and bytes, in percent; a difference for loss); otherwise it is 'not significant'. With one "
                     "seed a side there is no noise to judge it by: the change carries '1 seed'. Per-step samples are "
                     "not repeats (they share a seed, a host and a moment) and are not tested. Columns: mean ± one "
                     f"standard deviation over seeds; bytes are {basis} bytes per worker per step, sent + received; "
                     "step 0 is excluded."),
            ]),
            *_events_sections(runs, labels),
            Section("Plots", figures),
            Section("Run folders", [Bullets([f"{lab}: {r.data.path}" for lab, r in zip(labels, runs)])]),
        ],
    )


def _events_sections(runs: list[LoadedRun], labels: list[str]) -> list[Section]:
    """Issue 18: each run whose network changed against the first run in the list without changes: the
    seconds the events cost at equal steps, and the validation loss at equal time."""
    plain = next(((lab, r) for lab, r in zip(labels, runs) if r.events.empty), None)
    if plain is None:
        return []
    out = []
    for lab, r in zip(labels, runs):
        if r.events.empty:
            continue
        common = [o for o in r.optimizers if o in plain[1].optimizers]
        found = against_unchanged(r.data.metrics, plain[1].data.metrics, common)
        if not found:
            continue
        extra = [f.extra_s if abs(f.extra_s) >= 5e-4 else 0.0 for f in found]  # microseconds: clock rounding
        rows = [[f.optimizer, str(f.steps), ("+" if x > 0 else "") + fmt_secs(x),
                 "n/a" if f.extra_pct is None else f"{round(f.extra_pct):+d}%",
                 "n/a" if f.at_s is None else fmt_secs(f.at_s),
                 fmt(f.val_with, ".4f"), fmt(f.val_without, ".4f")] for f, x in zip(found, extra)]
        out.append(Section(f"Network events: {lab} against {plain[0]}", [
            Para(f"{lab} had network events and {plain[0]} did not. Extra: the training seconds {lab} needed more for "
                 "the steps both made; val loss at equal time: each run's validation loss at the earlier of their "
                 "last evaluations (interpolated between evaluations). Means over each run's seeds. The runs "
                 "differ by more than the events if their scenarios differ otherwise."),
            Table(["optimizer", "steps", "extra", "%", "at", f"val {lab.split()[0]}", f"val {plain[0].split()[0]}"],
                  rows, numeric=[False, True, True, True, True, True, True])]))
    return out


def write_comparison(run_dirs: list[Path], out: Path, allow_different: bool = False) -> list[Path]:
    """The comparison report of the runs; ScenarioError (exit 2) listing every difference when they differ in
    more than the optimizers under test (report/differences.py), unless `allow_different`."""
    if len(run_dirs) < 2:
        raise InputError("a comparison needs at least two run folders")
    runs = [load_for_report(p) for p in run_dirs]
    differences = run_differences(runs, labels_of(runs))
    if differences and not allow_different:
        raise ScenarioError("report: these runs differ in more than the optimizers under test, so they are not "
                            "compared (--allow-different compares them anyway, the differences heading the report)",
                            differences)
    out = ensure_report_dir(out)
    doc = build_document(runs, out / "plots", differences)
    md_path, html_path = out / "report.md", out / "report.html"
    atomic_write_text(md_path, markdown.render(doc, md_path), root=out)
    atomic_write_text(html_path, html_render.render(doc), root=out)
    return [md_path, html_path, *[b.path for sec in doc.sections for b in sec.blocks if isinstance(b, Figure)]]
