"""Loading a run folder for report and check, including one whose run crashed before it was summarised."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from distro_bench.errors import InputError
from distro_bench.report.events import EventsAnalysis, analyze_run
from distro_bench.results import metrics, runfiles
from distro_bench.results.bottleneck import site_link_loads
from distro_bench.results.build import build_summary
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
from distro_bench.results.summary import Summary
from distro_bench.scenario.loading import scenario_from_dict

if TYPE_CHECKING:
    import pandas as pd

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

    @cached_property
    def summary(self) -> Summary:
        """summary.json (or the one rebuilt from the workers' records), typed: what every report section reads."""
        try:
            return Summary.model_validate(self.data.summary)
        except ValidationError as e:
            raise InputError(f"{self.data.path / 'summary.json'}: not a distro-bench summary ({e.error_count()} "
                             f"problem(s): {e.errors(include_url=False)[0]['msg']})") from None

    @property
    def state(self) -> str:
        return str(self.data.status.get("state") or self.summary.run.state or "unknown")

    @property
    def reason(self) -> str | None:
        return self.data.status.get("reason") or self.summary.run.reason

    @property
    def optimizers(self) -> list[str]:
        """Scenario order first (the summary keeps it), then any optimizer only the metrics know."""
        names = list(self.summary.optimizers)
        if len(self.data.metrics):
            names += [str(o) for o in self.data.metrics["optimizer"].unique() if str(o) not in names]
        return names

    @property
    def baseline(self) -> str | None:
        return self.summary.baseline or self.data.scenario.get("baseline")

    @property
    def network_nodes(self) -> list[dict]:
        """environment.json's network.nodes, the mappings among them (a forged file may hold anything there)."""
        net = self.data.environment.get("network")
        nodes = net.get("nodes") if isinstance(net, dict) else None
        return [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []

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


@dataclass
class Run:
    """A stored run folder: its resolved scenario, environment, typed summary and per-step metrics."""

    path: Path
    scenario: dict[str, Any]
    environment: dict[str, Any]
    summary: Summary
    metrics: pd.DataFrame
    status: dict[str, Any]
    notes: list[str] = field(default_factory=list)  # what was missing or rebuilt from the workers' records
    _loaded: LoadedRun | None = field(default=None, repr=False)

    @classmethod
    def load(cls, path: str | Path) -> Run:
        """Read a run folder (one whose harness died before summarising is rebuilt from the workers' records)."""
        loaded = load_for_report(path)
        d = loaded.data
        return cls(path=d.path, scenario=d.scenario, environment=d.environment, summary=loaded.summary, metrics=d.metrics,
                   status=d.status, notes=list(loaded.notes), _loaded=loaded)

    @property
    def loaded(self) -> LoadedRun:
        """The folder as the reports read it (LoadedRun)."""
        if self._loaded is None:
            self._loaded = load_for_report(self.path)
        return self._loaded

    @property
    def state(self) -> str:
        return self.loaded.state

    @property
    def optimizers(self) -> list[str]:
        return self.loaded.optimizers

    @property
    def baseline(self) -> str | None:
        return self.loaded.baseline

    @property
    def events(self) -> EventsAnalysis:
        """The network's changes joined to the steps (empty for a run without changes)."""
        events: EventsAnalysis = self.loaded.events
        return events

    def state_note(self) -> str | None:
        return self.loaded.state_note()


def _summary_inputs(scenario: dict, path: Path) -> tuple[dict, dict]:
    """What build_summary takes from the scenario (the baseline, a target set in advance, the prices) and the
    run block's budget and seeds, as finalize records them: from the validated scenario where scenario.yaml
    still validates, else what the raw mapping says (no budget nor seeds then)."""
    try:
        s = scenario_from_dict(scenario, str(path / "scenario.yaml"), path, stored=True)
    except (InputError, ValueError, TypeError):
        checks = scenario.get("checks") or {}
        explicit = checks.get("target_val_loss") or (scenario.get("train") or {}).get("target_val_loss")
        return ({"baseline": str(scenario.get("baseline", "adamw")), "target_val_loss": explicit,
                 "target_how": "set in the scenario" if explicit is not None else None,
                 "costs": scenario.get("costs") if isinstance(scenario.get("costs"), dict) else None}, {})
    explicit, how = s.comparison_target()
    return ({"baseline": s.baseline, "target_val_loss": explicit, "target_how": how, "costs": s.costs.model_dump(),
             "link_loads": site_link_loads(s)},
            {"budget": s.budget().as_dict(), "seeds": s.train.seed_list()})


def _rebuild(path: Path) -> LoadedRun:
    scenario = read_scenario(path) or {}
    df, events = _worker_records(path)
    status = read_status(path) or {"state": "unknown", "reason": None}
    environment = read_mapping(path, "environment.json") or {}
    inputs, plan = _summary_inputs(scenario, path)
    summary = build_summary(df, events, schema_version=SCHEMA_VERSION, **inputs,  # the finalize's builder
                            run={"scenario": scenario.get("name", path.name), "backend": environment.get("backend"),
                                 "state": status.get("state"), "reason": status.get("reason"), **plan})
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
