"""One benchmark run: scenario -> backend -> workers -> metrics -> run folder (and report).

The runner owns the run folder and the worker processes' lifetimes: workers that fail, hang or are
interrupted are stopped, what they recorded is kept, and the folder says how the run ended.
"""

from __future__ import annotations

import json
import os
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import yaml

from distro_bench.backends import Backend, BackendOptions
from distro_bench.errors import HarnessError, Interrupted, RunFolderWriteError, WorkerFailed
from distro_bench.results import metrics
from distro_bench.results.rundir import (
    SCHEMA_VERSION,
    atomic_write_json,
    atomic_write_parquet,
    atomic_write_text,
    new_run_dir,
    write_status,
)
from distro_bench.results.summary import Summary
from distro_bench.run import environment, preflight
from distro_bench.run.progress import AcrossRanks
from distro_bench.scenario.model import Scenario, dump_for_run, scenario_from_dict


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


@dataclass
class RunOptions:
    backend: str = "auto"
    out: Path = Path("results")
    backend_options: BackendOptions = field(default_factory=BackendOptions)
    write_report: bool = True
    # Overrides for the derived limits (tests and impatient users): seconds a collective may block,
    # and seconds without any worker progress before the coordinator declares a hang.
    collective_timeout_s: float | None = None
    watchdog_s: float | None = None
    # Measure every node's link once after setup (distro_bench/net/linktest.py measure_nodes); None: the
    # scenario's network.measure_links.
    measure_links: bool | None = None


@dataclass
class RunResult:
    run_dir: Path
    state: str  # complete | incomplete | failed
    summary: Summary  # summary.json, typed; `summary["optimizers"]` style access still works


def collective_timeout_s(scenario: Scenario) -> float:
    """Long enough for the baseline's full fp32 gradient exchange over the slowest link, four times over."""
    from distro_bench.train.model import ModelConfig, parameter_count

    params = parameter_count(ModelConfig(**scenario.resolved_model()))  # arithmetic: no model built to size it
    rates = [r for n in scenario.nodes() if n.link for r in (n.link.up, n.link.down) if r]
    delay = max((n.link.delay + n.link.jitter for n in scenario.nodes() if n.link), default=0.0)
    transfer = 2 * params * 4 * 8 / min(rates) if rates else 0.0
    return 120.0 + 4 * transfer + 200 * delay


def choose_dist_backend(scenario: Scenario) -> str:
    """NCCL only when every worker has a GPU of its own; otherwise gloo (CPU, or GPUs shared)."""
    from distro_bench.net.host import gpus as host_gpus

    gpus = len(host_gpus(use_torch=True))
    nodes = scenario.nodes()
    devices = [n.hardware.device for n in nodes]
    if gpus == 0 or any(d == "cpu" for d in devices):
        return "gloo"
    explicit = [d for d in devices if d.startswith("cuda:")]
    if len(set(explicit)) < len(explicit) or len(nodes) > gpus:
        return "gloo"
    return "nccl"


@contextmanager
def _sigterm_as_interrupt():
    """SIGTERM (a CI timeout, `kill`) takes the same clean path as Ctrl-C."""
    def handler(signum, frame):
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Follower:
    """Reads new complete lines of a JSONL file as it grows."""

    def __init__(self, path: Path):
        self.path, self.pos, self.buf = path, 0, ""

    def new_records(self) -> list[dict]:
        try:
            with open(self.path) as f:
                f.seek(self.pos)
                chunk = f.read()
                self.pos = f.tell()
        except FileNotFoundError:
            return []
        self.buf += chunk
        lines = self.buf.split("\n")
        self.buf = lines.pop()
        return [json.loads(line) for line in lines if line.strip()]


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# A heartbeat silent this long (the worker rewrites it every second) means the process is stopped or frozen.
STOPPED_AFTER_S = 30.0


def _stopped_ranks(out: Path, ranks, silent_s: float) -> dict[int, float]:
    """rank -> seconds its heartbeat has been silent, for the ranks silent longer than `silent_s`."""
    from distro_bench.train.worker import heartbeat_age

    ages = {r: heartbeat_age(out / f"rank{r}.hb") for r in ranks}
    return {r: a for r, a in ages.items() if a is not None and a > silent_s}


