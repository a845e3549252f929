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

The run folder is the one `distro-bench run` writes (backend "multihost"), so `report` and `check` read it
unchanged. Workers never get NET_ADMIN: torchrun is started without it (harness/distro_bench/net/enter.py).
"""

from __future__ import annotations

import hashlib
import os
import pwd
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from distro_bench import paths
from distro_bench.backends.base import (
    DYNAMIC_UIDS,
    allocate_worker_uid,
    choose_worker_user,
    signal_scope,
    worker_reads,
)
from distro_bench.errors import CapabilityError, HarnessError, InputError, WorkerFailed
from distro_bench.multihost import iface as iface_mod
from distro_bench.multihost import measure
from distro_bench.multihost import secret as secret_mod
from distro_bench.multihost.hostshaping import HostShaping, plan_host
from distro_bench.multihost.store import LOST_AFTER_S, WATCH_S, AgentStore, PeerLost
from distro_bench.multihost.stream import HostStream
from distro_bench.net.emulation import worker_env
from distro_bench.net.host import probe
from distro_bench.net.ns import NetnsRef
from distro_bench.results import runfiles
from distro_bench.results.rundir import atomic_write_text
from distro_bench.run import environment
from distro_bench.run.failure import cause, without_cpp_frames
from distro_bench.run.launch import term_with_parent
from distro_bench.run.lifecycle import (
    NoteProgress,
    RunLifecycle,
    choose_dist_backend,
    collective_timeout_s,
    sigterm_as_interrupt,
)
from distro_bench.run.overrides import Overrides, RunSettings
from distro_bench.scenario.loading import load_scenario
from distro_bench.scenario.placement import ENV_NODE_RANK, ENV_PLACEMENT, Placement, from_scenario
from distro_bench.scenario.timeouts import Timeouts
from distro_bench.train.liveness import WireCounter

BACKEND = "multihost"
TOKEN_FILE = ".multihost-token"


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


def parse_endpoint(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--rdzv: {text!r} is not HOST:PORT (e.g. --rdzv 10.0.0.1:29400)")
    return host.strip("[]"), int(port)


def bind_address(host: str) -> str:
    """The address HOST names (its first IPv4 one, else IPv6): what node-rank 0's stores listen on, alone."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as e:
        raise InputError(f"--rdzv: {host!r} does not resolve ({e.strerror})") from None
    infos.sort(key=lambda ai: ai[0] != socket.AF_INET)
    return str(infos[0][4][0])


def safe_run_name(name: object) -> str:
    """A run folder's name from the agents' store, as a plain name under --out: no separator, no `.`/`..`, no
    control character, at most 255 bytes. Local to multihost until results/ has one safe join for every name."""
    if (not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name
            or any(not c.isprintable() for c in name) or len(name.encode()) > 255):
        raise HarnessError(f"the agents' store names the run folder {str(name)[:200]!r}: not a plain folder name "
                           "(a separator, '..', or a control character); refused")
    return name


def _local_addresses() -> set[str]:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return {a.get_attr("IFA_LOCAL") or a.get_attr("IFA_ADDRESS") for a in ipr.get_addr()} - {None}


def is_local_host(host: str) -> bool:
    """Whether HOST names this machine (an address of one of its interfaces, or loopback)."""
    try:
        addrs = {str(ai[4][0]) for ai in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except socket.gaierror:
        return False
    return any(a.startswith("127.") or a == "::1" for a in addrs) or bool(addrs & _local_addresses())


def _pythonpath() -> str:
    """This harness first, so the janitor and workers import the agent's own code."""
    return os.pathsep.join([str(paths.IMPORT_ROOT)]
                           + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])


