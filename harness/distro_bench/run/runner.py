"""One benchmark run on one host: scenario -> backend -> workers -> metrics -> run folder (and report).

The run folder's lifecycle (open, describe, the seed x optimizer loop, how it ended, finish) is
run/lifecycle.py's, shared with the multi-host agent; this module is the single-host launch: a backend up,
one worker process per scenario node, watched until it finishes, fails, hangs or is interrupted. Workers that
fail, hang or are interrupted are stopped and what they recorded is kept.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from distro_bench.backends.catalog import OPTION_FLAGS, refuse_unread_options
from distro_bench.backends.registry import BACKENDS, Backend, select_backend
from distro_bench.errors import CapabilityError, HarnessError, InputError, WorkerFailed
from distro_bench.net import linktest
from distro_bench.net.netchange import ChangeScheduler
from distro_bench.net.ns import NetnsRef
from distro_bench.results.rundir import load_run
from distro_bench.results.summary import Summary
from distro_bench.run import environment, failure, preflight, remote
from distro_bench.run.launch import log_tail
from distro_bench.run.lifecycle import (
    ProgressSink,
    RunLifecycle,
    SilentProgress,
    choose_dist_backend,
    collective_timeout_s,
    worker_dir,
)
from distro_bench.run.overrides import Overrides, RunSettings
from distro_bench.run.progress import AcrossRanks
from distro_bench.scenario.model import Scenario
from distro_bench.scenario.replay import banner as replay_banner
from distro_bench.scenario.timeline import compile_timeline
from distro_bench.scenario.timeouts import HostLoad, Timeouts
from distro_bench.scenario.units import format_duration
from distro_bench.train.inputs import check_inputs
from distro_bench.train.launch import WorkerJob, default_threads
from distro_bench.train.liveness import Dead, LivenessJudge, heartbeat_age, read_heartbeat
from distro_bench.train.replay import memory_problem as replay_memory_problem

# RunOptions: the name tests and scripts use for the runner's settings (run/overrides.py RunSettings).
RunOptions = RunSettings


@dataclass
class RunResult:
    run_dir: Path
    state: str  # complete | incomplete | failed
    summary: Summary  # summary.json, typed; `summary["optimizers"]` style access still works


def _host_pid(handle) -> Callable[[], int | None]:
    """The worker's pid as this host's /proc shows it, as a function (a container's exec has one only once it
    runs). A host process: its own. A container's (docker): the engine's exec_inspect Pid, trusted only when
    /proc/<pid> here is that worker (a coordinator in another PID namespace sees other processes there)."""
    proc = getattr(handle, "proc", None)
    if proc is not None:
        pid = proc.pid
        return lambda: pid
    api, exec_id = getattr(handle, "api", None), getattr(handle, "exec_id", "")
    if api is None or not exec_id:
        return lambda: None
    found: list[int] = []
    asked = [-math.inf]

    def from_engine() -> int | None:
        if not found:
            if time.monotonic() - asked[0] < 5.0:  # not an engine request per poll while it has no answer
                return None
            asked[0] = time.monotonic()
            try:
                pid = int(api.exec_inspect(exec_id).get("Pid") or 0)
                ours = pid > 0 and b"distro_bench.train.worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
            except Exception:  # the engine or /proc did not answer this time (the SDK's errors are not imported here)
                return None
            if not ours:
                return None
            found.append(pid)
        return found[0]
    return from_engine


def _dead_error(run_name: str, out: Path, nodes, handles, dead: Dead, then: str | None = None) -> WorkerFailed:
    b = read_heartbeat(out / f"rank{dead.rank}.hb")
    where = f"at step {b[0]}, {b[1]}" if b else "before its first step"
    msg = (f"{run_name}: rank {dead.rank} ({nodes[dead.rank].name}) stopped responding ({where}): it {dead.why}")
    if then:
        msg += f"; then {then}"
    return WorkerFailed(msg + f"; log: {handles[dead.rank].log_path}", rank=dead.rank,
                        log_tail=log_tail(handles[dead.rank].log_path))


def _exited_error(run_name: str, nodes, exited: list) -> WorkerFailed:
    """Workers that exited non-zero, the likely origin first: one killed by a signal, then one whose error is
    its own rather than a peer's connection closing under it (a consequence: the peer had gone); each with
    the error its log ends on, so the console says why without opening the logs."""
    causes = {h.rank: failure.cause(log_tail(h.log_path, 80)) for h, _ in exited}
    ordered = sorted(exited, key=lambda e: (0 if e[1] < 0 else 1, 1 if failure.peer_gone(causes[e[0].rank]) else 0,
                                            e[0].rank))

    def one(h, rc) -> str:
        said = f" ({causes[h.rank]})" if causes[h.rank] else ""
        return f"worker rank {h.rank} ({nodes[h.rank].name}) exited with code {rc}{said}; log: {h.log_path}"
    h, _ = ordered[0]
    msg = f"{run_name}: " + "; then ".join(one(o, rc) for o, rc in ordered)
    return WorkerFailed(msg, rank=h.rank, log_tail=log_tail(h.log_path))


def _hang_report(out: Path, nodes, stall_s: float) -> tuple[int, str]:
    """(suspect rank, message) from the heartbeats: a rank whose heartbeat stopped (a stopped process) first,
    then one not blocked in a collective."""
    beats = {n.rank: read_heartbeat(out / f"rank{n.rank}.hb") for n in nodes}
    ages = {r: heartbeat_age(out / f"rank{r}.hb") for r in beats}

    def key(r):
        b, age = beats[r], ages[r]
        stopped = age is not None and age > min(Timeouts.UNRESPONSIVE_S, stall_s)
        blocked = b is not None and b[1] in ("communicate", "decide")  # waiting in a collective for a peer
        return (0 if stopped else 1, 0 if b is None else 1, 1 if blocked else 0, b[0] if b else -1,
                b[2] if b else 0.0)
    suspect = min(beats, key=key)
    where = ", ".join(f"rank {r}: " + (f"step {b[0]} {b[1]}" if b else "not started") for r, b in beats.items())
    return suspect, f"no progress for {stall_s:.0f}s ({where})"


def _outage_error(e: WorkerFailed, cause: dict, run_name: str, timeout: float) -> WorkerFailed:
    """A worker that failed during (or just after) an outage: name the link and the time."""
    return WorkerFailed(
        f"{run_name}: link {cause['link']!r} of {' and '.join(cause['nodes'])} went down at "
        f"{cause['start_s']:.1f}s for "
        f"{format_duration(cause['duration_s'])} and the workers did not survive it (a collective may block "
        f"{timeout:.0f}s: a longer outage ends the run); metrics up to then are kept. Worker: {e}",
        rank=e.rank, log_tail=e.log_tail)


def _train_one(backend: Backend, scenario: Scenario, run_dir: Path, run_name: str, sink: ProgressSink,
               options: RunSettings, seed: int | None = None, events: list[dict] | None = None) -> None:
    nodes = scenario.nodes()
    seeds = scenario.train.seed_list()
    seed = seeds[0] if seed is None else seed
    out = worker_dir(run_dir, run_name, seed, len(seeds))
    label = f"{run_name} seed {seed}" if len(seeds) > 1 else run_name
    out.mkdir(parents=True, exist_ok=True)
    # Every wait scaled by the host's load (or DISTRO_BENCH_TIMEOUT_SCALE); an explicit option is taken as given.
    timeouts = Timeouts.for_host(collective_timeout_s(scenario))
    timeout = options.collective_timeout_s or timeouts.collective_s
    threads = default_threads(len(nodes), os.cpu_count())
    job = WorkerJob(run_dir / "scenario.yaml", run_name, out, seed, timeout, choose_dist_backend(scenario))
    master_addr, master_port = backend.master_addr(), backend.master_port()
    handles = []
    # A time budget's step count is unknown in advance: the bar counts steps without a total.
    sink.start(label, scenario.budget().max_steps)
    scheduler = _start_scheduler(backend, scenario, out, run_name, seed, sink, timeout)
    try:
        for n in nodes:
            launch = job.for_rank(backend.python(), n.rank, len(nodes), master_addr, master_port,
                                  int(n.hardware.cpus) if n.hardware.cpus else threads, backend.worker_env(n.rank))
            handles.append(backend.start_worker(n.rank, launch.argv, launch.env, out / f"rank{n.rank}.log"))
        judge = LivenessJudge(timeouts)
        for h in handles:
            judge.watch(h.rank, _host_pid(h), backend.heartbeat(out, h.rank))
        followers = [backend.records(out, n.rank) for n in nodes]
        live = AcrossRanks(sink, len(nodes))  # the summary's step time (slowest rank), not rank 0's
        last_progress = time.monotonic()
        # Start-up (imports, data, connecting) is not a hang: allow it on top of the collective timeout.
        watchdog = options.watchdog_s or timeout + 60.0 * timeouts.scale
        grace = timeouts.startup_grace_s
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
            exited = [(h, rc) for h, rc in zip(handles, codes) if rc not in (None, 0)]
            if exited:
                h, rc = exited[0]
                # A peer's collective timed out because this one stopped: name the stopped rank first.
                peers = [r for r in running if r != h.rank]
                dead = judge.dead(peers)
                if dead is None and (stopped := judge.stopped_now(peers)) is not None:
                    dead = Dead(rank=stopped, why="is stopped (its process is in state T, e.g. SIGSTOP)")
                if dead is not None:
                    raise _dead_error(run_name, out, nodes, handles, dead,
                                      then=f"rank {h.rank} ({nodes[h.rank].name}) exited with code {rc} "
                                           f"(log: {h.log_path})")
                raise _exited_error(run_name, nodes, exited)
            if scheduler is not None:
                for text in scheduler.take_notes():
                    sink.note(text)
                if scheduler.failure:
                    raise HarnessError(f"{run_name}: {scheduler.failure}; the run stops (a measurement on another "
                                       "network than the scenario's is not one)")
            if all(rc == 0 for rc in codes):
                break
            if dead := judge.dead(running):  # stopped or frozen, on evidence; a slow rank is not dead
                raise _dead_error(run_name, out, nodes, handles, dead)
            if time.monotonic() - last_progress > watchdog + grace:
                suspect, detail = _hang_report(out, nodes, watchdog + grace)
                raise WorkerFailed(f"{run_name}: rank {suspect} ({nodes[suspect].name}) appears hung: {detail} "
                                   f"({timeouts.load.describe()} at the start, "
                                   f"{HostLoad.now().describe().removeprefix('host ')} now); "
                                   f"log: {handles[suspect].log_path}",
                                   rank=suspect, log_tail=log_tail(handles[suspect].log_path))
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
    """The network-change scheduler of this optimizer/seed run (harness/distro_bench/net/netchange.py), or None when the
    scenario changes nothing."""
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


def run_scenario(scenario: Scenario, options: RunSettings, sink: ProgressSink | None = None, *,
                 overrides: Overrides | None = None) -> RunResult:
    """Train every optimizer of `scenario` (with `overrides` applied: the optimizers subset, budget, seeds) into a
    new run folder under `options.out`, run as `options` say (backend, link emulation, limits)."""
    sink = sink or SilentProgress()
    # An option the chosen backend would ignore is a mistake to say, not to drop (harness/distro_bench/backends/catalog.py).
    refuse_unread_options(options.backend, {o: getattr(options, o) for o in OPTION_FLAGS})
    if overrides is not None:
        scenario = overrides.apply(scenario)
    if options.inventory is not None and options.backend == "auto":
        raise InputError("--inventory: it lists the hosts of --backend ssh, which auto never picks (it needs your "
                         "hosts); add --backend ssh")
    # The backend names its launcher (workers started one by one here, or an agent per host): not decided here.
    return LAUNCHERS[BACKENDS.get(options.backend, Backend).launcher](scenario, options, sink, overrides)


def _launch_agents(scenario: Scenario, options: RunSettings, sink: ProgressSink,
                   overrides: Overrides | None) -> RunResult:
    """A `distro-bench node` agent per host over ssh (run/remote.py), each starting its workers from the same
    WorkerJob (train/launch.py) as _train_one does."""
    # Each host's agent checks its own host (root, tc, its interface) and owns the run folder (node 0's).
    done = remote.run_over_ssh(scenario, options, sink, probe=lambda: select_backend(options.backend, scenario)[1])
    return RunResult(run_dir=done.run_dir, state=done.state,
                     summary=Summary.model_validate(load_run(done.run_dir).summary))


def _launch_workers(scenario: Scenario, options: RunSettings, sink: ProgressSink,
                    overrides: Overrides | None) -> RunResult:
    """This host's backend up, and one worker per scenario node through it (_train_one), every optimizer and seed."""
    backend_options = options.backend_options(scenario)
    if scenario.replay is not None:  # the first line a replay prints says what it is, and how much of it
        sink.note(replay_banner({name: scenario.replay.fraction_of(name) for name in scenario.optimizers}))
    # Every missing piece (binaries, modules, kernel, root) in one error, before anything is created.
    backend_cls, why = preflight.select_and_check(options.backend, scenario, backend_options)
    sink.note(f"backend: {why}")
    if problem := replay_memory_problem(scenario):  # before any namespace or folder: nothing to undo
        raise CapabilityError(problem)
    check_inputs(scenario, scenario.name, training=True)  # the model's factory and output, an hf: dataset's cache: exit 2 now
    plan = backend_cls.preflight(scenario, backend_options)  # a capability error stops us before the run folder
    life = RunLifecycle(scenario, backend_cls.name, sink)
    run_dir = life.open(options.out)
    scenario = life.scenario  # a scenario that follows traces: the run folder's copies
    # environment.json: written once with the host's facts (a backend that fails to start leaves them), then
    # once more when the network is up, with what it is and what was measured (also when measuring is cut short).
    env = {**environment.collect(), "backend": backend_cls.name, "backend_reason": why}
    if overrides is not None and overrides.changes_scenario():  # issue 52: what the command line changed
        env["overrides"] = overrides.record()
    life.write_environment(env)
    try:
        with life.guard(), backend_cls(scenario, run_dir, backend_options, plan) as backend:
            env["network"] = backend.describe()
            try:
                if options.measure(scenario):
                    measure_links(backend, env["network"], sink)
                else:
                    env["network"]["link_measurement"] = {
                        "measured": False, "why": "turned off (--no-measure-links or network.measure_links: false)"}
            finally:
                life.write_environment(env)
            life.write_prediction(env["network"])
            # _train_one looked up at each call: tests replace it
            try:
                life.train_all(lambda name, seed: _train_one(backend, scenario, run_dir, name, sink, options, seed,
                                                             life.events))
            finally:  # who the workers ran as (backends/base.py), uid 0 accepted by --allow-root-workers included
                if backend.workers_user() is not None:
                    env["workers_user"] = backend.workers_user()
                    life.write_environment(env)
    finally:
        # events: every optimizer's and seed's, also after a failure or interrupt
        summary = life.finish(write_report=options.write_report)
    return RunResult(run_dir=run_dir, state=life.state, summary=Summary.model_validate(summary))