def _stopped_error(run_name: str, out: Path, nodes, handles, rank: int, silent: float,
                   then: str | None = None) -> WorkerFailed:
    from distro_bench.train.worker import read_heartbeat

    b = read_heartbeat(out / f"rank{rank}.hb")
    where = f"at step {b[0]}, {b[1]}" if b else "before its first step"
    msg = (f"{run_name}: rank {rank} ({nodes[rank].name}) stopped responding: its heartbeat has been silent for "
           f"{silent:.0f}s ({where}); the process is alive but not running (stopped, e.g. SIGSTOP, or frozen)")
    if then:
        msg += f"; then {then}"
    return WorkerFailed(msg + f"; log: {handles[rank].log_path}", rank=rank,
                        log_tail=_log_tail(handles[rank].log_path))


def _hang_report(out: Path, nodes, stall_s: float) -> tuple[int, str]:
    """(suspect rank, message) from the heartbeats: a rank whose heartbeat stopped (a stopped process) first,
    then one not blocked in a collective."""
    from distro_bench.train.worker import heartbeat_age, read_heartbeat

    beats = {n.rank: read_heartbeat(out / f"rank{n.rank}.hb") for n in nodes}
    ages = {r: heartbeat_age(out / f"rank{r}.hb") for r in beats}

    def key(r):
        b, age = beats[r], ages[r]
        stopped = age is not None and age > min(STOPPED_AFTER_S, stall_s)
        blocked = b is not None and b[1] in ("communicate", "decide")  # waiting in a collective for a peer
        return (0 if stopped else 1, 0 if b is None else 1, 1 if blocked else 0, b[0] if b else -1,
                b[2] if b else 0.0)
    suspect = min(beats, key=key)
    where = ", ".join(f"rank {r}: " + (f"step {b[0]} {b[1]}" if b else "not started") for r, b in beats.items())
    return suspect, f"no progress for {stall_s:.0f}s ({where})"


def worker_dir(run_dir: Path, run_name: str, seed: int, repeats: int) -> Path:
    """workers/<optimizer>/ for one seed (the layout before repeats), workers/<optimizer>/seed<S>/ for several."""
    base = run_dir / "workers" / run_name
    return base / f"seed{seed}" if repeats > 1 else base


def _outage_error(e: WorkerFailed, cause: dict, run_name: str, timeout: float) -> WorkerFailed:
    """A worker that failed during (or just after) an outage: name the link and the time."""
    from distro_bench.scenario.units import format_duration

    return WorkerFailed(
        f"{run_name}: link {cause['link']!r} of {' and '.join(cause['nodes'])} went down at "
        f"{cause['start_s']:.1f}s for "
        f"{format_duration(cause['duration_s'])} and the workers did not survive it (a collective may block "
        f"{timeout:.0f}s: a longer outage ends the run); metrics up to then are kept. Worker: {e}",
        rank=e.rank, log_tail=e.log_tail)


