"""A run's lifecycle, the same for `distro-bench run` (run/runner.py) and a multi-host run (multihost/agent.py):

    open      a new run folder under --out, claimed (net/owner.py: `clean` ends its status if we are killed),
              scenario.yaml (resolved: `auto` options chosen, traces copied in; the workers read it as it is)
              and status.json "running"
    describe  environment.json and prediction.json (the projection model's figures for this very run)
    train     seed by seed, every optimizer of a seed in turn, through a launch callback (how the workers are
              started differs: the runner starts them through a backend, the agent under torchrun)
    guard     how it ended: complete, incomplete (Ctrl-C, SIGTERM: Interrupted) or failed with the reason
    finish    status.json first, then metrics.parquet and summary.json/csv from whatever the workers recorded,
              then the report; the claim released

Hosts other than node-rank 0 of a multi-host run `join` node 0's folder: they train and guard, node 0 opens and
finishes. The derived limits both launchers give their workers (collective timeout, dist backend) live here too.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import yaml

from distro_bench.errors import HarnessError, InputError, Interrupted, RunFolderWriteError, WorkerFailed
from distro_bench.net import owner
from distro_bench.net.host import gpus as host_gpus
from distro_bench.net.naming import new_run_id
from distro_bench.report import write_run_report
from distro_bench.results import history, metrics, runfiles
from distro_bench.results.bottleneck import site_link_loads
from distro_bench.results.build import build_summary
from distro_bench.results.cost import link_class_of
from distro_bench.results.events import write_events
from distro_bench.results.rundir import (
    SCHEMA_VERSION,
    atomic_write_json,
    atomic_write_parquet,
    atomic_write_text,
    new_run_dir,
    write_status,
)
from distro_bench.results.runfiles import safe_join
from distro_bench.scenario.loading import dump_for_run, load_resolved, write_data_copies
from distro_bench.scenario.model import Scenario
from distro_bench.train.models import model_shapes, parameter_count
from distro_bench.train.projection import UNSHAPED_BPS, max_hop_delay, project, resolve_options
from distro_bench.train.replay import resolve_codecs


class ProgressSink(Protocol):
    def note(self, text: str) -> None: ...
    def start(self, optimizer: str, total_steps: int | None) -> None: ...
    def step(self, optimizer: str, record: dict) -> None: ...
    def finish(self, optimizer: str) -> None: ...


class SilentProgress:
    def note(self, text): pass
    def start(self, optimizer, total_steps): pass
    def step(self, optimizer, record): pass
    def finish(self, optimizer): pass


class NoteProgress(SilentProgress):
    """Notes to a callback, no progress bars (the multi-host agent prints its notes on stderr)."""

    def __init__(self, note: Callable[[str], None]):
        self._note = note

    def note(self, text):
        self._note(text)


# (optimizer, seed) -> None: trains one optimizer on one seed on every worker, raising on failure.
Launch = Callable[[str, int], None]


@contextmanager
def sigterm_as_interrupt(life: RunLifecycle | None = None) -> Iterator[None]:
    """SIGTERM (a CI timeout, `kill`) takes the same clean path as Ctrl-C. Only the first one interrupts:
    later ones (a supervisor repeating its TERM) are counted and ignored until the run is finished, so the
    teardown, status.json, the summary and the report are still written, and the run exits 130 (Interrupted)
    rather than dying of the signal. With `life`, that holds through `life.finish()`, which restores the
    previous handler; SIGKILL still ends it at once."""
    terms = [0]

    def handler(signum, frame):
        terms[0] += 1
        if life is not None:
            life.sigterms = terms[0]
        if terms[0] == 1:
            raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        if life is not None and terms[0]:
            life.restore_sigterm = previous  # finish() restores it once everything is written
        else:
            signal.signal(signal.SIGTERM, previous)


# ---- what both launchers give their workers ------------------------------------------------------------

def collective_timeout_s(scenario: Scenario) -> float:
    """Long enough for the baseline's full fp32 gradient exchange over the slowest link, four times over."""
    params = parameter_count(scenario.resolved_model())  # on the meta device: no weights
    rates = [r for n in scenario.nodes() if n.link for r in (n.link.up, n.link.down) if r]
    delay = max((n.link.delay + n.link.jitter for n in scenario.nodes() if n.link), default=0.0)
    transfer = 2 * params * 4 * 8 / min(rates) if rates else 0.0
    return 120.0 + 4 * transfer + 200 * delay