class Agent:
    def __init__(self, opts: NodeOptions, note=lambda text: None):
        self.o = opts
        # Driven over a pipe, the notes travel in the stream with everything else (one ordered channel).
        self.stream = HostStream(opts.node_rank) if opts.stream else None
        self.note = self.stream.note if self.stream else note
        self.shaping: HostShaping | None = None
        self.janitor: subprocess.Popen | None = None
        self.store: AgentStore | None = None
        self.rdzv_store = None  # node 0: torchrun's rendezvous TCPStore, served here on the rendezvous address only
        self.worker_uid: int | None = None  # this run's workers' uid on this host (backends/base.py)
        self.torchrun: subprocess.Popen | None = None
        self.host: dict = {"node_rank": opts.node_rank, "state": "starting"}
        self.run_dir: Path | None = None
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
            self.rdzv_store = _serve_rendezvous(addr, self.rdzv_port, o.join_timeout_s)
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
                    self._wait_byes()
                    if self.run_dir is not None:
                        self._finalize()
                finally:
                    life.release()
            self._say_bye(life.state)
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
        """Node 0 opens the run folder (run/lifecycle.py: claimed, scenario.yaml, status "running") and names it
        in the store; the others write into it where it is shared (its token is there), else into a local copy."""
        o, st = self.o, self._live_store
        if o.node_rank == 0:
            self.run_dir = run_dir = self.life.open(o.settings.out)
            token = secrets.token_hex(8)
            atomic_write_text(run_dir / TOKEN_FILE, token)
            text = (run_dir / "scenario.yaml").read_text()
            # One uid for the run's workers on every host: on a shared path they write into the same folders.
            self.worker_uid = allocate_worker_uid() if os.geteuid() == 0 else None
            st.set_json("run", {"name": run_dir.name, "path": str(run_dir.resolve()), "token": token,
                                "scenario": text, "scenario_sha256": hashlib.sha256(text.encode()).hexdigest(),
                                "placement": self.placement.encode(), "worker_uid": self.worker_uid})
            self.shared = True
        else:
            st.wait_keys(["run"], "node-rank 0 to open the run folder")
            run = _checked_run(st.get_json("run"))
            self.worker_uid = _checked_worker_uid(run.get("worker_uid")) if os.geteuid() == 0 else None
            if run["placement"] != self.placement.encode():
                raise InputError(f"placement differs from node-rank 0's ({run['placement']} there, "
                                 f"{self.placement.encode()} here): give every agent the same scenario and flags")
            # The run folder on a shared path (NFS, a bind mount) holds node 0's token: write straight into it.
            # Only ever below this host's own --out: node 0's path counts as shared when it is --out/<name> here.
            out = o.settings.out.resolve()
            same_path = Path(run["path"]) == out / run["name"]
            try:
                self.shared = (not o.ship_records and same_path
                               and runfiles.read_bytes(out, Path(run["name"], TOKEN_FILE), "status.json",
                                                       head=256).decode(errors="replace") == run["token"])
            except (OSError, HarnessError):
                self.shared = False
            self.run_dir = run_dir = out / run["name"]
            if not self.shared:
                runfiles.write_bytes(out, Path(run["name"], "scenario.yaml"), run["scenario"].encode())
            # What the workers load is what node 0 validated and hashed: read back, hashed, and validated here too.
            got = runfiles.read_text(out, Path(run["name"], "scenario.yaml"))
            if hashlib.sha256(got.encode()).hexdigest() != run["scenario_sha256"]:
                raise HarnessError(f"{run_dir / 'scenario.yaml'} differs from the scenario node-rank 0 validated "
                                   "(sha256 mismatch); refused")
            try:
                load_scenario(run_dir / "scenario.yaml")
            except InputError as e:
                raise HarnessError(f"the scenario from node-rank 0 does not validate here: {e}") from None
            self.life.join(run_dir)
        self.host["records"] = "shared path" if self.shared else "shipped to node-rank 0 over the agents' store"

    def _shape(self) -> None:
        if self.plan is None:
            self.host["shaping"] = None
            return
        iface = self.iface
        assert iface is not None, "a shaping plan means shaping, and iface.choose() names the interface for it"
        self.shaping = shaping = HostShaping(self.plan, iface.name, replace_foreign=self.o.i_know)
        # The janitor first: whatever happens from here on, the shaping does not outlive this process.
        self.janitor = subprocess.Popen(
            [sys.executable, "-m", "distro_bench.multihost.janitor", "--pid", str(os.getpid()), "--iface", iface.name,
             "--ifb", shaping.ifb, "--root"], start_new_session=True, stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": _pythonpath()})
        applied = shaping.apply()
        self.host["shaping"] = {"iface": iface.name, "link": self.plan.nodes[0].link_name,
                                "link_spec": self.my_nodes[0].link.describe() if self.my_nodes[0].link else "unshaped",
                                "engine": self.plan.engine, "not_emulated": self.plan.not_emulated,
                                "applied": applied, "read_back_problems": shaping.verify()}
        self.note(f"host {self.o.node_rank}: shaped {iface.name} ({self.host['shaping']['link_spec']})")

    def _unshape(self) -> None:
        problems: list[str] = []
        if self.janitor is not None:
            self.janitor.terminate()  # we clean up ourselves; it must not race a later agent's shaping
            try:
                self.janitor.wait(5)
            except subprocess.TimeoutExpired:
                self.janitor.kill()
        if self.shaping is not None:
            problems = self.shaping.remove()
            self.host["shaping_removed"] = not problems
            if problems:
                self.host["shaping_removal_problems"] = problems
                self.note(f"host {self.o.node_rank}: shaping removal problems: {'; '.join(problems)}")
            self.shaping = None

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
            with measure.Probes(self.iface.ipv4) as probes:
                st.set_json(f"probe/{me}", probes.endpoint())
                st.wait_keys([f"probe/{i}" for i in range(n)], "every host's probe listeners")
                peers = {i: st.get_record(f"probe/{i}", {"addr": str, "rtt_port": int, "sink_port": int})
                         for i in range(n) if i != me}
                st.barrier("rtt")
                for i, p in peers.items():
                    measured["rtt_s"][str(i)] = measure.rtt_to(p["addr"], p["rtt_port"])
                st.barrier("goodput")
                nxt = (me + 1) % n
                measured["goodput_bps"][str(nxt)] = measure.goodput_to(peers[nxt]["addr"], peers[nxt]["sink_port"])
                st.barrier("measured")
        self.host["measured"] = measured
        st.set_json(f"host/{me}", self.host)

    # ---- one optimizer on every host ------------------------------------------------------------------
    def _torchrun_argv(self, run_name: str, seed: int, out: Path) -> list[str]:
        o = self.o
        rdzv_id = f"{self._folder.name}-{run_name}-{seed}"[-60:]
        argv = [sys.executable, "-m", "distro_bench.multihost.torchrun", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"{self.rdzv_host}:{self.rdzv_port}", "--rdzv-id", rdzv_id,
                # keep_alive_interval: each keep-alive rewrites the rendezvous state (~1 KB) over the shaped link,
                # every 5 s by default; with no restarts it only matters for a re-rendezvous that never comes.
                # is_host=false everywhere: node 0's agent serves the rendezvous store itself, on the rendezvous
                # address alone (_serve_rendezvous); torchrun would listen on every address.
                "--rdzv-conf", f"is_host=false,join_timeout={int(o.join_timeout_s)},keep_alive_interval=30",
                "--nnodes", str(self.placement.nnodes), "--node-rank", str(o.node_rank),
                "--nproc-per-node", str(len(self.my_nodes)), "--max-restarts", "0",
                # torchrun asks the rendezvous store whether nodes wait to join at every monitor interval: a
                # round trip over the shaped link (0.1 s by default), counted in the wire bytes. 5 s is plenty.
                "--monitor-interval", "5"]
        if self.iface is not None:
            assert self.iface.ipv4 is not None, "iface.choose() refuses an interface without an IPv4 address"
            argv += ["--local-addr", self.iface.ipv4]  # the hostname may resolve to loopback or another network
        argv += ["-m", "distro_bench.train.worker", "--scenario", str(self._folder / "scenario.yaml"), "--optimizer", run_name,
                 "--out", str(out), "--seed", str(seed)]
        if os.geteuid() == 0:
            # As the local and netns backends start theirs: no capability, no_new_privs, this run's own uid (or a
            # refusal before training: backends/base.py choose_worker_user).
            if self.worker_uid is None:  # node 0 was not root: this host's own
                self.worker_uid = allocate_worker_uid()
            who = choose_worker_user(out, worker_reads(self.scenario, argv), sys.executable,
                                     {**os.environ, **self._worker_env()}, self.worker_uid,
                                     allow_root=o.settings.allow_root_workers)
            self.host.setdefault("workers_user", who.record())
            self.note(f"host {o.node_rank}: workers run as uid {who.user[0] if who.user else 0} with no capabilities "
                      f"({who.why}); signals {signal_scope()}")
            argv = NetnsRef.current().wrap(argv, no_caps=True, user=who.user, expose=who.expose)
        return argv

    def _worker_env(self) -> dict[str, str]:
        o, k = self.o, len(self.my_nodes)
        # Scaled by this host's load (or DISTRO_BENCH_TIMEOUT_SCALE), as a single-host run's; an explicit option is taken as given.
        timeout = o.settings.collective_timeout_s or Timeouts.for_host(collective_timeout_s(self.scenario)).collective_s
        env = {ENV_PLACEMENT: self.placement.encode(), ENV_NODE_RANK: str(o.node_rank),
               "DISTRO_BENCH_TIMEOUT_S": f"{timeout:.0f}", "DISTRO_BENCH_DIST_BACKEND": choose_dist_backend(self.scenario),
               "DISTRO_BENCH_THREADS": os.environ.get("DISTRO_BENCH_THREADS", str(max(1, (os.cpu_count() or 1) // k))),
               "PYTHONUNBUFFERED": "1", "PYTHONPATH": _pythonpath()}
        if self.iface is not None:
            env.update(worker_env(self.iface.name))
            if k > 1:
                # One interface, several workers: its counters are the host's, not a worker's; wire bytes
                # per worker are then not measurable (null), never a guessed share.
                env.pop("DISTRO_BENCH_WIRE_IFACE")
        return env

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
        with open(log_path, "ab") as log:
            self.torchrun = subprocess.Popen(self._torchrun_argv(run_name, seed, out), env={**os.environ,
                                             **self._worker_env()}, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True,
                                             preexec_fn=term_with_parent)  # noqa: PLW1509 (one prctl call, no locks)
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
            self._blame_peer()
        wire1 = self._iface_counters()
        if wire0 and wire1:
            self.host.setdefault("iface_bytes", {})[tag] = {"tx": wire1[0] - wire0[0], "rx": wire1[1] - wire0[1]}
        self._ship(tag, out, rc=rc)
        if rc != 0:
            raise _torchrun_failed(f"{run_name} seed {seed}", o.node_rank, rc, log_path)
        if o.node_rank == 0:
            self._gather(tag, out)

    def _blame_peer(self) -> None:
        """Our workers failed: when a peer host died, that is the cause (its workers' sockets closing is what
        failed ours). Wait long enough for its heartbeat to go stale (node 0 decides); PeerLost if it did."""
        # Node 0 decides within LOST_AFTER_S + 2 WATCH_S; the others wait longer, so that they hear its
        # verdict (a peer's failure) instead of giving up first with their own workers' consequent errors.
        deadline = time.monotonic() + LOST_AFTER_S + (2 if self.o.node_rank == 0 else 4) * WATCH_S
        while time.monotonic() < deadline:
            if self.o.node_rank == 0:
                lost = {i: v for i, v in self._live_store.peer_status().items() if v[0] == "lost"}
                if lost:
                    i, (kind, msg) = sorted(lost.items())[0]
                    self._live_store.abort(i, kind, msg)
            a = self._live_store.aborted()
            if a and a["node_rank"] != self.o.node_rank:
                raise PeerLost(f"host {a['node_rank']} (node-rank {a['node_rank']}) {a['kind']}: {a['message']}",
                               node_rank=a["node_rank"], kind=a["kind"])
            time.sleep(1.0 if self.o.node_rank == 0 else WATCH_S)

    def _iface_counters(self) -> tuple[int, int] | None:
        if self.iface is None:
            return None
        return WireCounter(self.iface.name).read()

    def _ship(self, tag: str, out: Path, rc) -> None:
        """This host's records of one optimizer: written in place on a shared path, else over the store."""
        st, me = self._live_store, self.o.node_rank
        try:
            if me != 0 and not self.shared:
                files = sorted(p.relative_to(self._folder) for p in out.iterdir()
                               if p.is_file() and p.suffix in (".jsonl", ".log"))
                st.put_files(tag, self._folder, files)
            st.set_json(f"done/{tag}/{me}", {"rc": rc})
        except Exception as e:  # the store is gone (node 0 ended): nothing more to hand over
            self.note(f"host {me}: could not hand over the records of {tag}: {e}")

    def _gather(self, tag: str, out: Path) -> None:
        st = self._live_store
        keys = [f"done/{tag}/{i}" for i in range(1, self.placement.nnodes)]
        st.wait_keys(keys, f"every host's records of {tag}")
        for i in range(1, self.placement.nnodes):
            if not self.shared_of(i):
                st.take_files(tag, i, self._folder)

    def shared_of(self, i: int) -> bool:
        st = self._live_store
        host = st.get_record(f"host/{i}") if st.has(f"host/{i}") else {}
        return host.get("records") == "shared path"

    def _stop_torchrun(self) -> None:
        p = self.torchrun
        if p is None or p.poll() is not None:
            self.torchrun = None
            return
        try:
            os.killpg(p.pid, signal.SIGTERM)  # torchrun stops its workers on SIGTERM
            p.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)
        except ProcessLookupError:
            pass
        self.torchrun = None

    # ---- the end ----------------------------------------------------------------------------------------
    def _say_bye(self, state: str) -> None:
        st = self._live_store
        try:
            st.set_json(f"host/{self.o.node_rank}", self.host)
            st.store.set(f"bye/{self.o.node_rank}", state)
        except Exception:
            pass  # node 0 (the store) is gone
        st.stop_heartbeat()

    def _wait_byes(self, timeout_s: float = 30.0) -> None:
        """Node 0, before writing the folder: the others' last word (their final state, shaping removed)."""
        st, deadline = self._live_store, time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            down = st.peer_status()
            if all(st.has(f"bye/{i}") or i in down for i in range(1, self.placement.nnodes)):
                return
            time.sleep(0.2)

    def _finalize(self) -> None:
        """Node 0: every host's description, the partial records of the others, summary and report."""
        life = self.life
        st, n = self._live_store, self.placement.nnodes
        hosts = []
        down: dict[int, tuple[str, str]] = {}
        try:
            down = st.peer_status()
        except Exception:
            pass
        for i in range(n):
            if i == 0:
                hosts.append(self.host)
                continue
            try:
                h = self._peer_host(i, st.get_record(f"host/{i}")) if st.has(f"host/{i}") else {
                    "node_rank": i, "state": "unknown"}
                if i in down:
                    h["state"] = down[i][0]
                    h["failure"] = down[i][1]
            except Exception as e:
                h = {"node_rank": i, "state": "unknown", "failure": str(e)}
            hosts.append(h)
        if life.state != "complete":
            # Records the others handed over before the failure.
            for key_tag in (f"{seed}/{name}" for seed, name in life.runs()):
                for i in range(1, n):
                    try:
                        if st.has(f"files/{key_tag}/{i}") and not self.shared_of(i):
                            st.take_files(key_tag, i, self._folder)
                    except Exception:
                        pass
        failed = self.failed_host or next(({"node_rank": h["node_rank"], "kind": h["state"], "message": h.get("failure")}
                                           for h in hosts if h.get("state") in ("lost", "failed")), None)
        env = {**environment.collect(), "backend": BACKEND,
               "backend_reason": f"{n} hosts, torchrun c10d rendezvous at {self.rdzv_host}:{self.rdzv_port}",
               "network": self._network(hosts), "hosts": hosts, "placement": self.placement.encode(),
               "failed_host": failed}
        life.write_environment(env)
        if failed and life.reason and f"host {failed['node_rank']}" not in life.reason:
            life.reason = f"host {failed['node_rank']} {failed['kind']}: {failed.get('message')}; here: {life.reason}"
        try:
            life.write_prediction(env["network"])
        except Exception as e:  # the run's records matter more than the model's figures
            self.note(f"host 0: no prediction for this run: {type(e).__name__}: {e}")
        (self._folder / TOKEN_FILE).unlink(missing_ok=True)  # the others are done with the folder
        life.finish(write_report=self.o.settings.write_report)

    def _peer_host(self, i: int, h: dict) -> dict:
        """Host i's description as it sent it, with what node 0 knows itself (its rank, its scenario ranks and
        nodes: the placement's) put in place, and each part node 0 reads of the type it reads it as."""
        h = {**h, "node_rank": i, "ranks": list(self.placement.ranks_of(i)),
             "nodes": [n.name for n in self.scenario.nodes() if n.rank in self.placement.ranks_of(i)]}
        for key in ("shaping", "iface", "measured"):
            if h.get(key) is not None and not isinstance(h[key], dict):
                h[key] = None
        if isinstance(h.get("shaping"), dict):
            shaping = h["shaping"]
            if not isinstance(shaping.get("not_emulated", []), list) or not all(
                    isinstance(x, str) for x in shaping.get("not_emulated", [])):
                shaping["not_emulated"] = ["(host sent a malformed list)"]
            if shaping.get("applied") is not None and not isinstance(shaping["applied"], dict):
                shaping["applied"] = None
        if not isinstance(h.get("state"), str):
            h["state"] = "unknown"
        return h

    def _network(self, hosts: list[dict]) -> dict:
        """environment.json's `network`, shaped like the netns backend's (one entry per scenario node)."""
        nodes, not_emulated, emulated = [], [], bool(hosts)
        by_rank = {n.rank: n for n in self.scenario.nodes()}
        for h in hosts:
            shaping = h.get("shaping")
            if not shaping:
                emulated = False
            for r in h.get("ranks") or self.placement.ranks_of(h["node_rank"]):
                n = by_rank[r]
                nodes.append({"rank": r, "name": n.name, "host": h["node_rank"], "hostname": h.get("hostname"),
                              "address": (h.get("iface") or {}).get("ipv4"), "link": n.link_name,
                              "link_spec": n.link.describe() if n.link else "unshaped",
                              "applied": (shaping or {}).get("applied") or {"delay_line": None},
                              "not_emulated": (shaping or {}).get("not_emulated", [])})
            not_emulated += (shaping or {}).get("not_emulated", [])
            if len(h.get("ranks") or []) > 1:
                not_emulated.append(f"host {h['node_rank']}: nodes {', '.join(h.get('nodes', []))} share one interface: "
                                    "traffic between them stays on the host, and wire bytes per worker are not measured")
        return {"backend": BACKEND, "network_emulated": emulated, "link_engine": "tc",
                "link_engine_reason": "tc on each host's interface (egress tbf, ingress through an ifb)",
                "nodes": nodes, "not_emulated": not_emulated}


def _torchrun_failed(what: str, node_rank: int, rc: int, log_path: Path) -> WorkerFailed:
    """The failure of one host's torchrun in one line with its cause; the log tail without C++ frames."""
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        text = ""
    why = cause(text)
    tail = "\n".join(without_cpp_frames(text).splitlines()[-15:])
    return WorkerFailed(f"{what}: torchrun on host {node_rank} exited with code {rc}"
                        + (f" ({why})" if why else "") + f"; log: {log_path}", log_tail="" if why else tail)


def run_node(opts: NodeOptions, note=lambda text: None) -> NodeResult:
    """One host's part of a multi-host run; SIGTERM takes the Ctrl-C path (shaping removed, records kept)."""
    with sigterm_as_interrupt():
        return Agent(opts, note).run()


def _checked_run(run: object) -> dict:
    """The `run` record from the agents' store, each field of the type node 0 wrote and the name a plain folder
    name; HarnessError naming the field otherwise."""
    fields = {"name": str, "path": str, "token": str, "scenario": str, "scenario_sha256": str, "placement": str}
    if not isinstance(run, dict):
        raise HarnessError("the agents' store's `run` is not a record: refused")
    for key, kind in fields.items():
        if not isinstance(run.get(key), kind):
            raise HarnessError(f"the agents' store's `run.{key}` is missing or not a {kind.__name__}: refused")
    safe_run_name(run["name"])
    return run


def _checked_worker_uid(value: object) -> int | None:
    """The workers' uid node 0 chose (None where it was not root): one of backends/base.py DYNAMIC_UIDS that no
    account of this host has; HarnessError naming it otherwise."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value not in DYNAMIC_UIDS:
        raise HarnessError(f"the agents' store's `run.worker_uid` is {str(value)[:40]!r}, not one of "
                           f"{DYNAMIC_UIDS.start}-{DYNAMIC_UIDS.stop - 1}: refused")
    try:
        name = pwd.getpwuid(value).pw_name
    except KeyError:
        return value
    raise HarnessError(f"node-rank 0 chose uid {value} for the workers, but on this host it is the account {name!r}: "
                       "start the run again (node 0 picks another)")


def _serve_rendezvous(addr: str, port: int, timeout_s: float):
    """torchrun's c10d rendezvous store, served by node 0's agent on `addr` alone: TCPStore listens on every
    address unless handed a socket (`master_listen_fd`), which torchrun never does. torch cannot authenticate
    it (docs/scaling-out.md says what is exposed there and what limits it)."""
    from datetime import timedelta

    from torch.distributed import TCPStore

    sock = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((addr, port))
        sock.listen(128)
        # The store owns the descriptor from here on (it closes it when it ends).
        return TCPStore(addr, port, is_master=True, wait_for_workers=False, multi_tenant=True,
                        timeout=timedelta(seconds=timeout_s), master_listen_fd=sock.detach())
    except OSError as e:
        sock.close()
        raise HarnessError(f"node-rank 0: cannot serve the rendezvous at {addr}:{port} ({e.strerror}); is the port "
                           "free?") from None
