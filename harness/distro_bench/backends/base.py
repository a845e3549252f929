"""What a backend is: it brings up one node per worker (network and shaping included), starts worker
processes on them, and tears everything down on exit, whatever happened.

The runner talks to a backend only through this interface; the worker never imports one.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from distro_bench.backends.requirements import Needs, Requirement
from distro_bench.net import owner
from distro_bench.net.enter import signal_scope_missing
from distro_bench.net.naming import new_run_id
from distro_bench.net.ns import NetnsRef
from distro_bench.scenario import hfcorpus, methods
from distro_bench.scenario.model import Scenario
from distro_bench.train.liveness import RecordTail

if TYPE_CHECKING:
    from distro_bench.net.engines import NetworkPlan


@dataclass
class BackendOptions:
    link_engine: str = "auto"  # auto | tc | userspace
    allow_unemulated: bool = False
    image: str | None = None  # docker backend: worker image


class WorkerHandle(ABC):
    rank: int
    log_path: Path

    @abstractmethod
    def poll(self) -> int | None:
        """Exit code, or None while running."""

    @abstractmethod
    def stop(self, kill: bool = False) -> None: ...

    def wait(self, timeout: float) -> int | None:
        import time

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            rc = self.poll()
            if rc is not None:
                return rc
            time.sleep(0.05)
        return self.poll()


@dataclass
class ProcessHandle(WorkerHandle):
    """A worker that is a host process (local and netns backends). It leads its own process group."""

    rank: int
    log_path: Path
    proc: subprocess.Popen = field(repr=False)

    def poll(self) -> int | None:
        return self.proc.poll()

    def stop(self, kill: bool = False) -> None:
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
            if not kill:  # a stopped worker (SIGSTOP, a debugger) holds SIGTERM pending until it runs again
                os.killpg(self.proc.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def start_process(rank: int, argv: list[str], env: dict[str, str], log_path: Path,
                  note: str | None = None) -> ProcessHandle:
    """`note`: a first line for the log (who the worker runs as)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # The worker dies with us (harness/distro_bench/train/worker.py die_with_parent): a SIGKILLed CLI leaves no orphans.
    env = {**env, "DISTRO_BENCH_PARENT_PID": str(os.getpid())}
    with open(log_path, "ab") as log:
        if note:
            log.write(f"distro-bench: {note}\n".encode())
            log.flush()
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    return ProcessHandle(rank=rank, log_path=log_path, proc=proc)


# Workers of a root coordinator run as nobody/nogroup: a uid that is not the coordinator's can neither
# ptrace nor signal it, nor write the files root owns (harness/distro_bench/net/enter.py drops the rest).
WORKER_UID = WORKER_GID = 65534

# Run as the worker (its python, its environment, its uid): can it read what a worker reads and write its
# output folder? Lists what it cannot. find_spec on top-level names stats folders and imports nothing.
_REACH_PROBE = """
import importlib.util, os, sys
out, *reads = sys.argv[1:]
modules = ["distro_bench", "torch"] + [r[len("module:"):] for r in reads if r.startswith("module:")]
reads = [r for r in reads if not r.startswith("module:")]
bad = [p for p in reads if not os.access(p, os.R_OK)]
bad += [] if os.access(out, os.W_OK | os.X_OK) else [out]
for m in modules:
    try:
        if importlib.util.find_spec(m) is None:
            bad.append("module " + m)
    except Exception as e:
        bad.append(f"module {m} ({e})")
print("; ".join(bad))
sys.exit(1 if bad else 0)
"""


@dataclass(frozen=True)
class WorkerUser:
    """Who a host-process worker runs as: `user` (uid, gid) or None for the coordinator's own, and why."""

    user: tuple[int, int] | None
    why: str


def signal_scope() -> str:
    """What scopes a worker's signals (harness/distro_bench/net/enter.py), in words."""
    missing = signal_scope_missing()
    return ("scoped by a Landlock domain of its own: it cannot signal or ptrace the coordinator, only itself and "
            "what it starts" if missing is None else f"not scoped ({missing})")