# A backend's `launcher` (backends/base.py) -> how its run is launched.
LAUNCHERS: dict[str, Callable[[Scenario, RunSettings, ProgressSink, Overrides | None], RunResult]] = {
    "workers": _launch_workers, "agents": _launch_agents}


def measure_links(backend: Backend, network: dict, sink: ProgressSink) -> None:
    """Each node's measured goodput up and down and RTT to the far end, into network.nodes[i].measured, and
    how it was measured into network.link_measurement. Never fails the run: an error is recorded instead."""
    probe = backend.link_probe()
    if probe is None:
        network["link_measurement"] = {"measured": False, "why": f"the {backend.name} backend has no link probe"}
        return
    targets, far_end, far_addr = probe
    # Backend.link_probe types the far end loosely (object); the one backend with a probe gives a NetnsRef.
    far_ns = cast(NetnsRef, far_end)
    sink.note(f"measuring {len(targets)} link(s): goodput up, down and RTT (a few seconds)")
    t0 = time.monotonic()
    try:
        measured = linktest.measure_nodes(targets, far_ns, far_addr)
    except Exception as e:  # the run's training does not depend on it
        network["link_measurement"] = {"measured": False, "why": f"{type(e).__name__}: {e}"}
        sink.note(f"link measurement failed: {type(e).__name__}: {e}")
        return
    for node in network.get("nodes") or []:
        if isinstance(node, dict) and node.get("name") in measured:
            node["measured"] = measured[node["name"]]
    network["link_measurement"] = {"measured": True, "took_s": round(time.monotonic() - t0, 2),
                                   "far_end": far_addr}