def choose_dist_backend(scenario: Scenario) -> str:
    """NCCL only when every worker has a GPU of its own; otherwise gloo (CPU, or GPUs shared)."""
    if scenario.replay is not None:  # a replay's buffers live in host memory (train/replay.py)
        return "gloo"
    gpus = len(host_gpus(use_torch=True))
    nodes = scenario.nodes()
    devices = [n.hardware.device for n in nodes]
    if gpus == 0 or any(d == "cpu" for d in devices):
        return "gloo"
    explicit = [d for d in devices if d.startswith("cuda:")]
    if len(set(explicit)) < len(explicit) or len(nodes) > gpus:
        return "gloo"
    return "nccl"


def worker_dir(run_dir: Path, run_name: str, seed: int, repeats: int) -> Path:
    """workers/<optimizer>/ for one seed (the layout before repeats), workers/<optimizer>/seed<S>/ for several."""
    base = safe_join(run_dir / "workers", run_name, what="optimizer")  # a name from the scenario: one component
    return base / f"seed{seed}" if repeats > 1 else base


def with_choices_made(scenario: Scenario) -> Scenario:
    """The scenario with every optimizer's `auto` option chosen for its links (harness/distro_bench/train/projection.py
    resolve_options), made once when the run is opened: the run folder's scenario.yaml records the choice, and
    the workers (one per rank, optimizer and seed) and the prediction read it instead of projecting again."""
    nodes = scenario.nodes()
    shapes = model_shapes(scenario.resolved_model())  # the worker's own shapes (no weights)
    chosen = {name: resolve_options(cfg, nodes, shapes) for name, cfg in scenario.optimizers.items()}
    if chosen == dict(scenario.optimizers):
        return scenario
    return scenario.model_copy(update={"optimizers": chosen})  # private state (trace bytes, folder) kept


# ---- the lifecycle ------------------------------------------------------------------------------------------