def worker_reads(scenario: Scenario, argv: list[str]) -> list[str]:
    """What a worker started with `argv` opens for reading: its scenario file and the corpus (a file, a
    folder, or the cache a Hugging Face corpus is read from)."""
    out = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--scenario"]
    corpus = scenario.data.corpus
    if hfcorpus.is_hf(corpus):
        out.append(str(hfcorpus.cache_dir()))
    elif not corpus.startswith("builtin:") and scenario.data.tokens is None:
        out.append(scenario.corpus_path())
    for name in ("data.tokens", "data.val_tokens", "data.tokenizer"):  # the run folder's copies (models-and-data.md)
        path = scenario.file_path(name)
        if path is not None:
            out.append(str(path))
    return out


def worker_modules(scenario: Scenario) -> list[str]:
    """`module:NAME` for each top-level module of the scenario's methods and model factory from other distributions
    (or import paths), and the optional libraries its model and data need: what a worker imports beyond distro_bench
    and torch, which the unprivileged uid must find too (a
    package installed in a private home folder is not importable by it)."""
    found = set()
    if scenario.model.factory:  # a model from another distribution (docs/models-and-data.md)
        found.add(scenario.model.factory.partition(":")[0].split(".")[0])
    if scenario.model.hf_config is not None:
        found.add("transformers")
    if scenario.data.tokenizer is not None:
        found.add("tokenizers")
    for cfg in scenario.optimizers.values():
        if not methods.is_shipped(cfg.type):
            try:
                found.add(methods.top_module(cfg.type))
            except methods.MethodError:
                continue  # validation said so already
    return [f"module:{m}" for m in sorted(found)]


