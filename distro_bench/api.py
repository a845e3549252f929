"""The public Python API: everything the CLI does, as functions with typed results.

    import distro_bench.api as db
    r = db.run("scenarios/ci-smoke.yaml", backend="local")
    r.summary.optimizers["distro"].reduction_vs_baseline      # typed: distro_bench.results.summary.Summary
    db.check(r.run_dir, min_reduction=100).passed

The CLI (distro_bench/cli/) parses options, calls one of these, and prints the result. Errors are
distro_bench.errors types (InputError and ScenarioError: bad input; CapabilityError: the host cannot do it;
WorkerFailed: a worker died). Importing this module imports no torch; `run` and `project` load it when called.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from distro_bench.errors import InputError
from distro_bench.results.summary import Summary

if TYPE_CHECKING:
    import pandas as pd

    from distro_bench.report.check import CheckReport
    from distro_bench.run.lifecycle import ProgressSink
    from distro_bench.run.overrides import Overrides
    from distro_bench.run.runner import RunResult
    from distro_bench.scenario.model import Scenario
    from distro_bench.studies.projection_study import ProjectionStudy

def _scenario(scenario) -> Scenario:
    from distro_bench.scenario.model import Scenario, load_scenario

    return scenario if isinstance(scenario, Scenario) else load_scenario(scenario)


# ---- scenarios ------------------------------------------------------------------------------------

def validate(scenario: str | Path) -> Scenario:
    """Load and check a scenario file; ScenarioError lists every problem found, with its location."""
    return _scenario(scenario)


def schema() -> dict:
    """The JSON Schema of a scenario file (for editors: units as patterned strings, options per optimizer)."""
    from distro_bench.scenario.schema import scenario_schema

    return scenario_schema()


# ---- running --------------------------------------------------------------------------------------

def run(scenario: str | Path | Scenario, overrides: Overrides | None = None, *, backend: str = "auto",
        optimizers: list[str] | None = None, steps: int | None = None, seed: int | None = None,
        out: str | Path = "results", time_budget: str | float | None = None, tokens: str | int | None = None,
        target_val_loss: float | None = None, repeat: int | None = None,
        link_engine: str | None = None, allow_unemulated: bool | None = None, image: str | None = None,
        progress: ProgressSink | None = None, write_report: bool = True,
        measure_links: bool | None = None) -> RunResult:
    """Train every optimizer of the scenario on emulated links into a new run folder under `out`.

    The run options are one `distro_bench.run.overrides.Overrides`; the keyword arguments build one (give
    either, not both). A budget given (`steps`, `time_budget` like "300s", `tokens` like "2M",
    `target_val_loss`) replaces the scenario's; `repeat` runs each optimizer K times with seeds seed..seed+K-1.
    `link_engine`, `allow_unemulated` and `measure_links` default to the scenario's `network` section.
    Returns the run folder, its state and the typed summary
    (`result.summary.optimizers[name].step_time_s_mean`, ...)."""
    from distro_bench.run.overrides import Overrides
    from distro_bench.run.runner import run_scenario

    given = Overrides(backend=backend, optimizers=tuple(optimizers) if optimizers else None, steps=steps, seed=seed,
                      out=Path(out), time_budget=time_budget, tokens=tokens, target_val_loss=target_val_loss,
                      repeat=repeat, link_engine=link_engine, allow_unemulated=allow_unemulated, image=image,
                      write_report=write_report, measure_links=measure_links)
    if overrides is not None and given != Overrides():
        raise InputError(f"run: give the options as `overrides` or as keyword arguments, not both "
                         f"({', '.join(given.given())} given beside overrides)")
    return run_scenario(_scenario(scenario), overrides or given, progress)


# ---- reading run folders --------------------------------------------------------------------------

@dataclass
class Run:
    """A stored run folder: its resolved scenario, environment, typed summary and per-step metrics."""

    path: Path
    scenario: dict
    environment: dict
    summary: Summary
    metrics: pd.DataFrame
    status: dict
    notes: list[str] = field(default_factory=list)  # what was missing or rebuilt from the workers' records
    _loaded: Any = field(default=None, repr=False)

    @property
    def state(self) -> str:
        return self._loaded.state

    @property
    def optimizers(self) -> list[str]:
        return self._loaded.optimizers

    @property
    def baseline(self) -> str | None:
        return self._loaded.baseline

    def state_note(self) -> str | None:
        return self._loaded.state_note()


def load_run(path: str | Path) -> Run:
    """Read a run folder (one whose harness died before summarising is rebuilt from the workers' records)."""
    from pydantic import ValidationError

    from distro_bench.report.load import load_for_report

    loaded = load_for_report(path)
    try:
        summary = Summary.model_validate(loaded.data.summary)
    except ValidationError as e:
        raise InputError(f"{Path(path) / 'summary.json'}: not a distro-bench summary ({e.error_count()} problem(s): "
                         f"{e.errors(include_url=False)[0]['msg']})") from None
    d = loaded.data
    return Run(path=d.path, scenario=d.scenario, environment=d.environment, summary=summary, metrics=d.metrics,
               status=d.status, notes=list(loaded.notes), _loaded=loaded)


def _run(run: str | Path | Run) -> Run:
    return run if isinstance(run, Run) else load_run(run)


def check(run: str | Path | Run, *, min_reduction: float | None = None, max_loss_gap: float | None = None,
          baseline: str | None = None, candidates: list[str] | None = None,
          allow_few_seeds: bool = False) -> CheckReport:
    """The CI gate. Thresholds default to the scenario's `checks`; `.passed` says whether every check passed.
    The loss gap needs 3 paired seeds unless `allow_few_seeds` (docs/ci-gate.md)."""
    from distro_bench.report.check import run_checks

    return run_checks(_run(run)._loaded, min_reduction=min_reduction, max_loss_gap=max_loss_gap, baseline=baseline,
                      candidates=candidates, allow_few_seeds=allow_few_seeds)


def check_to_dict(report: CheckReport) -> dict:
    """A check report as JSON-ready data, each result with its threshold as a number (`limit`, and `op`)."""
    d = report.to_dict()
    limits = {"reduction": (">=", report.thresholds.get("min_reduction")),
              "val loss gap": ("<=", report.thresholds.get("max_loss_gap"))}
    for r in d["results"]:
        op, limit = next((v for k, v in limits.items() if r["check"].startswith(k)), (None, None))
        if r["check"] == "replicas identical":
            op, limit = "==", True
        elif r["check"] == "run complete":
            op, limit = "==", "complete"
        r["op"], r["limit"] = op, limit
    return d


@dataclass
class ReportFiles:
    markdown: Path
    html: Path
    plots: list[Path]

    def to_dict(self) -> dict:
        return {"markdown": str(self.markdown), "html": str(self.html), "plots": [str(p) for p in self.plots]}


def report(run: str | Path, out: str | Path | None = None) -> ReportFiles:
    """report.md, report.html and plots/*.png for one run folder (into `out`, default the folder itself)."""
    from distro_bench.report import write_run_report

    paths = write_run_report(Path(run), Path(out) if out is not None else None)
    return ReportFiles(paths[0], paths[1], list(paths[2:]))


def compare(runs: list[str | Path], out: str | Path | None = None) -> ReportFiles:
    """One comparison report of several run folders (default folder results/compare-<time>/)."""
    from distro_bench.report import write_comparison
    from distro_bench.report.compare import default_out

    if len(runs) < 2:
        raise InputError("compare: give at least two run folders")
    paths = write_comparison([Path(r) for r in runs], Path(out) if out is not None else default_out())
    return ReportFiles(paths[0], paths[1], list(paths[2:]))


# ---- projection -----------------------------------------------------------------------------------

def project(scenario: str | Path | Scenario, *, model: str | None = None, workers: list[int] | None = None,
            optimizers: list[str] | None = None, mfu: float = 0.4, out: str | Path | None = None,
            plots: bool = True) -> ProjectionStudy:
    """Bytes and step time per optimizer at any worker count and model size, from the projection model.
    Writes projection.json (and plots) into `out` (default results/project-<scenario>-<time>/) unless
    `plots=False` and no `out` is given."""
    from distro_bench.studies.projection_study import study

    s = _scenario(scenario)
    if optimizers:
        s = s.with_overrides(optimizers=optimizers)
    return study(s, model=model, workers=workers, mfu=mfu, out=Path(out) if out is not None else None, plots=plots)


# ---- housekeeping ---------------------------------------------------------------------------------

@dataclass
class CleanResult:
    removed: dict[str, list[str]]  # backend -> what was removed
    problems: dict[str, list[str]]  # backend -> what could not be

    @property
    def ok(self) -> bool:
        return not any(self.problems.values())


def clean(force: bool = False) -> CleanResult:
    """Remove what finished or killed runs left behind (containers, networks, namespaces); runs still going
    are left alone unless `force`."""
    from distro_bench.backends import clean_leftovers

    results = clean_leftovers(include_live=force)
    return CleanResult(removed={k: list(r) for k, (r, _) in results.items()},
                       problems={k: list(p) for k, (_, p) in results.items()})


def export(run: str | Path | Run, to: Literal["mlflow", "tensorboard"], dest: str | Path | None = None):
    """Copy a run into an experiment tracker: one tracker run per optimizer with its parameters, per-step
    metrics and the report attached. MLflow writes a local file store (or to `dest` given as a tracking URI),
    TensorBoard event files (one folder per optimizer). Default `dest`: RUN/mlruns or RUN/tensorboard."""
    from distro_bench.export.trackers import export_run

    return export_run(_run(run), to, dest)


__all__ = ["CleanResult", "ReportFiles", "Run", "Summary", "check", "check_to_dict", "clean", "compare", "export",
           "load_run", "project", "report", "run", "schema", "validate"]