class RunLifecycle:
    """One run folder from opening to its final status. `host`: the node-rank of a multi-host run (named in
    the reasons), None for a single-host run."""

    def __init__(self, scenario: Scenario, backend_name: str, sink: ProgressSink | None = None,
                 host: int | None = None):
        self.scenario = scenario
        self.backend_name = backend_name
        self.sink: ProgressSink = sink or SilentProgress()
        self.host = host
        self.run_dir: Path | None = None
        self.started = _now()
        self.events: list[dict] = []  # network changes (net/netchange.py) of every optimizer and seed
        self.state: str = "failed"  # complete | incomplete | failed
        self.reason: str | None = None
        self.failure: BaseException | None = None
        self.claim_id: str | None = None
        self.sigterms = 0  # SIGTERMs received (the first interrupts; see sigterm_as_interrupt)
        self.restore_sigterm: Any = None  # the SIGTERM handler finish() puts back after a SIGTERM

    # ---- open ---------------------------------------------------------------------------------------------
    def open(self, out: Path) -> Path:
        """A new run folder under `out`, claimed, with scenario.yaml and status "running". A scenario that
        follows traces is reloaded from the folder's copy (the workers read that one)."""
        self.run_dir = run_dir = new_run_dir(out, self.scenario.name)
        self.started = _now()
        try:
            self._claim()
            self.scenario = resolve_codecs(with_choices_made(self.scenario), self.sink.note)
            text, follows_traces = dump_for_run(self.scenario, run_dir)
            atomic_write_text(run_dir / "scenario.yaml", text)
            if follows_traces:  # the copies hold the bytes validation checked: not checked again
                self.scenario = load_resolved(run_dir / "scenario.yaml")
            write_status(run_dir, "running", None)
        except BaseException:
            # Nothing ran: no claim for `clean` to find, and no folder without status.json. The folder is the
            # one new_run_dir just made (never another run's), holding at most partial copies.
            self.release()
            shutil.rmtree(run_dir, ignore_errors=True)
            self.run_dir = None
            raise
        return run_dir

    def join(self, run_dir: Path) -> None:
        """Train into a folder another process opened and finishes (node-rank 0's, for the other hosts). Its data
        files (data/: node 0's scenario.yaml names them) are written from this host's own validated scenario where
        the folder is a local copy without them."""
        self.run_dir = run_dir
        write_data_copies(self.scenario, run_dir)

    def _claim(self) -> None:
        self.claim_id = new_run_id()
        try:
            owner.claim(self.claim_id, self.run_dir)
        except OSError:  # no runtime folder: the run goes on, only `clean` cannot end a killed one's status
            self.claim_id = None

    def release(self) -> None:
        if self.claim_id:
            try:
                owner.release(self.claim_id)
            except OSError:
                pass
            self.claim_id = None

    # ---- describe -----------------------------------------------------------------------------------------
    def write_environment(self, env: dict) -> None:
        atomic_write_json(self._dir() / "environment.json", env)

    def write_prediction(self, network: dict) -> None:
        """The projection model's figures for this very run, so the report can set them beside the measurement."""
        emulated = network.get("network_emulated", False)
        nodes = self.scenario.nodes()
        if not emulated:  # loopback: the links the scenario names were not there
            nodes = [n.model_copy(update={"link": None}) for n in nodes]
        projections, unpredicted = [], []
        for name in self.scenario.optimizers:  # one at a time: a method without a byte model is measured all the same
            try:
                projections += project(self.scenario, nodes=nodes, optimizers=[name])
            except NotImplementedError:
                unpredicted.append(name)
        if unpredicted:
            self.sink.note(f"{', '.join(unpredicted)}: no byte model (predict_collectives/predict_period); its bytes "
                           "are counted, not predicted")
        atomic_write_json(self._dir() / "prediction.json", {
            "network_emulated": emulated, "unshaped_bps": UNSHAPED_BPS,
            "world_size": len(nodes), "max_hop_delay_s": max_hop_delay(nodes),
            "optimizers": {p.optimizer: p.as_dict() for p in projections},
            "not_predicted": unpredicted,
        })

    # ---- train --------------------------------------------------------------------------------------------
    def runs(self) -> list[tuple[int, str]]:
        """(seed, optimizer) in training order: seed by seed, so an interrupted run keeps whole comparisons, and
        within each seed the order `training_order` gives (recorded as the summary's `run.order_by_seed`)."""
        return [(seed, name) for seed, names in training_order(self.scenario).items() for name in names]

    def worker_dir(self, optimizer: str, seed: int) -> Path:
        return worker_dir(self._dir(), optimizer, seed, len(self.scenario.train.seed_list()))

    def train_all(self, launch: Launch) -> None:
        runs = list(self.runs())
        if (plan := getattr(self.sink, "plan", None)) is not None:  # a sink that shows the whole run's ETA
            plan(len(runs))
        for seed, name in runs:
            launch(name, seed)

    @contextmanager
    def guard(self, on_failure: Callable[[BaseException], None] | None = None) -> Iterator[None]:
        """Around everything between open and finish: records how the run ended in `state`/`reason`
        (`on_failure` may refine the reason, e.g. with the host that failed), turns SIGTERM into Ctrl-C, and
        Ctrl-C into Interrupted (exit 130). Failures propagate."""
        here = f" on host {self.host}" if self.host is not None else ""
        prefix = f"host {self.host}: " if self.host is not None else ""
        try:
            with sigterm_as_interrupt(self):
                yield
            self.state = "complete"
        except KeyboardInterrupt as e:
            self.state, self.reason, self.failure = "incomplete", f"interrupted{here} (Ctrl-C or SIGTERM)", e
            if on_failure:
                on_failure(e)
            raise Interrupted(f"interrupted; partial results kept in {self.run_dir}") from None
        except HarnessError as e:
            self.reason, self.failure = prefix + str(e), e
            if on_failure:
                on_failure(e)
            raise
        except Exception as e:
            self.reason, self.failure = f"{prefix}{type(e).__name__}: {e}", e
            if on_failure:
                on_failure(e)
            raise

    # ---- finish -------------------------------------------------------------------------------------------
    def status_now(self) -> None:
        """status.json says how the run ended before a teardown that may fail (never raises)."""
        try:
            write_status(self._dir(), self.state, self.reason)
        except OSError as e:
            self.sink.note(f"status.json not written: {e}")

    def finish(self, write_report: bool = True) -> dict:
        """Status first, then metrics and summary (`finalize`), then the report; the claim released. A folder
        the disk refuses raises RunFolderWriteError (WorkerFailed, with the worker's log tail, when a worker
        failure was the run's end)."""
        reclaim_worker_files(self._dir())
        ended = owner.ended_by_clean()
        if ended and self.state != "complete":
            self.reason = (f"ended by `distro-bench clean --force`, which removed {ended} while the run was going"
                           + (f"; then: {self.reason}" if self.reason else ""))
        try:
            summary = finalize(self._dir(), self.scenario, self.backend_name, self.state, self.reason, self.started,
                               events=self.events)
        except RunFolderWriteError as e:
            self._restore_sigterm()
            if isinstance(self.failure, WorkerFailed):  # keep the worker's log tail beside the combined cause
                raise WorkerFailed(str(e), rank=self.failure.rank, log_tail=self.failure.log_tail) from None
            raise
        finally:
            self.release()
        try:
            if write_report:
                self.write_report()
        finally:
            self._restore_sigterm()
        return summary

    def _restore_sigterm(self) -> None:
        if self.restore_sigterm is not None:
            try:
                signal.signal(signal.SIGTERM, self.restore_sigterm)
            except ValueError:
                pass
            self.restore_sigterm = None

    def write_report(self) -> None:
        try:
            write_run_report(self._dir())
        except Exception as e:  # a report failure must not lose the run's data
            self.sink.note(f"report not written: {type(e).__name__}: {e}")

    def _dir(self) -> Path:
        if self.run_dir is None:
            raise RuntimeError("the run folder is not open")
        return self.run_dir