def choose_worker_user(out_dir: Path, reads: list[str], python: str, env: dict[str, str]) -> WorkerUser:
    """nobody (WORKER_UID) where the coordinator is root and nobody can reach what the worker reads and
    writes: `out_dir` is given to it (the run folder's other files stay root's and read-only to it), then
    a probe started exactly as the worker will be says whether it can read `reads`, write `out_dir` and
    find its modules. Otherwise the worker keeps the coordinator's uid, still without any capability: a
    run folder under a 0700 home (root's /root) is not reachable by another uid."""
    if os.geteuid() != 0:
        return WorkerUser(None, "the coordinator is not root: workers keep its uid (no capabilities, no_new_privs)")
    try:
        os.chown(out_dir, WORKER_UID, WORKER_GID)
        probe = subprocess.run(NetnsRef.current().wrap([python, "-c", _REACH_PROBE, str(out_dir), *reads],
                                                       no_caps=True, user=(WORKER_UID, WORKER_GID)),
                               env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        problem = str(e)
    else:
        if probe.returncode == 0:
            return WorkerUser((WORKER_UID, WORKER_GID), f"uid {WORKER_UID} (nobody): not the coordinator's, so it "
                              "can neither ptrace nor signal it; it owns only its output folder")
        problem = (probe.stdout.strip() or probe.stderr.strip()[-300:]) or f"probe exit {probe.returncode}"
    try:
        os.chown(out_dir, 0, 0)
    except OSError:
        pass
    return WorkerUser(None, f"uid {WORKER_UID} cannot reach what a worker needs ({problem}): workers keep uid 0, "
                            "without any capability")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Backend(ABC):
    """A context manager: `with backend:` brings the nodes up and always tears them down."""

    name: ClassVar[str]
    # True for a backend whose hosts each run a whole `distro-bench node` agent (ssh): the runner hands the run to
    # run/remote.py, and start_worker is not used.
    launches_agents: ClassVar[bool] = False

    def __init__(self, scenario: Scenario, run_dir: Path, options: BackendOptions | None = None,
                 plan: NetworkPlan | None = None):
        self.scenario = scenario
        self.run_dir = run_dir
        self.options = options or BackendOptions()
        # The link plan made by `preflight` (the runner passes it on); a backend that shapes links and
        # was given none makes it in setup.
        self.plan = plan
        # Names every namespace/container of this run; claimed while the run lives (harness/distro_bench/net/owner.py).
        self.run_id = new_run_id()
        self._worker_users: dict[Path, WorkerUser] = {}

    @classmethod
    @abstractmethod
    def probe(cls, scenario: Scenario | None = None) -> tuple[bool, str]:
        """(usable here for this scenario, why or why not) without creating anything."""

    @classmethod
    def requirements(cls, needs: Needs) -> list[Requirement]:
        """What this backend needs of the host for a scenario that asks `needs`, beyond what every run needs
        (harness/distro_bench/backends/requirements.py); harness/distro_bench/run/preflight.py checks them all at once."""
        return []

    @classmethod
    def preflight(cls, scenario: Scenario, options: BackendOptions) -> NetworkPlan | None:
        """The link plan (harness/distro_bench/net/engines.py) this backend will apply, made once, before anything is
        created; CapabilityError when it cannot emulate the scenario as asked (e.g. delay without netem
        or a delay line). None for a backend that shapes nothing."""
        return None

    @classmethod
    def clean_leftovers(cls, include_live: bool = False) -> tuple[list[str], list[str]]:
        """`distro-bench clean`: remove what runs of this backend left behind (a killed run, a crashed
        teardown): (removed, problems); never raises. Runs whose harness process still lives
        (harness/distro_bench/net/owner.py) are left alone unless `include_live`."""
        return [], []

    def __enter__(self) -> Backend:
        owner.claim(self.run_id, self.run_dir)
        try:
            self.setup()
        except BaseException:
            self._teardown_and_release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._teardown_and_release()

    def _teardown_and_release(self) -> None:
        try:
            self.teardown()
        finally:
            owner.release(self.run_id)

    def setup(self) -> None:  # noqa: B027 - an optional hook: the local backend has nothing to bring up
        """Bring up nodes and links, apply and verify shaping."""

    def teardown(self) -> None:  # noqa: B027 - an optional hook, as setup
        """Remove everything setup created; safe to call twice and after a partial setup."""

    @abstractmethod
    def master_addr(self) -> str: ...

    def master_port(self) -> int:
        """A fresh port per optimizer run, so a previous run's sockets in TIME_WAIT never collide."""
        return free_port()

    @abstractmethod
    def start_worker(self, rank: int, argv: list[str], env: dict[str, str], log_path: Path) -> WorkerHandle:
        """Start `argv` (a `python -m distro_bench.train.worker ...` command) as worker `rank` on its node."""

    def worker_user(self, out_dir: Path, argv: list[str], env: dict[str, str]) -> WorkerUser:
        """Who the workers writing to `out_dir` run as (choose_worker_user), decided once per folder."""
        if out_dir not in self._worker_users:
            self._worker_users[out_dir] = choose_worker_user(
                out_dir, worker_reads(self.scenario, argv) + worker_modules(self.scenario), argv[0], env)
        return self._worker_users[out_dir]

    def start_unprivileged(self, rank: int, argv: list[str], env: dict[str, str], log_path: Path,
                           netns=None) -> ProcessHandle:
        """A host-process worker (local, netns) started through harness/distro_bench/net/enter.py: in `netns` (a
        NetnsRef; None: this namespace), with no capability, no_new_privs, and as nobody where it can be."""
        full_env = {**os.environ, **env}
        who = self.worker_user(log_path.parent, argv, full_env)
        wrapped = (netns or NetnsRef.current()).wrap(argv, no_caps=True, user=who.user)
        uid = who.user[0] if who.user else os.geteuid()
        return start_process(rank, wrapped, full_env, log_path,
                             note=f"worker runs as uid {uid} with no capabilities and no_new_privs ({who.why}); "
                                  f"signals {signal_scope()}")

    def worker_env(self, rank: int) -> dict[str, str]:
        """Backend-specific environment for a worker (interface to bind and count, ...)."""
        return {}

    def python(self) -> str:
        import sys

        return sys.executable

    # Where the runner reads a worker's progress. Every single-host backend shares the run folder with its workers
    # (a bind mount in Docker), so the default is the worker's own files there; a backend whose workers write
    # elsewhere overrides these two (the ssh backend streams whole agents instead: run/remote.py).
    def records(self, out: Path, rank: int) -> RecordTail:
        """A reader of rank's step records (`rank<R>.jsonl` in the worker folder `out`), new lines as they land."""
        return RecordTail(out / f"rank{rank}.jsonl")

    def heartbeat(self, out: Path, rank: int) -> Path:
        """Rank's heartbeat file (train/liveness.py), which the liveness judge reads for its age."""
        return out / f"rank{rank}.hb"

    def link_probe(self) -> tuple[list, object, str] | None:
        """(distro_bench.net.linktest.LinkTarget per node, the far end's namespace, its address) where the runner can
        measure each node's link (harness/distro_bench/net/linktest.py `measure_nodes`); None where it cannot."""
        return None

    def describe(self) -> dict:
        """For environment.json: the backend, what was emulated on every node, and what was not."""
        return {"backend": self.name, "network_emulated": False, "nodes": [], "not_emulated": []}
