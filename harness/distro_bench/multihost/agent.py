"""The per-host agent behind `distro-bench node`: shape this host's interface, run its workers under
torchrun's c10d rendezvous, and (node-rank 0) gather one run folder.

    checks (placement, interface, root, link plan)   -> InputError / CapabilityError before anything changes
    the agents' store (harness/distro_bench/multihost/store.py)   -> node 0 names the run folder, every host heartbeats
    shaping + janitor (hostshaping.py, janitor.py)   -> read back; removed on exit, Ctrl-C, failure, SIGKILL
    host description + measured RTT/goodput           -> environment.json `hosts`
    per seed, per optimizer: barrier -> torchrun -> its records to the run folder (shared path or the store)
    node 0: environment.json, metrics/summary, report; status says which host failed

The run folder's lifecycle (open and claim, the seed x optimizer loop, how it ended, finish) is the single-host
runner's: harness/distro_bench/run/lifecycle.py; what this module adds is the launch (torchrun on every host, in step
through the store) and the hosts' part (shaping, records shipped to node 0).

This module is the agent's sequence; each concern is its own module: endpoints.py (the rendezvous address and
store), runfolder.py (opening or joining the run folder), shapedhost.py (shaping with its janitor), measure.py
(RTT and goodput to the peers), workers.py (torchrun and the workers' launch, train/launch.py's WorkerJob),
handover.py (records to node 0, blaming a lost peer) and finish.py (the last word, node 0's environment.json).

The run folder is the one `distro-bench run` writes (backend "multihost"), so `report` and `check` read it
unchanged. Workers never get NET_ADMIN: torchrun is started without it (harness/distro_bench/net/enter.py).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from distro_bench.backends.base import allocate_worker_uid, choose_worker_user, signal_scope, worker_reads
from distro_bench.errors import CapabilityError, HarnessError, InputError
from distro_bench.multihost import handover, measure, workers
from distro_bench.multihost import iface as iface_mod
from distro_bench.multihost import secret as secret_mod
from distro_bench.multihost.endpoints import bind_address, is_local_host, parse_endpoint, serve_rendezvous
from distro_bench.multihost.finish import BACKEND, Finalizer, say_bye, wait_byes
from distro_bench.multihost.hostshaping import plan_host
from distro_bench.multihost.runfolder import join_from_store, open_on_host0
from distro_bench.multihost.shapedhost import ShapedHost
from distro_bench.multihost.store import WATCH_S, AgentStore, PeerLost
from distro_bench.multihost.stream import HostStream
from distro_bench.net.host import probe
from distro_bench.net.ns import NetnsRef
from distro_bench.run import environment
from distro_bench.run.lifecycle import (
    NoteProgress,
    RunLifecycle,
    choose_dist_backend,
    collective_timeout_s,
    sigterm_as_interrupt,
)
from distro_bench.run.overrides import Overrides, RunSettings
from distro_bench.scenario import environ
from distro_bench.scenario.loading import load_scenario
from distro_bench.scenario.placement import Placement, from_scenario
from distro_bench.scenario.timeouts import Timeouts
from distro_bench.train.launch import WorkerJob, WorkerLaunch, default_threads
from distro_bench.train.liveness import WireCounter


@dataclass
class NodeOptions:
    scenario: Path
    rdzv: str  # HOST:PORT of torchrun's c10d rendezvous (node-rank 0's host)
    node_rank: int
    nnodes: int | None = None
    iface: str | None = None
    i_know: bool = False
    shaping: bool = True
    placement: str | None = None
    store_port: int | None = None
    join_timeout_s: float = 600.0
    ship_records: bool = False  # ship over the store even where --out is shared (tests the no-shared-path case)
    stream: bool = False  # driven over a pipe (the ssh backend): JSON lines out, stop when stdin ends (stream.py)
    secret_file: Path | None = None  # the agents' store secret (multihost/secret.py); else env, else made by node 0
    # What changes in the scenario (optimizers, budget, seeds), and the run settings shared with `distro-bench
    # run`: the agent reads out, allow_unemulated, measure_links (None here: measure RTT and goodput to the
    # peers), collective_timeout_s and write_report; the backend is always this one.
    overrides: Overrides = field(default_factory=Overrides)
    settings: RunSettings = field(default_factory=RunSettings)


@dataclass
class NodeResult:
    node_rank: int
    run_dir: Path  # the run folder (node 0) or this host's local copy
    state: str
    reason: str | None = None
    host: dict = field(default_factory=dict)


class Agent:
    def __init__(self, opts: NodeOptions, note=lambda text: None):
        self.o = opts
        # Driven over a pipe, the notes travel in the stream with everything else (one ordered channel).
        self.stream = HostStream(opts.node_rank) if opts.stream else None
        self.note = self.stream.note if self.stream else note
        self.shaped: ShapedHost | None = None  # this host's shaping and its janitor, once applied
        self.store: AgentStore | None = None
        self.rdzv_store = None  # node 0: torchrun's rendezvous TCPStore, served here on the rendezvous address only
        self.worker_uid: int | None = None  # this run's workers' uid on this host (backends/base.py)
        self.torchrun: subprocess.Popen | None = None
        self.host: dict = {"node_rank": opts.node_rank, "state": "starting"}
        self.run_dir: Path | None = None
        self.shared = False  # the run folder is node 0's own (a shared path), not a local copy
        self.failed_host: dict | None = None

    @property
    def _live_store(self) -> AgentStore:
        """The agents' store: started in run() before any step that talks to the other hosts."""
        assert self.store is not None, "the agents' store starts in run()"
        return self.store

    @property
    def _folder(self) -> Path:
        """The run folder: opened (node 0) or joined in _open_run_folder before any step that writes into it."""
        assert self.run_dir is not None, "the run folder is opened in _open_run_folder()"
        return self.run_dir

    # ---- checks before anything changes ----------------------------------------------------------
    def prepare(self) -> None:
        o = self.o
        self.rdzv_host, self.rdzv_port = parse_endpoint(o.rdzv)
        scenario = o.overrides.apply(load_scenario(o.scenario))
        self.scenario = scenario
        self.life = RunLifecycle(scenario, BACKEND, NoteProgress(self.note), host=o.node_rank)
        self.placement: Placement = from_scenario(scenario, o.nnodes, o.placement)
        if not 0 <= o.node_rank < self.placement.nnodes:
            raise InputError(f"--node-rank: {o.node_rank}; this run has hosts 0..{self.placement.nnodes - 1}")
        nodes = scenario.nodes()
        # Each host's link is shaped once, statically (hostshaping.py); a schedule or trace would be silently
        # ignored, and a trace's path would not resolve in the run folder the workers read.
        changing = sorted({n.link_name for n in nodes if n.link_name is not None and n.link is not None and n.link.changes})
        if changing:
            raise InputError(f"links {', '.join(changing)}: multi-host runs shape each host's link once and do not "
                             "follow a schedule or trace; drop them, or run on one host (--backend netns)")
        self.my_nodes = [nodes[r] for r in self.placement.ranks_of(o.node_rank)]
        wants_shaping = o.shaping and any(n.link is not None and n.link.shaped for n in self.my_nodes)
        self.iface = iface_mod.choose(o.iface, shaping=wants_shaping, i_know=o.i_know)
        self.plan = None
        if wants_shaping:
            if os.geteuid() != 0:
                raise CapabilityError("shaping this host's interface needs root (tc, an ifb device); run the agent "
                                      "as root, or --no-shaping to measure the network as it is")
            caps = probe(docker=False, gpus=False)
            if not caps.rate_shaping:
                raise CapabilityError(f"{caps.qdisc_missing('tbf')}: the links cannot be rate-shaped here")
            allow = o.settings.backend_options(scenario).allow_unemulated
            self.plan = plan_host(self.my_nodes, caps, allow_unemulated=allow, seed=scenario.train.seed)
        if o.node_rank == 0 and not is_local_host(self.rdzv_host):
            raise InputError(f"--rdzv: {self.rdzv_host} is not an address of this host, but node-rank 0 serves the "
                             "rendezvous: start node-rank 0 on the rendezvous host (the first host of the job)")

    # ---- the run ------------------------------------------------------------------------------------
    def run(self) -> NodeResult:
        if self.stream is None:
            return self._run()
        self.stream.start(lambda: str(self.host.get("state")))
        failure: str | None = None
        try:
            return self._run()
        except BaseException as e:  # the launcher hears why, also when the checks stopped us before the run
            failure = str(e) or type(e).__name__
            raise
        finally:
            life = getattr(self, "life", None)
            self.stream.close(life.state if life else "failed", (life.reason if life else None) or failure,
                              self.run_dir)

    def _run(self) -> NodeResult:
        self.prepare()
        o, life = self.o, self.life
        secret, made = secret_mod.resolve(o.secret_file, o.node_rank)
        if made:
            self.note(f"host 0: the agents' store secret for this run (give it to every other host with --secret-file "
                      f"FILE or {secret_mod.ENV}): {secret.decode()}")
        addr = bind_address(self.rdzv_host)
        if o.node_rank == 0:
            self.rdzv_store = serve_rendezvous(addr, self.rdzv_port, o.join_timeout_s)
        self.store = AgentStore(addr, o.store_port or self.rdzv_port + 1, o.node_rank,
                                self.placement.nnodes, o.join_timeout_s, secret, note=self.note)
        self.store.start_heartbeat()
        try:
            with life.guard(on_failure=self._failed):
                self._open_run_folder()
                self._shape()
                self._describe_and_measure()
                self.host["state"] = "running"
                life.train_all(self._train_one)
            self.host["state"] = "complete"
        finally:
            if o.node_rank == 0 and self.run_dir is not None and life.state != "complete":
                life.status_now()  # whatever fails below, the folder no longer says running
            for step in (self._stop_torchrun, self._unshape):
                try:
                    step()
                except Exception as e:
                    self.note(f"host {o.node_rank}: {step.__name__.strip('_')}: {type(e).__name__}: {e}")
            if o.node_rank == 0:
                try:
                    wait_byes(self.store, self.placement.nnodes)
                    if self.run_dir is not None:
                        self._finalize()
                finally:
                    life.release()
            say_bye(self.store, o.node_rank, self.host, life.state)
            self.store.close()
        return NodeResult(o.node_rank, self._folder, life.state, life.reason, self.host)  # the guard raised otherwise

    def _failed(self, e: BaseException) -> None:
        """How this host's part ended, for the other hosts (the store) and environment.json's `failed_host`."""
        life, me = self.life, self.o.node_rank
        if isinstance(e, KeyboardInterrupt):
            self.host["state"] = "interrupted"
        elif isinstance(e, PeerLost):  # another host's failure, not this one's: its message as it is
            life.reason = str(e)
            self.failed_host = {"node_rank": e.node_rank, "kind": e.kind, "message": str(e)}
            self.host["state"] = f"stopped: {life.reason}"
            return
        else:
            self.host["state"] = "failed"
            if isinstance(e, HarnessError):
                self.failed_host = {"node_rank": me, "kind": "failed", "message": life.reason}
        self._live_store.report_failure(life.reason or str(e))  # the guard sets the reason before calling this

    def _open_run_folder(self) -> None:
        """Node 0 opens the run folder and names it in the store; the others write into it where it is shared
        (its token is there), else into a local copy (runfolder.py)."""
        o, st = self.o, self._live_store
        def named(run_dir: Path) -> None:  # known before what can fail after: the status and finish see it
            self.run_dir = run_dir

        if o.node_rank == 0:
            joined = open_on_host0(self.life, o.settings.out, self.placement, st, named)
        else:
            joined = join_from_store(self.life, o.settings.out, self.placement, st, o.ship_records, named)
        self.run_dir, self.shared, self.worker_uid = joined.run_dir, joined.shared, joined.worker_uid
        self.host["records"] = "shared path" if self.shared else "shipped to node-rank 0 over the agents' store"

    def _shape(self) -> None:
        if self.plan is None:
            self.host["shaping"] = None
            return
        iface = self.iface
        assert iface is not None, "a shaping plan means shaping, and iface.choose() names the interface for it"
        self.shaped = ShapedHost(self.plan, iface.name, replace_foreign=self.o.i_know)
        link = self.my_nodes[0].link
        self.host["shaping"] = self.shaped.apply(link.describe() if link else "unshaped")
        self.note(f"host {self.o.node_rank}: shaped {iface.name} ({self.host['shaping']['link_spec']})")

    def _unshape(self) -> None:
        if self.shaped is not None:
            self.shaped.remove(self.host, self.note, self.o.node_rank)
            self.shaped = None

    def _describe_and_measure(self) -> None:
        env = environment.collect()
        self.host.update({"hostname": socket.gethostname(), "kernel": env["kernel"], "platform": env["platform"],
                          "gpus": env["gpus"], "cpu_count": env["cpu_count"], "torch": env["torch"],
                          "python": env["python"], "git_commit": env["git_commit"],
                          "iface": self.iface.as_dict() if self.iface else None,
                          "ranks": list(self.placement.ranks_of(self.o.node_rank)),
                          "nodes": [n.name for n in self.my_nodes]})
        st, me, n = self._live_store, self.o.node_rank, self.placement.nnodes
        measured: dict = {"rtt_s": {}, "goodput_bps": {}}
        if self.o.settings.measure_links is not False and n > 1 and self.iface is not None:
            assert self.iface.ipv4 is not None, "iface.choose() refuses an interface without an IPv4 address"
            measured = measure.measure_peers(st, self.iface.ipv4, me, n)
        self.host["measured"] = measured
        st.set_json(f"host/{me}", self.host)

    # ---- one optimizer on every host ------------------------------------------------------------------
    def _collective_timeout_s(self) -> float:
        # Scaled by this host's load (or DISTRO_BENCH_TIMEOUT_SCALE), as a single-host run's; an explicit option is
        # taken as given.
        return (self.o.settings.collective_timeout_s
                or Timeouts.for_host(collective_timeout_s(self.scenario)).collective_s)

    def _launch(self, run_name: str, seed: int, out: Path) -> WorkerLaunch:
        """torchrun and this host's workers (train/launch.py WorkerJob, as the single-host runner's), started as
        the local and netns backends start theirs where the agent is root."""
        o, k = self.o, len(self.my_nodes)
        if self.iface is not None:
            assert self.iface.ipv4 is not None, "iface.choose() refuses an interface without an IPv4 address"
        torchrun = workers.torchrun_args(
            rdzv_id=f"{self._folder.name}-{run_name}-{seed}"[-60:], rdzv_endpoint=f"{self.rdzv_host}:{self.rdzv_port}",
            join_timeout_s=o.join_timeout_s, nnodes=self.placement.nnodes, node_rank=o.node_rank, nproc=k,
            local_addr=self.iface.ipv4 if self.iface is not None else None)
        job = WorkerJob(self._folder / "scenario.yaml", run_name, out, seed, self._collective_timeout_s(),
                        choose_dist_backend(self.scenario))
        threads = os.environ.get(environ.THREADS, str(default_threads(k, os.cpu_count())))
        launch = job.under_torchrun(torchrun, self.placement.encode(), o.node_rank, threads, workers.pythonpath(),
                                    workers.wire_env(self.iface.name if self.iface else None, k))
        if os.geteuid() != 0:
            return launch
        # No capability, no_new_privs, this run's own uid (or a refusal before training: backends/base.py
        # choose_worker_user).
        if self.worker_uid is None:  # node 0 was not root: this host's own
            self.worker_uid = allocate_worker_uid()
        who = choose_worker_user(out, worker_reads(self.scenario, launch.argv), sys.executable,
                                 {**os.environ, **launch.env}, self.worker_uid, allow_root=o.settings.allow_root_workers)
        self.host.setdefault("workers_user", who.record())
        self.note(f"host {o.node_rank}: workers run as uid {who.user[0] if who.user else 0} with no capabilities "
                  f"({who.why}); signals {signal_scope()}")
        return WorkerLaunch(NetnsRef.current().wrap(launch.argv, no_caps=True, user=who.user, expose=who.expose),
                            launch.env, launch.cwd)

    def _torchrun_argv(self, run_name: str, seed: int, out: Path) -> list[str]:
        return self._launch(run_name, seed, out).argv

    def _train_one(self, run_name: str, seed: int) -> None:
        """The launch of one optimizer and seed (run/lifecycle.py train_all): every host's torchrun, in step."""
        o, st = self.o, self._live_store
        tag = f"{seed}/{run_name}"
        out = self.life.worker_dir(run_name, seed)
        out.mkdir(parents=True, exist_ok=True)
        st.barrier(f"start/{tag}")
        self.note(f"host {o.node_rank}: {run_name} seed {seed}: torchrun with {len(self.my_nodes)} worker(s)")
        log_path = out / f"host{o.node_rank}-torchrun.log"
        wire0 = self._iface_counters()
        self.torchrun = workers.start_torchrun(self._launch(run_name, seed, out), log_path)
        rc = None
        last_watch = time.monotonic()
        if self.stream:
            self.stream.begin(run_name, seed, out, list(self.placement.ranks_of(o.node_rank)),
                              self.scenario.budget().max_steps)
        try:
            while rc is None:
                rc = self.torchrun.poll()
                if self.stream:
                    self.stream.pump()
                if rc is None and time.monotonic() - last_watch >= WATCH_S:
                    st.raise_if_peer_down()
                    last_watch = time.monotonic()
                time.sleep(0.3)
        except PeerLost:
            # A peer is gone: our workers would wait in a collective until its timeout; stop them now.
            self._ship(tag, out, rc="stopped")
            raise
        finally:
            if rc is None:
                self._stop_torchrun()
            if self.stream:
                self.stream.finish(rc)
        self.torchrun = None
        if rc != 0:
            handover.blame_peer(st, o.node_rank)
        wire1 = self._iface_counters()
        if wire0 and wire1:
            self.host.setdefault("iface_bytes", {})[tag] = {"tx": wire1[0] - wire0[0], "rx": wire1[1] - wire0[1]}
        self._ship(tag, out, rc=rc)
        if rc != 0:
            raise workers.torchrun_failed(f"{run_name} seed {seed}", o.node_rank, rc, log_path)
        if o.node_rank == 0:
            handover.gather(st, tag, self.placement.nnodes, self._folder)

    def _iface_counters(self) -> tuple[int, int] | None:
        if self.iface is None:
            return None
        return WireCounter(self.iface.name).read()

    def _ship(self, tag: str, out: Path, rc) -> None:
        handover.ship(self._live_store, tag, out, self._folder, self.o.node_rank, self.shared, rc, self.note)

    def _stop_torchrun(self) -> None:
        workers.stop_torchrun(self.torchrun)
        self.torchrun = None

    # ---- the end ----------------------------------------------------------------------------------------
    def _finalize(self) -> None:
        """Node 0: every host's description, the partial records of the others, summary and report (finish.py)."""
        Finalizer(self.scenario, self.placement, self.life, self._live_store, self._folder, self.note).finalize(
            self.host, self.failed_host, f"{self.rdzv_host}:{self.rdzv_port}", self.o.settings.write_report)


def run_node(opts: NodeOptions, note=lambda text: None) -> NodeResult:
    """One host's part of a multi-host run; SIGTERM takes the Ctrl-C path (shaping removed, records kept)."""
    with sigterm_as_interrupt():
        return Agent(opts, note).run()
