"""Which link bound each method's step, for a scenario with sites (results/bottleneck.py): summary.json's
`bottlenecks`, or, for a folder finalized without it, the same figures from its scenario.yaml and summary."""

from __future__ import annotations

from typing import Any

from distro_bench.report.document import Para, Section, Table
from distro_bench.results.bottleneck import MODEL, bottlenecks, site_link_loads
from distro_bench.results.format import fmt_seconds
from distro_bench.results.summary import Summary
from distro_bench.scenario.loading import scenario_from_dict

COLUMNS = ["optimizer", "bound by", "its time/step", "of the step", "next link", "its time/step", "step time", "bytes"]


def _figures(summary: Summary, scenario: dict) -> dict | None:
    found = summary.bottlenecks
    if found or not isinstance(scenario, dict) or not scenario.get("sites"):
        return found or None
    try:
        loads = site_link_loads(scenario_from_dict(scenario, stored=True))
    except Exception:  # a folder whose scenario no longer validates: no section rather than a failed report
        return None
    return bottlenecks({n: s.to_dict() for n, s in summary.optimizers.items()}, loads) if loads else None


def bottleneck_rows(figures: dict[str, Any]) -> list[list[str]]:
    rows = []
    for name, f in (figures.get("optimizers") or {}).items():
        tied = f.get("tied") or []
        ranked = [kv for kv in sorted(f["links"].items(), key=lambda kv: -kv[1]) if kv[0] != f["link"] and kv[0] not in tied]
        nxt = ranked[0] if ranked else ("-", None)
        share = f.get("share_of_step")
        rows.append([name, f["link"] + (f" (tied with {len(tied)} more)" if tied else ""),
                     fmt_seconds(f["seconds_per_step"]), "n/a" if share is None else f"{100 * share:.3g}%",
                     nxt[0], fmt_seconds(nxt[1]), fmt_seconds(f.get("step_time_s")), f.get("basis", "wire")])
    return rows


def bottleneck_section(summary: Summary | dict, scenario: dict) -> Section | None:
    figures = _figures(Summary.of(summary), scenario)
    rows = bottleneck_rows(figures) if figures else []
    if not rows:
        return None
    return Section("Bottleneck links", [
        Para("Which shaped link bound each method: the time each link needs for a step's bytes, the longest first "
             f"({figures.get('model', MODEL) if figures else MODEL}). Bytes per worker per step as measured (wire where "
             "counted); latency, compute and overlap are not in these times, the step time is: a bound link whose "
             "time is a small share of the step did not set its pace. Links within 1% of the bound's time are tied."),
        Table(COLUMNS, rows, numeric=[False, False, True, True, False, True, True, False])])