def _train_one(backend: Backend, scenario: Scenario, run_dir: Path, run_name: str, sink: ProgressSink,
               options: RunOptions, seed: int | None = None, events: list[dict] | None = None) -> None:
    nodes = scenario.nodes()
    seeds = scenario.train.seed_list()
    seed = seeds[0] if seed is None else seed
    out = worker_dir(run_dir, run_name, seed, len(seeds))
    label = f"{run_name} seed {seed}" if len(seeds) > 1 else run_name
    out.mkdir(parents=True, exist_ok=True)
    timeout = options.collective_timeout_s or collective_timeout_s(scenario)
    threads = max(1, (os.cpu_count() or 1) // len(nodes))
    common = {
        "WORLD_SIZE": str(len(nodes)), "MASTER_ADDR": backend.master_addr(), "MASTER_PORT": str(backend.master_port()),
        "DISTRO_BENCH_TIMEOUT_S": f"{timeout:.0f}", "DISTRO_BENCH_DIST_BACKEND": choose_dist_backend(scenario),
        "PYTHONUNBUFFERED": "1",
    }
    argv = [backend.python(), "-m", "distro_bench.train.worker", "--scenario", str(run_dir / "scenario.yaml"),
            "--optimizer", run_name, "--out", str(out), "--seed", str(seed)]
    handles = []
    # A time budget's step count is unknown in advance: the bar counts steps without a total.
    sink.start(label, scenario.budget().max_steps)
    scheduler = _start_scheduler(backend, scenario, out, run_name, seed, sink, timeout)
    try:
        for n in nodes:
            env = {**common, "RANK": str(n.rank), "LOCAL_RANK": str(n.rank),
                   "DISTRO_BENCH_THREADS": str(int(n.hardware.cpus) if n.hardware.cpus else threads),
                   **backend.worker_env(n.rank)}
            handles.append(backend.start_worker(n.rank, argv, env, out / f"rank{n.rank}.log"))
        followers = [_Follower(out / f"rank{n.rank}.jsonl") for n in nodes]
        live = AcrossRanks(sink, len(nodes))  # the summary's step time (slowest rank), not rank 0's
        last_progress = time.monotonic()
        # Start-up (imports, data, connecting) is not a hang: allow it on top of the collective timeout.
        watchdog = options.watchdog_s or timeout + 60.0
        grace = 120.0
        while True:
            for f in followers:
                recs = f.new_records()
                if recs:
                    last_progress = time.monotonic()
                    grace = 0.0
                for r in recs:
                    if r.get("type") == "step":
                        live.step(label, r)
            codes = [h.poll() for h in handles]
            running = [h.rank for h, rc in zip(handles, codes) if rc is None]
            for h, rc in zip(handles, codes):
                if rc not in (None, 0):
                    # A peer's collective timed out because this one stopped: name the stopped rank first.
                    if stopped := _stopped_ranks(out, [r for r in running if r != h.rank], STOPPED_AFTER_S / 3):
                        r = max(stopped, key=stopped.get)
                        raise _stopped_error(run_name, out, nodes, handles, r, stopped[r],
                                             then=f"rank {h.rank} ({nodes[h.rank].name}) exited with code {rc} "
                                                  f"(log: {h.log_path})")
                    raise WorkerFailed(f"{run_name}: worker rank {h.rank} ({nodes[h.rank].name}) exited with code {rc}; "
                                       f"log: {h.log_path}", rank=h.rank, log_tail=_log_tail(h.log_path))
            if scheduler is not None:
                for text in scheduler.take_notes():
                    sink.note(text)
                if scheduler.failure:
                    raise HarnessError(f"{run_name}: {scheduler.failure}; the run stops (a measurement on another "
                                       "network than the scenario's is not one)")
            if all(rc == 0 for rc in codes):
                break
            if stopped := _stopped_ranks(out, running, min(STOPPED_AFTER_S, watchdog)):
                r = max(stopped, key=stopped.get)
                raise _stopped_error(run_name, out, nodes, handles, r, stopped[r])
            if time.monotonic() - last_progress > watchdog + grace:
                suspect, detail = _hang_report(out, nodes, watchdog + grace)
                raise WorkerFailed(f"{run_name}: rank {suspect} ({nodes[suspect].name}) appears hung: {detail}; "
                                   f"log: {handles[suspect].log_path}",
                                   rank=suspect, log_tail=_log_tail(handles[suspect].log_path))
            time.sleep(0.2)
    except WorkerFailed as e:
        cause = scheduler.outage_cause(within_s=timeout + 30.0) if scheduler is not None else None
        if cause is None:
            raise
        raise _outage_error(e, cause, run_name, timeout) from None
    finally:
        if scheduler is not None:
            rows = scheduler.stop()
            if events is not None:
                events.extend(rows)
        for h in handles:
            h.stop()
        for h in handles:
            if h.wait(5.0) is None:
                h.stop(kill=True)
                h.wait(5.0)
        sink.finish(label)


def _start_scheduler(backend: Backend, scenario: Scenario, out: Path, run_name: str, seed: int,
                     sink: ProgressSink, timeout: float):
    """The network-change scheduler of this optimizer/seed run (distro_bench/net/netchange.py), or None when the
    scenario changes nothing."""
    from distro_bench.net.netchange import ChangeScheduler
    from distro_bench.scenario.timeline import compile_timeline

    timeline = compile_timeline(scenario)
    if not timeline:
        return None
    emulation = getattr(backend, "emulation", None)
    if emulation is None and (any(c.kind != "compute" for c in timeline.changes) or timeline.traces):
        sink.note("link schedules, outages and traces need an emulated network (netns or docker backend); "
                  "only compute schedules apply here")
    longest = timeline.longest_outage_s()
    if longest >= timeout:
        sink.note(f"an outage of {longest:.0f}s is longer than the collective timeout ({timeout:.0f}s): "
                  "the run will stop when it blocks a collective that long")
    scheduler = ChangeScheduler(timeline, emulation, out, run_name, seed)
    scheduler.start()
    return scheduler


def finalize(run_dir: Path, scenario: Scenario, backend_name: str, state: str, reason: str | None,
             started: str, events: list[dict] | None = None) -> dict:
    """Write status.json first, then aggregate whatever the workers recorded into metrics.parquet and
    summary.json/csv. A file the disk refuses turns the status to failed with the cause (and the run's own
    failure, if any) and raises RunFolderWriteError saying both."""
    try:
        write_status(run_dir, state, reason)
        if events:
            from distro_bench.results.events import write_events

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


def _write_results(run_dir: Path, scenario: Scenario, backend_name: str, state: str, reason: str | None,
                   started: str) -> dict:
    df, events = metrics.read_worker_records(run_dir / "workers")
    starts = [e for e in events if e.get("type") == "start"]
    probes = [e["probe_allgather_s"] for e in starts if e.get("probe_allgather_s") is not None]
    explicit, how = comparison_target_of(scenario)
    target = metrics.comparison_target(df, explicit, how)
    summary = {
        "schema_version": SCHEMA_VERSION,
        "run": {"scenario": scenario.name, "backend": backend_name, "state": state, "reason": reason,
                "budget": scenario.budget().as_dict(), "seeds": scenario.train.seed_list(),
                "started": started, "finished": datetime.now(UTC).isoformat(timespec="seconds"),
                "world_size": scenario.world_size,
                "corpus_sha256": sorted({e["corpus_sha256"] for e in starts if "corpus_sha256" in e}),
                # mean over ranks and optimizers of the workers' calibration gathers (worker.latency_probe)
                "probe_allgather_s": sum(probes) / len(probes) if probes else None},
        "baseline": scenario.baseline,
        "target": target,
        "optimizers": metrics.summarize(df, events, scenario.baseline, target["val_loss"]) if len(df) else {},
    }
    from distro_bench.results.cost import add_costs

    add_costs(summary, scenario.costs.model_dump(), [str(e.get("device", "")) for e in starts])  # issue 29
    atomic_write_parquet(run_dir / "metrics.parquet", df)
    atomic_write_json(run_dir / "summary.json", summary)
    atomic_write_text(run_dir / "summary.csv", metrics.summary_frame(summary["optimizers"]).to_csv(index=False))
    return summary


def comparison_target_of(scenario: Scenario) -> tuple[float | None, str | None]:
    """The target loss the scenario names for time-to-target, if any (checks.target_val_loss, else a target budget's)."""
    if scenario.checks.target_val_loss is not None:
        return scenario.checks.target_val_loss, "checks.target_val_loss in the scenario"
    if scenario.train.target_val_loss is not None:
        return scenario.train.target_val_loss, "train.target_val_loss in the scenario (the budget)"
    return None, None


def run_scenario(scenario: Scenario, options: RunOptions, sink: ProgressSink | None = None) -> RunResult:
    sink = sink or SilentProgress()
    # Every missing piece (binaries, modules, kernel, root) in one error, before anything is created.
    backend_cls, why = preflight.select_and_check(options.backend, scenario, options.backend_options)
    sink.note(f"backend: {why}")
    plan = backend_cls.preflight(scenario, options.backend_options)  # a capability error stops us before the run folder
    run_dir = new_run_dir(options.out, scenario.name)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    text, follows_traces = dump_for_run(scenario, run_dir)
    atomic_write_text(run_dir / "scenario.yaml", text)
    if follows_traces:  # the scheduler follows the copies the workers' scenario.yaml names, not the originals
        scenario = scenario_from_dict(yaml.safe_load(text), source=str(run_dir / "scenario.yaml"), base_dir=run_dir)
    write_status(run_dir, "running", None)
    env = {**environment.collect(), "backend": backend_cls.name, "backend_reason": why}
    atomic_write_json(run_dir / "environment.json", env)
    state, reason = "failed", None
    failure: HarnessError | None = None
    events: list[dict] = []
    try:
        with _sigterm_as_interrupt():
            with backend_cls(scenario, run_dir, options.backend_options, plan) as backend:
                env["network"] = backend.describe()
                atomic_write_json(run_dir / "environment.json", env)
                measure = scenario.network.measure_links if options.measure_links is None else options.measure_links
                if measure:
                    measure_links(backend, env["network"], sink)
                else:
                    env["network"]["link_measurement"] = {
                        "measured": False, "why": "turned off (--no-measure-links or network.measure_links: false)"}
                atomic_write_json(run_dir / "environment.json", env)
                _write_prediction(run_dir, scenario, env["network"], sink)
                # Seed by seed, every optimizer of a seed in turn: an interrupted run keeps whole comparisons.
                for seed in scenario.train.seed_list():
                    for run_name in scenario.optimizers:
                        _train_one(backend, scenario, run_dir, run_name, sink, options, seed, events)
        state = "complete"
    except KeyboardInterrupt:
        state, reason = "incomplete", "interrupted (Ctrl-C or SIGTERM)"
        raise Interrupted(f"interrupted; partial results kept in {run_dir}") from None
    except HarnessError as e:
        reason, failure = str(e), e
        raise
    except Exception as e:
        reason = f"{type(e).__name__}: {e}"
        raise
    finally:
        try:
            # events: every optimizer's and seed's, also after a failure or interrupt
            summary = finalize(run_dir, scenario, backend_cls.name, state, reason, started, events=events)
        except RunFolderWriteError as e:
            if isinstance(failure, WorkerFailed):  # keep the worker's log tail beside the combined cause
                raise WorkerFailed(str(e), rank=failure.rank, log_tail=failure.log_tail) from None
            raise
        if options.write_report:
            _write_report(run_dir, sink)
    return RunResult(run_dir=run_dir, state=state, summary=Summary.model_validate(summary))


def measure_links(backend: Backend, network: dict, sink: ProgressSink) -> None:
    """Each node's measured goodput up and down and RTT to the far end, into network.nodes[i].measured, and
    how it was measured into network.link_measurement. Never fails the run: an error is recorded instead."""
    from distro_bench.net.linktest import measure_nodes

    probe = backend.link_probe()
    if probe is None:
        network["link_measurement"] = {"measured": False, "why": f"the {backend.name} backend has no link probe"}
        return
    targets, far_ns, far_addr = probe
    sink.note(f"measuring {len(targets)} link(s): goodput up, down and RTT (a few seconds)")
    t0 = time.monotonic()
    try:
        measured = measure_nodes(targets, far_ns, far_addr)
    except Exception as e:  # the run's training does not depend on it
        network["link_measurement"] = {"measured": False, "why": f"{type(e).__name__}: {e}"}
        sink.note(f"link measurement failed: {type(e).__name__}: {e}")
        return
    for node in network.get("nodes") or []:
        if isinstance(node, dict) and node.get("name") in measured:
            node["measured"] = measured[node["name"]]
    network["link_measurement"] = {"measured": True, "took_s": round(time.monotonic() - t0, 2),
                                   "far_end": far_addr}


def _write_prediction(run_dir: Path, scenario: Scenario, network: dict, sink: ProgressSink) -> None:
    """The projection model's figures for this very run, so the report can set them beside the measurement."""
    from distro_bench.train.projection import UNSHAPED_BPS, max_hop_delay, project

    emulated = network.get("network_emulated", False)
    nodes = scenario.nodes()
    if not emulated:  # loopback: the links the scenario names were not there
        nodes = [n.model_copy(update={"link": None}) for n in nodes]
    try:
        projections = project(scenario, nodes=nodes)
    except NotImplementedError as e:  # a strategy without a byte model must not stop a measurement
        sink.note(f"no prediction for this run: {e}")
        return
    atomic_write_json(run_dir / "prediction.json", {
        "network_emulated": emulated, "unshaped_bps": UNSHAPED_BPS,
        "world_size": len(nodes), "max_hop_delay_s": max_hop_delay(nodes),
        "optimizers": {p.optimizer: p.as_dict() for p in projections},
    })


def _write_report(run_dir: Path, sink: ProgressSink) -> None:
    from distro_bench.report import write_run_report

    try:
        write_run_report(run_dir)
    except Exception as e:  # a report failure must not lose the run's data
        sink.note(f"report not written: {type(e).__name__}: {e}")