def reclaim_worker_files(run_dir: Path) -> None:
    """Give what the workers wrote (workers/**, as the run's own uid or nobody: backends/base.py) back to this
    process's user, so the finished run folder is one owner's and no worker uid can still change it. Only root
    can; links are not followed."""
    uid, gid = os.geteuid(), os.getegid()
    if uid != 0:
        return
    for root, dirs, files in os.walk(run_dir / "workers", followlinks=False):
        for name in [*dirs, *files, ""]:
            path = os.path.join(root, name) if name else root
            try:
                if os.lstat(path).st_uid != uid:
                    os.lchown(path, uid, gid)
            except OSError:
                continue


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def finalize(run_dir: Path, scenario: Scenario, backend_name: str, state: str, reason: str | None,
             started: str, events: list[dict] | None = None) -> dict:
    """Write status.json first, then aggregate whatever the workers recorded into metrics.parquet and
    summary.json/csv. A file the disk refuses turns the status to failed with the cause (and the run's own
    failure, if any) and raises RunFolderWriteError saying both."""
    try:
        write_status(run_dir, state, reason)
        if events:
            write_events(run_dir, events)
        return _write_results(run_dir, scenario, backend_name, state, reason, started)
    except RunFolderWriteError as e:
        if state == "complete":
            why = f"{e} (training completed; its results could not all be stored)"
        else:
            why = f"{e}; the run had {'failed' if state == 'failed' else 'stopped'}: {reason}"
        try:
            write_status(run_dir, "failed", why)
        except OSError:
            pass  # nothing more can be written; the message below still says what happened
        raise RunFolderWriteError(why) from None


def training_order(scenario: Scenario) -> dict[int, list[str]]:
    """The optimizers' training order per seed, in seed order: the scenario's order rotated by one more place at
    each seed (the k-th seed starts at the k-th optimizer). On a host whose speed drifts (load, caches, thermal)
    the method trained first is otherwise always the one that meets the fresh host, and its paired difference
    carries that drift; rotated, every method takes every place equally often over as many seeds as there are
    methods. A pure function of the scenario: every host of a multi-host run derives the same order."""
    names = list(scenario.optimizers)
    return {seed: names[k % len(names):] + names[:k % len(names)] if names else []
            for k, seed in enumerate(scenario.train.seed_list())}


