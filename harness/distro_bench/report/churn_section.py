"""The report's "Churn" section (scenario `churn:`, docs/churn.md): per optimizer, the goodput, availability
and work lost to workers leaving, beside time to target, each with its interval over seeds."""

from __future__ import annotations

from distro_bench.report.describe import fmt
from distro_bench.report.document import Para, Section, Table
from distro_bench.report.load import LoadedRun
from distro_bench.results.format import fmt_bytes, fmt_seconds
from distro_bench.results.summary import OptimizerSummary


def _with_ci(s: OptimizerSummary, key: str, text) -> str:
    v, ci = getattr(s, key), (s.ci95 or {}).get(key)
    if v is None:
        return "n/a"
    return f"{text(v)} [{text(ci[0])}, {text(ci[1])}]" if ci else text(v)


def churn_section(run: LoadedRun) -> Section | None:
    churn = run.data.scenario.get("churn") or {}
    if not churn.get("events") and not churn.get("failures_per_minute"):
        return None
    opts = run.summary.optimizers
    rows = []
    for name in run.optimizers:
        s = opts.get(name) or OptimizerSummary()  # an optimizer only the metrics know: its figures n/a
        rows.append([name, _with_ci(s, "goodput_tokens_per_s", lambda v: f"{v:,.0f}"),
                     _with_ci(s, "worker_availability", lambda v: f"{v:.0%}"), fmt(s.churn_leaves),
                     fmt(s.lost_steps), fmt_bytes(s.state_handover_bytes),
                     _with_ci(s, "time_to_target_s", fmt_seconds)])
    plan = (f"{len(churn.get('events') or [])} planned absence(s); failures at {churn.get('failures_per_minute', 0):g} "
            f"per worker-minute, each away {churn.get('downtime', '10s')}, detected after {churn.get('detection', '0s')}.")
    return Section("Churn", [
        Para(plan + " Means over seeds with 95% intervals; goodput is the tokens that reached the shared model per "
                    "training second (a leaver's unsynced local steps are lost), availability the share of worker-steps "
                    "trained. docs/churn.md."),
        Table(["optimizer", "goodput tok/s", "availability", "leaves", "lost steps", "state handed over",
               "time to target"], rows),
    ])
