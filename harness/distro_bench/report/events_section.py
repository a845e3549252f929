"""The report's "Network events" section (issue 18): the events table, each trace in one sentence, the
step-time impact per event and optimizer, and one sentence per optimizer on what it lost to the events.
The numbers come from harness/distro_bench/report/events.py; this module only words and tabulates them, narrow enough
for an 80-column terminal."""

from __future__ import annotations

import math

import pandas as pd

from distro_bench.report.document import Para, Section, Table
from distro_bench.report.events import EventsAnalysis, row_label, text_of
from distro_bench.results.format import fmt_rate, fmt_seconds
from distro_bench.results.stats import Interval
from distro_bench.scenario.units import parse_rate

MAX_TABLE_ROWS = 40


def _ms(v: float | None) -> str:
    return "-" if v is None or math.isnan(v) else f"{v * 1e3:.0f} ms"


def fmt_secs(v: float) -> str:
    return fmt_seconds(float(f"{v:.3g}"))  # rounded first: 0.99996 is "1 s", not "1e+03 ms"


def _sec(v: Interval | None, sign: bool = False, interval: bool = True) -> str:
    if v is None:
        return "-"
    mean = 0.0 if sign and abs(v.mean) < 5e-4 else v.mean  # a lost or gained microsecond is clock rounding
    text = ("+" if sign and mean > 0 else "") + fmt_secs(mean)
    # An interval below 1% of the mean (or 1 ms) is clock rounding, not spread between seeds.
    if interval and v.half and v.half >= max(0.01 * abs(v.mean), 1e-3):
        text += f" ±{fmt_secs(v.half)}"
    return text


def _pct(v: Interval | None) -> str:
    return "-" if v is None else f"{round(v.mean):+d}%" + (f" ±{v.half:.0f}" if v.half and v.half >= 0.5 else "")


def _at(t_s: float) -> str:
    return f"{t_s:.2g} s" if abs(t_s) < 10 else f"{t_s:.0f} s"


def _first_seeds(df: pd.DataFrame) -> pd.DataFrame:
    """Each optimizer's rows of its lowest seed (rows without a seed kept)."""
    keep = []
    for _, g in df.groupby("optimizer", sort=False, dropna=False):
        seeds = g["seed"].dropna()
        keep.append(g if not len(seeds) else g[g["seed"].isna() | (g["seed"] == seeds.min())])
    return pd.concat(keep) if keep else df


def _nodes_cell(nodes: list[str]) -> str:
    nodes = list(dict.fromkeys(n or "-" for n in nodes))
    return ",".join(nodes) if len(nodes) <= 2 else f"{len(nodes)} nodes"


def events_table(analysis: EventsAnalysis) -> tuple[list[str], list[list[str]], list[str]]:
    """(headers, rows, notes): the marked events of each optimizer's first seed in time order; rows that
    made the same change at the same due time on several nodes are one row ("4 nodes", the latest lateness,
    every distinct read-back value)."""
    m = analysis.marked.copy()
    several = m["seed"].nunique() > 1
    shown = _first_seeds(m)
    shown["label"] = [row_label(r) for _, r in shown.iterrows()]
    shown["due"] = shown["scheduled_s"].where(shown["scheduled_s"].notna(), shown["t_s"]).round(3)
    shown["late"] = shown["t_s"] - shown["scheduled_s"]
    groups = sorted((g for _, g in shown.groupby(["optimizer", "kind", "due", "label"], sort=False, dropna=False)),
                    key=lambda g: (text_of(g["optimizer"].iloc[0]), float(g["t_s"].min())))
    rows = []
    for g in groups[:MAX_TABLE_ROWS]:
        t_s, late, step = g["t_s"].dropna(), g["late"].dropna(), g["step"].dropna()
        verified = ", ".join(dict.fromkeys(text_of(v) or "-" for v in g["verified"]))
        if (g["ok"] == False).any():  # noqa: E712 (a nullable boolean column)
            verified += " (mismatch)"
        rows.append([text_of(g["optimizer"].iloc[0]) or "-", f"{t_s.min():.1f} s" if len(t_s) else "-",
                     str(int(step.min())) if len(step) else "-", _nodes_cell([text_of(n) for n in g["node"]]),
                     str(g["label"].iloc[0]), verified, _ms(late.max() if len(late) else None)])
    notes = []
    if len(groups) > MAX_TABLE_ROWS:
        notes.append(f"The first {MAX_TABLE_ROWS} of {len(groups)} changes are shown; all are in events.parquet.")
    if several:
        late = (m["t_s"] - m["scheduled_s"]).dropna()
        bad = int((m["ok"] == False).sum())  # noqa: E712 (a nullable boolean column)
        notes.append(f"Rows of each optimizer's first seed are shown. Over all {m['seed'].nunique()} seeds: "
                     f"{len(m)} rows, applied at most {_ms(late.max() if len(late) else None)} late, "
                     f"{bad} not matching on read-back.")
    return ["run", "t", "step", "node", "change", "verified", "late"], rows, notes