def _write_results(run_dir: Path, scenario: Scenario, backend_name: str, state: str, reason: str | None,
                   started: str) -> dict:
    df, events = metrics.read_worker_records(run_dir / "workers")
    starts = [e for e in events if e.get("type") == "start"]
    probes = [e["probe_allgather_s"] for e in starts if e.get("probe_allgather_s") is not None]
    explicit, how = scenario.comparison_target()
    prediction = _read_json(run_dir / "prediction.json")
    predicted = prediction.get("optimizers") or {}
    summary: dict[str, Any] = build_summary(  # the one summary builder (issue 35)
        df, events, schema_version=SCHEMA_VERSION, baseline=scenario.baseline, target_val_loss=explicit,
        target_how=how, costs=scenario.costs.model_dump(),  # issues 29, 34
        link_classes=[link_class_of(n.link_name, scenario.costs.link_classes) for n in scenario.nodes()],
        predicted_wire_tx={k: p.get("wire_tx_bytes") for k, p in predicted.items() if isinstance(p, dict)},
        predicted_floor_ratio={k: p.get("floor_ratio") for k, p in predicted.items() if isinstance(p, dict)},
        link_loads=site_link_loads(scenario),  # issue 37: the link that bound each method (scenarios with sites)
        # issue 47: each method's predicted payload, None where it has no byte model (counted, not predicted)
        predicted_payload=({**{k: p["payload_tx_bytes"] + p["payload_rx_bytes"] for k, p in predicted.items()
                               if isinstance(p, dict) and p.get("payload_tx_bytes") is not None},
                            **dict.fromkeys(prediction.get("not_predicted") or [])} if prediction else None),
        run={"scenario": scenario.name, "backend": backend_name, "state": state, "reason": reason,
             "budget": scenario.budget().as_dict(), "seeds": scenario.train.seed_list(),
             # the optimizers' training order within each seed (training_order; JSON keys are strings)
             "order_by_seed": {str(seed): names for seed, names in training_order(scenario).items()},
             "started": started, "finished": _now(),
             "world_size": scenario.world_size,
             "corpus_sha256": sorted({e["corpus_sha256"] for e in starts if "corpus_sha256" in e}),
             # mean over ranks and optimizers of the workers' calibration gathers (worker.latency_probe)
             "probe_allgather_s": sum(probes) / len(probes) if probes else None,
             "root_workers": _root_workers(_read_json(run_dir / "environment.json"))})
    environment = _read_json(run_dir / "environment.json")
    commit = environment.get("git_commit") if isinstance(environment.get("git_commit"), str) else None
    df["run_id"], df["git_commit"] = run_dir.name, commit  # issue 52: rows of several runs combine as they are
    df = df.astype({"run_id": "string", "git_commit": "string"})
    atomic_write_parquet(run_dir / "metrics.parquet", df)
    atomic_write_json(run_dir / "summary.json", summary)
    atomic_write_text(run_dir / "summary.csv", metrics.summary_frame(summary["optimizers"], run_dir.name, commit)
                      .to_csv(index=False))
    _append_history(run_dir, summary, environment)
    return summary


def _append_history(run_dir: Path, summary: dict, environment: dict) -> None:
    """The run's figures appended to <out>/index.parquet (results/history.py). The index is a convenience beside
    the run folder, which holds everything: a failure to write it is said on stderr, not raised."""
    try:
        scenario = yaml.safe_load(runfiles.read_text(run_dir, "scenario.yaml", "scenario.yaml"))
        history.append_to_index(run_dir, summary, scenario if isinstance(scenario, dict) else {}, environment)
    except (OSError, runfiles.RunFileError, InputError, yaml.YAMLError, ValueError) as e:
        # one line on stderr (the run's own outputs are written; the index can be rebuilt from them)
        print(f"warning: {run_dir.parent / history.INDEX} not updated: {type(e).__name__}: {e}", file=sys.stderr)


def _root_workers(env: dict) -> bool:
    """Whether any host's workers kept uid 0 (accepted by --allow-root-workers; backends/base.py WorkerUser)."""
    users = [env.get("workers_user")] + [h.get("workers_user") for h in env.get("hosts") or [] if isinstance(h, dict)]
    return any(isinstance(u, dict) and u.get("root_accepted") is True for u in users)


def _read_json(path: Path) -> dict:
    """A JSON object from the run folder, or {} where it is absent or unreadable (prediction.json is optional)."""
    try:  # read as every run-folder file is (results/runfiles.py)
        data = runfiles.read_json(path.parent, path.name)
    except (OSError, runfiles.RunFileError):
        return {}
    return data if isinstance(data, dict) else {}

