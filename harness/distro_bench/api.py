"""The public Python API: everything the CLI does, as functions with typed results.

    import distro_bench.api as db
    r = db.run("scenarios/ci-smoke.yaml", backend="local")
    r.summary.optimizers["distro"].reduction_vs_baseline      # typed: distro_bench.results.summary.Summary
    db.check(r.run_dir, min_reduction=100).passed

Every command of the CLI (harness/distro_bench/cli/) parses its options, calls one of these (COMMANDS says which), and
prints the result; nothing here prints. Errors are distro_bench.errors types (InputError and ScenarioError: bad
input; CapabilityError: the host cannot do it; WorkerFailed: a worker died). Importing this module imports no
torch; the functions that train or project load it when called. docs/python-api.md is generated from this
module's signatures and docstrings (scripts/gen_docs.py).
"""

from __future__ import annotations

import inspect
import tempfile
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from distro_bench.errors import InputError

# Importing this module stays under 0.3 s (issue 52; benchmarks/import_time.py): pydantic models, numpy and the
# scenario loader load when a function needs them, not at import.
if TYPE_CHECKING:
    from distro_bench.backends.docker.image import BuildResult
    from distro_bench.export.trackers import ExportResult
    from distro_bench.net.host import HostInfo
    from distro_bench.net.linkcheck import LinksProgress, LinksReport, ScheduleReport
    from distro_bench.report.check import CheckReport
    from distro_bench.report.load import Run
    from distro_bench.results.history import Point as HistoryPoint
    from distro_bench.results.summary import Summary
    from distro_bench.run.lifecycle import ProgressSink
    from distro_bench.run.overrides import Overrides, RunSettings
    from distro_bench.run.runner import RunResult
    from distro_bench.scenario.model import Scenario
    from distro_bench.studies.projection_study import ProjectionStudy
    from distro_bench.studies.published import PointResult
    from distro_bench.studies.sweep_grid import Point, SweepResult

# CLI command -> the api functions it calls (tests/unit/api/test_api_coverage.py: every command has an entry, every
# entry names a function here and the command's module calls it; docs/python-api.md lists the commands).
COMMANDS: dict[str, tuple[str, ...]] = {
    "run": ("run",),
    "validate": ("validate", "validate_document"),
    "schema": ("schema",),
    "report": ("load_run", "report", "compare"),
    "check": ("load_run", "check", "check_to_dict"),
    "doctor": ("doctor",),
    "links": ("links", "links_schedule"),
    "image build": ("build_image",),
    "clean": ("clean",),
    "project": ("project", "published"),
    "export": ("export", "export_recipe"),
    "sweep": ("sweep",),
    "node": ("node",),
    "history": ("history", "plot_history"),
}


def _scenario(scenario: str | Path | Scenario) -> Scenario:
    from distro_bench.scenario.loading import load_scenario
    from distro_bench.scenario.model import Scenario

    return scenario if isinstance(scenario, Scenario) else load_scenario(scenario)


def _out_dir(out: str | Path | None, what: str) -> Path | None:
    """`out` made and known writable (InputError naming it otherwise), for functions that write into it."""
    if out is None:
        return None
    from distro_bench.results.rundir import ensure_out_dir

    return ensure_out_dir(Path(out), what)


# ---- scenarios ------------------------------------------------------------------------------------

def validate(scenario: str | Path) -> Scenario:
    """Load and check a scenario file; ScenarioError lists every problem found, with its location. A model from
    outside is built and fed a tiny batch where torch is installed, and an `hf:` hub dataset looked for in the
    caches and on the hub (harness/distro_bench/train/inputs.py)."""
    import importlib.util

    from distro_bench.errors import ScenarioError
    from distro_bench.scenario.problems import input_problems

    s = _scenario(scenario)
    problems = input_problems(s)
    if s.model.source != "builtin" and importlib.util.find_spec("torch") is not None:  # else: the run's preflight
        from distro_bench.train.inputs import model_problems

        problems += model_problems(s)
    if problems:
        raise ScenarioError(str(scenario), problems)
    return s


@dataclass(frozen=True)
class ValidateDocument:
    """`validate --json`'s document and the exit code that goes with it (0 when valid, else the error's: 2 for a
    scenario's problems)."""

    document: dict[str, Any]  # {"valid": true, the resolved scenario} or {"valid": false, "source", "problems"}
    exit_code: int = 0  # what the CLI exits with: 0, or the error's code

    @property
    def valid(self) -> bool:
        return self.document.get("valid") is True


