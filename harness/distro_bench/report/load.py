"""Loading a run folder for report and check, including one whose run crashed before it was summarised."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from distro_bench.report.events import analyze_run
from distro_bench.results import metrics, runfiles
from distro_bench.results.rundir import (
    SCHEMA_VERSION,
    IncompleteRunFolder,
    RunData,
    check_metrics,
    load_run,
    read_mapping,
    read_scenario,
    read_status,
)

_STATE_NOTES = {
    "incomplete": "This run is INCOMPLETE: it was stopped before every optimizer finished; figures cover what was recorded.",
    "failed": "This run FAILED: figures cover what was recorded before it stopped.",
    "running": "This run did not finish (its status still says running: the harness itself was killed); "
               "figures cover what the workers recorded.",
    "unknown": "This run folder has no status.json: whether the run finished is unknown.",
}


@dataclass
class LoadedRun:
    """A run folder as reports see it: the stored data plus notes on anything missing or rebuilt."""

    data: RunData
    notes: list[str] = field(default_factory=list)

    @property
    def state(self) -> str:
        return str(self.data.status.get("state") or self.data.summary.get("run", {}).get("state") or "unknown")

    @property
    def reason(self) -> str | None:
        return self.data.status.get("reason") or self.data.summary.get("run", {}).get("reason")

    @property
    def optimizers(self) -> list[str]:
        """Scenario order first (the summary keeps it), then any optimizer only the metrics know."""
        names = list(self.data.summary.get("optimizers", {}))
        if len(self.data.metrics):
            names += [str(o) for o in self.data.metrics["optimizer"].unique() if str(o) not in names]
        return names

    @property
    def baseline(self) -> str | None:
        return self.data.summary.get("baseline") or self.data.scenario.get("baseline")

    @cached_property
    def events(self):
        """events.parquet joined to the steps (harness/distro_bench/report/events.py); empty for a run without changes."""
        return analyze_run(self)

    def state_note(self) -> str | None:
        if self.state == "complete":
            return None
        note = _STATE_NOTES.get(self.state, f"This run's state is {self.state!r}.")
        return note + (f" Reason: {self.reason}" if self.reason else "")


def load_for_report(path: str | Path) -> LoadedRun:
    """`load_run`, or for a folder whose harness died before writing summary.json / metrics.parquet,
    the same data rebuilt in memory from the workers' own records (the folder is not modified). Either way
    the folder is read through harness/distro_bench/results/runfiles.py: no link followed, capped, validated."""
    path = Path(path)
    try:
        return LoadedRun(load_run(path))
    except IncompleteRunFolder:
        if not (path / "workers").is_dir() or not runfiles.is_file(path, "scenario.yaml"):
            raise
    return _rebuild(path)


def _rebuild(path: Path) -> LoadedRun:
    scenario = read_scenario(path) or {}
    df, events = _worker_records(path)
    baseline = str(scenario.get("baseline", "adamw"))
    status = read_status(path) or {"state": "unknown", "reason": None}
    environment = read_mapping(path, "environment.json") or {}
    checks = scenario.get("checks") or {}
    explicit = checks.get("target_val_loss") or (scenario.get("train") or {}).get("target_val_loss")
    target = metrics.comparison_target(df, explicit, "set in the scenario" if explicit is not None else None)
    summary = {
        "schema_version": SCHEMA_VERSION,
        "run": {"scenario": scenario.get("name", path.name), "backend": environment.get("backend"),
                "state": status.get("state"), "reason": status.get("reason")},
        "baseline": baseline,
        "target": target,
        "optimizers": metrics.summarize(df, events, baseline, target["val_loss"]) if len(df) else {},
    }
    data = RunData(path=path, scenario=scenario, environment=environment, summary=summary,
                   metrics=df, status=status)
    return LoadedRun(data, notes=[("summary.json or metrics.parquet was missing: the figures below were rebuilt "
                                   "from the workers' records (workers/*/rank*.jsonl).")])


def _worker_records(path: Path):
    """The workers' records (workers/**/rank*.jsonl), each record checked against the metric columns' types."""
    try:
        df, events = metrics.read_worker_records(path / "workers")
        return check_metrics(df, path / "workers"), events
    except runfiles.RunFileError:
        raise
    except (ValueError, TypeError, OverflowError, KeyError, AttributeError, RecursionError) as e:
        raise runfiles.RunFileError(f"{path / 'workers'}: the workers' records do not hold what distro-bench "
                                    f"writes ({type(e).__name__})") from None