def trace_lines(analysis: EventsAnalysis) -> list[str]:
    """One sentence per link that followed a trace (its rows would flood the table)."""
    out = []
    t = analysis.trace
    for (node, direction), g in t.groupby(["node", "direction"], sort=True, dropna=False):
        rates = []
        for v in g["verified"].where(g["verified"].fillna("") != "", g["requested"]):
            try:
                rates.append(parse_rate(text_of(v)))
            except ValueError:
                pass
        late = (g["t_s"] - g["scheduled_s"]).dropna()
        runs = g.groupby(["optimizer", "seed"], dropna=False).ngroups
        span = (f", between {fmt_rate(min(rates))} and {fmt_rate(max(rates))}" if rates else "")
        out.append(f"{text_of(node)} {text_of(direction)} followed a recorded trace: {len(g) // max(runs, 1)} rate "
                   "changes per "
                   f"run{span}; applied a median {_ms(late.median() if len(late) else None)} and at most "
                   f"{_ms(late.max() if len(late) else None)} late; {int((g['ok'] == False).sum())} "  # noqa: E712
                   "not matching on read-back.")
    return out


def impact_table(analysis: EventsAnalysis) -> tuple[list[str], list[list[str]]]:
    rows = []
    for s in sorted(analysis.summaries, key=lambda s: (s.index, s.at_s)):
        after = "run ended" if s.run_ended_inside == s.seeds else _sec(s.after, interval=False)
        rows.append([f"{s.label} @{_at(s.at_s).replace(' ', '')}", s.optimizer, _sec(s.before, interval=False),
                     _sec(s.during, interval=False), after, _sec(s.lost, sign=True), _pct(s.lost_pct)])
    return ["event", "run", "before", "during", "after", "lost", "%"], rows


def loss_sentences(analysis: EventsAnalysis) -> list[str]:
    """One sentence per optimizer: how much training time it lost to the events."""
    out = []
    for lo in analysis.losses:
        if lo.lost is None:
            out.append(f"{lo.optimizer}: no step before its first event, so no pre-event pace to measure a loss "
                       "against.")
            continue
        big, one = lo.largest, lo.changes == 1 and lo.largest is not None
        what = f"{big.label} at {_at(big.at_s)}" if one and big is not None else f"{lo.changes} network events"
        pct = "" if lo.lost_pct is None else _pct(lo.lost_pct)
        seeds = f"; means of {lo.lost.n} seeds" if lo.lost.n > 1 else ""
        noise = " (within noise)" if lo.lost.n > 1 and lo.lost.lo <= 0 <= lo.lost.hi else ""
        if lo.lost.mean <= 0:
            text = (f"{lo.optimizer} lost no time to {what}{noise}: {_sec(lo.lost, sign=True)}"
                    + (f", {pct}" if pct else "") + " against its pre-event pace")
        elif one:
            text = f"{lo.optimizer} lost {_sec(lo.lost)}" + (f" ({pct})" if pct else "") + f"{noise} to {what}"
        else:
            text = (f"{lo.optimizer} lost {_sec(lo.lost)}{noise} to {what}"
                    + (f" ({pct} over their windows)" if pct else ""))
            if big is not None and big.lost is not None and big.lost.mean > 0:
                text += f"; the most, {_sec(big.lost)} ({_pct(big.lost_pct)}), to {big.label} at {_at(big.at_s)}"
        ended = [s for s in analysis.summaries if s.optimizer == lo.optimizer and s.run_ended_inside]
        if ended:
            text += f"; its run ended during {ended[0].label} at {_at(ended[0].at_s)}" + (
                f" (in {ended[0].run_ended_inside} of {ended[0].seeds} seeds)" if ended[0].seeds > 1 else "")
        out.append(text + seeds + ".")
    return out


WINDOWS_NOTE = ("Mean step time (slowest worker) in three windows per event: during runs from when the change took "
                "effect to the end of its window (an outage's or straggler's) or until the same link or worker "
                "changes again; before and "
                "after are as long, just before and just after it, cut at other events and the run's ends. A step "
                "counts by the fraction of it inside a window; step 0 is left out. Lost (mean over seeds, with its "
                "interval) is the extra training "
                "seconds during the window over the same steps at the run's pace before its first event; % is "
                "that over the time those steps would have taken. Evaluations are not counted.")


def events_section(run):
    """The report's "Network events" section, or None for a run without events."""
    analysis = run.events
    if analysis.empty:
        return Section("Network events", [Para(n) for n in analysis.notes]) if analysis.notes else None
    blocks: list = [Para(t) for t in loss_sentences(analysis)]
    if len(analysis.marked):
        headers, rows, notes = events_table(analysis)
        blocks.append(Para("Every change applied to the network or to a worker's speed while it trained (t: seconds "
                           "since that run's first step; late: after its due time; verified: read back after "
                           "applying)."))
        blocks.append(Table(headers, rows, numeric=[False, True, True, False, False, False, True]))
        blocks += [Para(n) for n in notes]
    blocks += [Para(t) for t in trace_lines(analysis)]
    if analysis.summaries:
        headers, rows = impact_table(analysis)
        blocks.append(Para("Step-time impact per event and optimizer. " + WINDOWS_NOTE
                           + (" ± is a 95% Student-t interval over seeds."
                              if any(s.seeds > 1 for s in analysis.summaries) else "")))
        blocks.append(Table(headers, rows, numeric=[False, False, True, True, True, True, True]))
    return Section("Network events", blocks)