def validate_document(scenario: str | Path) -> ValidateDocument:
    """`validate` as the public JSON document (what `validate --json` prints): the resolved scenario (presets
    expanded, units normalised) with `"valid": true`; on bad input `"valid": false` and every problem as an object
    {field, value, message} (issue 52), never an exception. A bug of ours still raises."""
    from distro_bench.errors import HarnessError, ScenarioError
    from distro_bench.scenario.problem_records import parsed_file, problem_record
    from distro_bench.scenario.resolved import scenario_document

    try:
        return ValidateDocument(scenario_document(validate(scenario)))
    except ScenarioError as e:
        parsed = parsed_file(Path(scenario))
        return ValidateDocument({"valid": False, "source": e.source,
                                 "problems": [problem_record(p, parsed) for p in e.problems]}, e.exit_code)
    except HarnessError as e:
        return ValidateDocument({"valid": False, "source": str(scenario), "problems": [problem_record(str(e))]},
                                e.exit_code)


def schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file (for editors: units as patterned strings, options per optimizer)."""
    from distro_bench.scenario.schema import scenario_schema

    result: dict[str, Any] = scenario_schema()
    return result


# ---- running --------------------------------------------------------------------------------------

def run(scenario: str | Path | Scenario, overrides: Overrides | None = None, settings: RunSettings | None = None, *,
        backend: str = "auto",
        optimizers: list[str] | None = None, steps: int | None = None, seed: int | None = None,
        out: str | Path = "results", time_budget: str | float | None = None, tokens: str | int | None = None,
        target_val_loss: float | None = None, repeat: int | None = None,
        sets: dict[str, Any] | list[str] | None = None,
        link_engine: str | None = None, allow_unemulated: bool | None = None, image: str | None = None,
        progress: ProgressSink | None = None, write_report: bool = True,
        measure_links: bool | None = None, inventory: str | Path | None = None,
        allow_root_workers: bool = False) -> RunResult:
    """Train every optimizer of the scenario on emulated links into a new run folder under `out`.

    Two kinds of option (`distro_bench.run.overrides`), each given as one object or as keyword arguments (not
    both): `Overrides`, what changes in the scenario (`optimizers`, a budget: `steps`, `time_budget` like
    "300s", `tokens` like "2M", `target_val_loss`, which replaces the scenario's; `seed`; `repeat`: each optimizer
    K times with seeds seed..seed+K-1; `sets`: any scenario field by dotted path, {"optimizers.distro.lr": 1e-3} or
    ["optimizers.distro.lr=1e-3"], validated like the file), and `RunSettings`, how it runs (`backend`, `out`, `link_engine`,
    `allow_unemulated`, `image`, `measure_links`, `write_report`, `inventory`: the hosts of the ssh backend; the link
    ones default to the scenario's `network` section; `allow_root_workers`: accept workers as uid 0 where no
    unprivileged uid can run them, else such a run stops before training).
    Returns the run folder, its state and the typed summary
    (`result.summary.optimizers[name].step_time_s_mean`, ...)."""
    from distro_bench.run.overrides import Overrides, RunSettings, set_pairs
    from distro_bench.run.runner import run_scenario

    given = Overrides(optimizers=tuple(optimizers) if optimizers else None, steps=steps, seed=seed,
                      time_budget=time_budget, tokens=tokens, target_val_loss=target_val_loss, repeat=repeat,
                      sets=set_pairs(sets))
    given_settings = RunSettings(backend=backend, out=Path(out), link_engine=link_engine,
                                 allow_unemulated=allow_unemulated, image=image, write_report=write_report,
                                 measure_links=measure_links, inventory=Path(inventory) if inventory else None,
                                 allow_root_workers=allow_root_workers)
    for name, obj, kw in (("overrides", overrides, given.given()), ("settings", settings, given_settings.given())):
        if obj is not None and kw:
            raise InputError(f"run: give the options as `{name}` or as keyword arguments, not both "
                             f"({', '.join(kw)} given beside {name})")
    return run_scenario(_scenario(scenario), settings or given_settings, progress, overrides=overrides or given)


def sweep(scenario: str | Path | Scenario, sets: list[str], overrides: Overrides | None = None,
          settings: RunSettings | None = None, *,
          pick_best: bool = False, allow_few_seeds: bool = False, reuse: bool = True,
          on_point: Callable[[Point, int, str], None] | None = None,
          point_progress: Callable[[], AbstractContextManager[ProgressSink | None]] | None = None) -> SweepResult:
    """Run the scenario over a grid of settings into one sweep folder under `settings.out`.

    `sets` are `PATH=V1,V2,...` (a scenario field by dotted path and the values to try; the grid is every
    combination). The budget and `repeat` of `overrides` apply at every point (`repeat`
    defaults to 3 seeds with `pick_best`, which refuses fewer unless `allow_few_seeds`); `settings` say how each
    point runs. `pick_best` writes best.yaml
    and best-scenario.yaml (each method's best setting by the held-out tuning split's loss). `point_progress`
    makes the progress sink of each point's run; `on_point(point, total, what)` hears each point start and
    end. Ctrl-C keeps the finished points and raises Interrupted."""
    from distro_bench.studies import sweep as sweeps

    return sweeps.sweep(_scenario(scenario), sweeps.parse_sets(sets), overrides, settings, pick_best=pick_best,
                        allow_few_seeds=allow_few_seeds, reuse=reuse, on_point=on_point, point_progress=point_progress)


@dataclass(frozen=True)
class NodeRun:
    """One host's part of a multi-host run: the run folder (node-rank 0's, or this host's local copy), its state,
    this host's facts, and on node-rank 0 the run's typed summary."""

    node_rank: int
    run_dir: Path
    state: str
    host: dict[str, Any]
    reason: str | None = None
    summary: Summary | None = None

    def to_dict(self) -> dict[str, Any]:  # the summary has its own document (summary.json); `reason` is said aside
        from pydantic_core import to_jsonable_python

        d: dict[str, Any] = to_jsonable_python({k: v for k, v in vars(self).items() if k not in ("reason", "summary")})
        return d


def node(scenario: str | Path, *, rdzv: str, node_rank: int, nnodes: int | None = None, iface: str | None = None,
         i_know: bool = False, shaping: bool = True, placement: str | None = None, store_port: int | None = None,
         join_timeout_s: float = 600.0, ship_records: bool = False, stream: bool = False,
         secret_file: str | Path | None = None, overrides: Overrides | None = None,
         settings: RunSettings | None = None, note: Callable[[str], None] | None = None) -> NodeRun:
    """Run this host's part of a scenario across hosts (docs/scaling-out.md): shape `iface` with the links of the
    nodes placed here, start their workers under torchrun (c10d rendezvous at `rdzv`, HOST:PORT), remove the
    shaping on exit, Ctrl-C or failure. Node-rank 0 writes the run folder. `overrides` change the scenario as
    for `run` (optimizers, budget, seeds); `settings` are the run settings shared with `run` (out,
    allow_unemulated, measure_links, collective_timeout_s, write_report); `note` hears progress lines; `stream`: a
    launcher drives this agent over a pipe (notes, records and heartbeats as JSON lines on stdout, stop when stdin
    closes: the ssh backend); `secret_file`: the agents' store secret (else DISTRO_BENCH_SECRET, else node-rank 0
    makes one and prints it)."""
    from distro_bench.multihost.agent import NodeOptions, run_node
    from distro_bench.results.rundir import load_run as load_run_folder
    from distro_bench.run.overrides import Overrides, RunSettings

    opts = NodeOptions(scenario=Path(scenario), rdzv=rdzv, node_rank=node_rank, nnodes=nnodes, iface=iface,
                       i_know=i_know, shaping=shaping, placement=placement, store_port=store_port,
                       join_timeout_s=join_timeout_s, ship_records=ship_records, stream=stream,
                       secret_file=Path(secret_file) if secret_file is not None else None,
                       overrides=overrides or Overrides(),
                       settings=settings or RunSettings())
    from distro_bench.results.summary import Summary

    r = run_node(opts, note=note or (lambda text: None))
    written = r.node_rank == 0 and (Path(r.run_dir) / "summary.json").is_file()
    summary = Summary.model_validate(load_run_folder(r.run_dir).summary) if written else None
    return NodeRun(node_rank=r.node_rank, run_dir=Path(r.run_dir), state=str(r.state), host=dict(r.host),
                   reason=r.reason, summary=summary)


# ---- reading run folders --------------------------------------------------------------------------

def load_run(path: str | Path) -> Run:
    """Read a run folder (one whose harness died before summarising is rebuilt from the workers' records)."""
    from distro_bench.report.load import Run

    return Run.load(path)


def _run(run: str | Path | Run) -> Run:
    from distro_bench.report.load import Run

    return run if isinstance(run, Run) else Run.load(run)


def check(run: str | Path | Run, *, baseline: str | None = None, candidates: list[str] | None = None,
          allow_few_seeds: bool = False, strict: bool = False, against: str | Path | Run | None = None,
          **thresholds: float | None) -> CheckReport:
    """The CI gate. Thresholds default to the scenario's `checks`; `.passed` says whether every check passed.
    The loss gap needs 3 paired seeds unless `allow_few_seeds`; a check not applicable to the run (N/A) fails
    only with `strict`. `against`, a reference run of the same scenario (the last good one), adds the
    regression checks: reduction drop and loss-gap regression, paired by seed (docs/ci-gate.md)."""
    from distro_bench.report.check import run_checks

    ref = _run(against).loaded if against is not None else None
    return run_checks(_run(run).loaded, baseline=baseline, candidates=candidates, allow_few_seeds=allow_few_seeds,
                      strict=strict, against=ref, **thresholds)


def _gate_keywords(fn: Callable[..., Any]) -> inspect.Signature:
    from distro_bench.results.figures import gate_signature

    return gate_signature(fn)


check.__signature__ = _gate_keywords(check)  # type: ignore[attr-defined]  # one keyword per gate row


def check_to_dict(report: CheckReport) -> dict[str, Any]:
    """A check report as JSON-ready data, each result with its threshold as a number (`limit`, and `op`), as
    the gate table (harness/distro_bench/scenario/gates.py) set them."""
    d: dict[str, Any] = report.to_dict()
    return d


@dataclass
class ReportFiles:
    """What `report` and `compare` wrote."""

    markdown: Path
    html: Path
    plots: list[Path]

    def to_dict(self) -> dict[str, Any]:
        from pydantic_core import to_jsonable_python

        d: dict[str, Any] = to_jsonable_python(asdict(self))
        return d


def report(run: str | Path | Run, out: str | Path | None = None) -> ReportFiles:
    """report.md, report.html and plots/*.png for one run folder, or a Run already loaded (into `out`,
    default the folder itself)."""
    from distro_bench.report import write_run_report
    from distro_bench.report.load import Run

    paths = write_run_report(run.loaded if isinstance(run, Run) else Path(run), _out_dir(out, "write the report"))
    return ReportFiles(paths[0], paths[1], list(paths[2:]))


def compare(runs: Sequence[str | Path], out: str | Path | None = None, *, allow_different: bool = False) -> ReportFiles:
    """One comparison report of several run folders (default folder results/compare-<time>/). Runs that differ in
    more than the optimizers under test (workers, links, model, budget, seeds, backend, host: every difference
    of their resolved scenarios) are refused with a ScenarioError listing each, unless `allow_different` (then
    the differences head the report)."""
    from distro_bench.report import write_comparison
    from distro_bench.report.compare import default_out

    if len(runs) < 2:
        raise InputError("compare: give at least two run folders")
    paths = write_comparison([Path(r) for r in runs], _out_dir(out, "write the report") or default_out(),
                             allow_different=allow_different)
    return ReportFiles(paths[0], paths[1], list(paths[2:]))


def history(index: str | Path = "results/index.parquet", *, figure: str = "val_loss_at_equal_time",
            scenario: str | None = None, optimizer: str | None = None) -> list[HistoryPoint]:
    """One summary figure of a scenario over the runs in an index (every `run` appends to <out>/index.parquet),
    in time order, each with its 95% interval over seeds and `changed`: True where the interval does not overlap
    the previous run's of the same optimizer (a change beyond the noise), None where either has no interval."""
    from distro_bench.results.history import read_index, series

    return series(read_index(Path(index)), figure, scenario=scenario, optimizer=optimizer)


def plot_history(points: list[HistoryPoint], figure: str, out: str | Path) -> Path:
    """`history`'s points as a PNG at `out`: one line per optimizer with 95% error bars, the runs in time order
    labelled by commit, a change beyond the noise circled."""
    from distro_bench.report.history_plot import plot_history as plot

    return plot(points, figure, Path(out))


# ---- projection -----------------------------------------------------------------------------------

def project(scenario: str | Path | Scenario, *, model: str | None = None, workers: list[int] | None = None,
            optimizers: list[str] | None = None, mfu: float = 0.4, out: str | Path | None = None,
            plots: bool = True) -> ProjectionStudy:
    """Bytes and step time per optimizer at any worker count and model size, from the projection model.
    Writes projection.json (and plots) into `out` (default results/project-<scenario>-<time>/) unless
    `plots=False` and no `out` is given."""
    from distro_bench.studies.projection_study import study

    out_dir = _out_dir(out, "write the projection")
    s = _scenario(scenario)
    if optimizers:
        from distro_bench.scenario.loading import with_overrides

        s = with_overrides(s, optimizers=optimizers)
    return study(s, model=model, workers=workers, mfu=mfu, out=out_dir, plots=plots)


def published(replayed: Sequence[str | Path] = ()) -> list[PointResult]:
    """Every published operating point (distro_bench/data/published/) with the projection's figure for it and their
    ratio (docs/projection.md "Published operating points"); with `replayed` run folders of replay scenarios
    (docs/replay.md), the figures they measured for the points they replay."""
    from distro_bench.studies.published import evaluate_all, load_replay

    return evaluate_all(replays=[load_replay(Path(p)) for p in replayed])


# ---- the host and its links -----------------------------------------------------------------------

@dataclass(frozen=True)
class DoctorReport:
    """What this host can run: its probed facts, and per backend and link engine the problems that stop a
    scenario with rates and delay (each a line that says how to fix it; [] = ready)."""

    host: HostInfo
    readiness: dict[str, dict[str, list[str]]]  # backend -> link engine ("none": it uses none) -> problems
    backend_auto: str  # what --backend auto would use, and why (or "none (why not)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def doctor() -> DoctorReport:
    """Probe the host (root, namespaces, qdiscs, the delay line, Docker, GPUs, binaries, Python modules) and say,
    per backend and link engine, ready or what to fix."""
    from distro_bench.backends.registry import select_backend
    from distro_bench.net import host
    from distro_bench.run.preflight import readiness

    h = host.probe()
    ready = readiness(h)
    try:
        _, auto = select_backend("auto")
    except Exception as e:  # doctor reports, it does not fail
        auto = f"none ({e})"
    return DoctorReport(host=h, readiness=ready, backend_auto=auto)


@dataclass(frozen=True)
class _LinkSetup:
    scenario: Scenario
    options: Any  # distro_bench.backends.BackendOptions
    plan: Any  # what NetnsBackend.preflight planned
    lo: float
    hi: float


def _link_setup(scenario: str | Path | Scenario, link_engine: str | None, allow_unemulated: bool,
                tolerance: str | tuple[float, float], goodput_tool: str) -> _LinkSetup:
    """The checks before any namespace exists: the tolerance, the scenario, what netns can emulate here."""
    from distro_bench.backends.base import BackendOptions
    from distro_bench.backends.netns import NetnsBackend
    from distro_bench.net.linkcheck import parse_tolerance
    from distro_bench.run import preflight

    lo, hi = parse_tolerance(tolerance)
    s = _scenario(scenario)
    opts = BackendOptions(link_engine=link_engine or s.network.link_engine,
                          allow_unemulated=allow_unemulated or s.network.allow_unemulated)
    preflight.check_options("netns", s, opts)
    if goodput_tool == "iperf3":
        h = preflight.host_for("netns", preflight.Needs.of(s))
        if not h.has_binary("iperf3"):
            raise preflight.PreflightError([preflight.Problem("`iperf3`", "--goodput-tool iperf3",
                                                              preflight.INSTALL["iperf3"] + ", or --goodput-tool auto")],
                                           backend="netns", link_engine=opts.link_engine)
    return _LinkSetup(s, opts, NetnsBackend.preflight(s, opts), lo, hi)


def links(scenario: str | Path | Scenario, *, link_engine: str | None = None,
          tolerance: str | tuple[float, float] = (0.90, 1.02), seconds: float = 5.0, goodput_tool: str = "auto",
          allow_unemulated: bool = False, progress: LinksProgress | None = None) -> LinksReport:
    """Bring the scenario's links up in network namespaces and measure each node's goodput up and down (against
    a far end on the switch) and RTT (TCP handshakes) where delay is emulated, against the spec. `tolerance`:
    the goodput pass range LO,HI as fractions of the configured rate ("0.90,1.02", "90%,102%" or a pair);
    `goodput_tool`: auto (iperf3 where installed, else a Python TCP probe), iperf3 or python. Needs root."""
    from distro_bench.backends.netns import NetnsBackend
    from distro_bench.net import linkcheck, linktest

    linkcheck.goodput_tool_named(goodput_tool)
    setup = _link_setup(scenario, link_engine, allow_unemulated, tolerance, goodput_tool)
    tell = progress or linkcheck.QuietLinks()
    tell.measuring(linktest.goodput_tool(goodput_tool), setup.lo, setup.hi)
    with tempfile.TemporaryDirectory(prefix="dbench-links-") as tmp:
        backend = NetnsBackend(setup.scenario, Path(tmp), setup.options, setup.plan)
        with backend:
            return linkcheck.check_links(backend, setup.scenario.name, goodput_range=(setup.lo, setup.hi),
                                         seconds=seconds, goodput_tool=goodput_tool, progress=tell)


def links_schedule(scenario: str | Path | Scenario, *, node: int = 0, direction: str = "up",
                   seconds: float = 5.0, link_engine: str | None = None,
                   tolerance: str | tuple[float, float] = (0.90, 1.02),
                   allow_unemulated: bool = False) -> ScheduleReport:
    """Play the links' schedules and traces (as a run does, from t=0) and measure one node's rate per second
    against them, `direction` "up" or "down", for the schedule's length (its last change plus `seconds`, at
    least 10 s, or a trace's period). Fails when a settled window falls outside `tolerance` of the asked rate or a change came more
    than 200 ms late. Needs root."""
    from distro_bench.backends.netns import NetnsBackend
    from distro_bench.net import linkcheck

    setup = _link_setup(scenario, link_engine, allow_unemulated, tolerance, "auto")
    plan = linkcheck.plan_schedule(setup.scenario, node=node, direction=direction, seconds=seconds)
    with tempfile.TemporaryDirectory(prefix="dbench-links-") as tmp:
        backend = NetnsBackend(setup.scenario, Path(tmp), setup.options, setup.plan)
        with backend:
            return linkcheck.check_schedule(backend, setup.scenario.name, plan, node=node, direction=direction,
                                            tolerance=(setup.lo, setup.hi))


# ---- containers and housekeeping ------------------------------------------------------------------

def build_image(*, offline: bool = False, base: str | None = None, tag: str | None = None, node: bool = False,
                force: bool = False, no_cache: bool = False, progress: Callable[[str], None] | None = None,
                with_packages: list[str | Path] | None = None) -> BuildResult:
    """Build the docker backend's worker image (a wheelhouse, then `docker build`), or find it up to date by
    its build key; with `node`, also the node image of `export k8s` on top of it (the distro-bench command, tc,
    the CLI's deps). `with_packages`: your own distributions (a method: docs/extending.md), package folders or
    wheels, installed into the worker image. `offline`: the debootstrap base and a host-side wheelhouse, no network during the build;
    `force` builds even when up to date; `no_cache` rebuilds every layer. `progress` hears each output line
    (steps unindented, the build's own lines indented)."""
    from distro_bench.backends.docker.image import build_image as build_worker
    from distro_bench.backends.docker.node_image import build_node_image

    extra = [Path(p) for p in with_packages or []]
    if node:
        if extra:
            raise InputError("--with and --node: build the worker image with --with first, then --node on it")
        if progress is None:
            return build_node_image(offline=offline, base=base, tag=tag, force=force, no_cache=no_cache)
        return build_node_image(offline=offline, base=base, tag=tag, force=force, no_cache=no_cache, progress=progress)
    if progress is None:
        return build_worker(offline=offline, base=base, tag=tag, force=force, no_cache=no_cache, with_packages=extra)
    return build_worker(offline=offline, base=base, tag=tag, force=force, no_cache=no_cache, progress=progress,
                        with_packages=extra)


@dataclass
class CleanResult:
    """What `clean` removed and what it could not, per backend."""

    removed: dict[str, list[str]]  # backend -> what was removed
    problems: dict[str, list[str]]  # backend -> what could not be

    @property
    def ok(self) -> bool:
        return not any(self.problems.values())


def clean(force: bool = False) -> CleanResult:
    """Remove what finished or killed runs left behind (containers, networks, namespaces); runs still going
    are left alone unless `force`."""
    from distro_bench.backends.registry import clean_leftovers

    results = clean_leftovers(include_live=force)
    return CleanResult(removed={k: list(r) for k, (r, _) in results.items()},
                       problems={k: list(p) for k, (_, p) in results.items()})


# ---- export ---------------------------------------------------------------------------------------

def export(run: str | Path | Run, to: Literal["mlflow", "tensorboard", "wandb"],
           dest: str | Path | None = None) -> ExportResult:
    """Copy a run into an experiment tracker: one tracker run per optimizer and seed (`runs` keyed
    "optimizer/seed<k>") with its parameters (the run id, git commit, scenario hash, every node's link and
    hardware, the model), per-step metrics and the report attached. MLflow writes a local file store (or to
    `dest` given as a tracking URI), TensorBoard event files (DEST/<run folder>/<optimizer>/seed<k>), W&B an
    offline run folder per series (DEST/wandb/offline-run-*, nothing sent). Default `dest`: RUN/mlruns,
    RUN/tensorboard or RUN/wandb."""
    from distro_bench.export.trackers import export_run

    return export_run(_run(run), to, dest)


def export_recipe(kind: Literal["slurm", "k8s"], scenario: str | Path, *, dest: str | Path | None = None,
                  nnodes: int | None = None, placement: str | None = None, iface: str = "eth0", port: int = 29400,
                  image: str | None = None, results_claim: str | None = None, gpus_per_node: int = 0,
                  time_limit: str = "01:00:00") -> Path:
    """Write the launch recipe of a multi-host run of the scenario (docs/scaling-out.md): `slurm` an sbatch
    script, `k8s` an indexed Job, a headless Service, the scenario as a ConfigMap and a claim for the results
    (`results_claim`: an existing one instead). `nnodes` and `placement` ("0,1;2,3": scenario ranks per host)
    default to the scenario's workers[].host, else one host per scenario node; `port` is the rendezvous port
    (the agents' store: +1); `image` defaults to the node image (`distro-bench image build --node`). Returns
    the file written (default ./<scenario>.sbatch or ./<scenario>.k8s.yaml)."""
    from distro_bench.backends.docker.node_image import default_node_tag
    from distro_bench.export.recipes import RecipeSettings, write
    from distro_bench.scenario.placement import from_scenario

    s = _scenario(scenario)
    p = from_scenario(s, nnodes, placement)
    settings = RecipeSettings(nnodes=p.nnodes, placement=p.encode(), iface=iface, port=port, gpus_per_node=gpus_per_node,
                              image=image or default_node_tag(), time_limit=time_limit, results_claim=results_claim,
                              i_know=kind == "k8s")  # a pod's eth0 always carries its default route
    return write(kind, Path(scenario), Path(dest) if dest else None, settings, s)


def __getattr__(name: str) -> Any:
    # `distro_bench.api.Run` stays public; the class lives beside the reports' LoadedRun (harness/distro_bench/report/load.py,
    # below export/trackers.py, which takes it) and loads pandas, which importing this module must not.
    if name == "Run":
        from distro_bench.report.load import Run

        return Run
    if name in ("LinksProgress", "LinksReport", "ScheduleReport"):  # net/linkcheck.py; loads pydantic's scenario
        from distro_bench.net import linkcheck

        return getattr(linkcheck, name)
    if name == "Summary":  # public here, loaded on first use: pydantic and numpy are most of an import's time
        from distro_bench.results.summary import Summary

        return Summary
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["COMMANDS", "CleanResult", "DoctorReport", "LinksProgress", "LinksReport", "NodeRun", "ReportFiles", "Run",
           "ScheduleReport", "Summary", "ValidateDocument", "build_image", "check", "check_to_dict", "clean", "compare",
           "doctor", "export", "export_recipe", "history", "links", "links_schedule", "load_run", "node", "plot_history",
           "project", "published", "report", "run", "schema", "sweep", "validate", "validate_document"]
