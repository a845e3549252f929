"""What differs between runs that are to be compared, from their stored run folders: every dotted path where
their resolved scenarios differ (workers, links, model, budget, seeds, ...) and the run facts outside the
scenario (backend, whether the network was emulated, host). One function for `check --against` (a run and its
reference, report/check.py) and `report A B` / `api.compare` (report/compare.py), which refuse a comparison of
unlike runs unless asked (issue 52).
"""

from __future__ import annotations

from distro_bench.report.load import LoadedRun

# Scenario fields that may differ between a run and its `check --against` reference: words, the gate's own
# thresholds, and the seeds (only the seeds both ran are paired).
AGAINST_MAY_DIFFER = ("name", "description", "checks", "train.seeds")
# ... and between runs of a comparison: besides words and thresholds, only the optimizers under test (their
# settings, which of them ran, which is the baseline). Seeds differ in a way that matters here: a comparison
# pairs seeds, and unpaired ones change its noise.
COMPARE_MAY_DIFFER = ("name", "description", "checks", "optimizers", "baseline")

SHOWN_CHARS = 60  # a long value (a list of workers) shown cut, the path says where


def _shown(v: object) -> str:
    text = "absent" if v is None else repr(v)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


def scenario_differences(mine: object, ref: object, prefix: str = "",
                         may_differ: tuple[str, ...] = AGAINST_MAY_DIFFER) -> list[str]:
    """Dotted paths where two resolved scenarios differ ('train.time_budget: 15s vs 30s', 'workers[0].count: 4 vs
    2'), leaving out `may_differ` (paths and everything under them)."""
    path = prefix.rstrip(".")
    if path and path in may_differ:
        return []
    if isinstance(mine, dict) and isinstance(ref, dict):
        out: list[str] = []
        for key in sorted(set(mine) | set(ref), key=str):
            out += scenario_differences(mine.get(key), ref.get(key), f"{prefix}{key}.", may_differ)
        return out
    if isinstance(mine, list) and isinstance(ref, list) and len(mine) == len(ref):
        out = []
        for i, (a, b) in enumerate(zip(mine, ref)):
            out += scenario_differences(a, b, f"{path}[{i}].", may_differ)
        return out
    return [] if mine == ref else [f"{path}: {_shown(mine)} vs {_shown(ref)}"]


def _facts(run: LoadedRun) -> dict[str, object]:
    """The facts of a run outside its scenario that change what its figures mean."""
    env = run.data.environment
    net = env.get("network") if isinstance(env.get("network"), dict) else {}
    return {"backend": run.summary.run.backend or env.get("backend"),
            "network emulated": net.get("network_emulated") if isinstance(net, dict) else None,
            "host": env.get("host")}


def run_differences(runs: list[LoadedRun], labels: list[str] | None = None,
                    may_differ: tuple[str, ...] = COMPARE_MAY_DIFFER) -> list[str]:
    """Every difference of each run from the first, beyond `may_differ`: 'R2 vs R1: workers[0].count: 2 vs 4',
    'R2 vs R1: backend: 'netns' vs 'local''. Empty when the runs differ only in the optimizers under test."""
    labels = labels or [f"R{i + 1}" for i in range(len(runs))]
    first, out = runs[0], []
    for lab, run in zip(labels[1:], runs[1:]):
        head = f"{lab.split()[0]} vs {labels[0].split()[0]}"
        out += [f"{head}: {d}" for d in scenario_differences(run.data.scenario, first.data.scenario,
                                                             may_differ=may_differ)]
        mine, ref = _facts(run), _facts(first)
        out += [f"{head}: {k}: {_shown(mine[k])} vs {_shown(ref[k])}" for k in mine if mine[k] != ref[k]]
    return out
