"""What a backend is: it brings up one node per worker (network and shaping included), starts worker
processes on them, and tears everything down on exit, whatever happened.

The runner talks to a backend only through this interface; the worker never imports one.
"""

from __future__ import annotations

import os
import pwd
import secrets
import signal
import socket
import subprocess
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from distro_bench import paths
from distro_bench.backends.requirements import Needs, Requirement
from distro_bench.errors import CapabilityError
from distro_bench.net import owner
from distro_bench.net.enter import exposures, signal_scope_missing
from distro_bench.net.naming import new_run_id
from distro_bench.net.ns import NetnsRef
from distro_bench.scenario import environ, hfcorpus, methods
from distro_bench.scenario.model import Scenario
from distro_bench.train.liveness import RecordTail

if TYPE_CHECKING:
    from distro_bench.net.engines import NetworkPlan


@dataclass
class BackendOptions:
    link_engine: str = "auto"  # auto | tc | userspace
    allow_unemulated: bool = False
    image: str | None = None  # docker backend: worker image
    # Accept workers that keep uid 0 where no unprivileged uid can run them (recorded in environment.json and
    # summary.json); without it such a run stops before training and says why.
    allow_root_workers: bool = False


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
    env = {**env, environ.PARENT_PID: str(os.getpid())}
    with open(log_path, "ab") as log:
        if note:
            log.write(f"distro-bench: {note}\n".encode())
            log.flush()
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    return ProcessHandle(rank=rank, log_path=log_path, proc=proc)


# The docker backend's workers run as nobody/nogroup in their containers (which see only their run folder).
WORKER_UID = WORKER_GID = 65534
# Host-process workers of a root coordinator (local, netns, multihost) run as a uid of their run's own, with
# the same gid and no supplementary group: not the coordinator's, so they can neither ptrace nor signal it
# nor write what root owns, and not another run's, so they cannot write its worker folders. Taken from the
# range systemd allocates DynamicUser= ids from (docs/UIDS-GIDS.md in systemd), unused by any account or
# process here. harness/distro_bench/net/enter.py drops the rest.
DYNAMIC_UIDS = range(61184, 65520)


def _uids_in_use() -> set[int]:
    used: set[int] = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/status") as f:
                    used.update(int(x) for line in f if line.startswith(("Uid:", "Gid:")) for x in line.split()[1:])
            except (OSError, ValueError):
                continue
    return used


def allocate_worker_uid() -> int:
    """A uid (and gid of the same number) for one run's workers: no account has it, no process runs as it."""
    used = _uids_in_use()
    for _ in range(200):
        uid = DYNAMIC_UIDS[secrets.randbelow(len(DYNAMIC_UIDS))]
        if uid in used:
            continue
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
    raise CapabilityError(f"no free uid in {DYNAMIC_UIDS.start}-{DYNAMIC_UIDS.stop - 1} for this run's workers")


def interpreter_paths(python: str) -> list[str]:
    """What a worker's interpreter and its imports live in: the interpreter (as named and as resolved), this
    environment's prefixes and import path, and the harness the worker imports (paths.IMPORT_ROOT)."""
    out = [python, os.path.realpath(python), sys.prefix, sys.base_prefix, sys.exec_prefix, str(paths.IMPORT_ROOT)]
    return out + [p for p in sys.path if p and os.path.isabs(p)]

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
    expose: tuple[str, ...] = ()  # paths made reachable to it (harness/distro_bench/net/enter.py --expose)
    root_accepted: bool = False  # uid 0 kept because --allow-root-workers said so

    def record(self) -> dict:
        """For environment.json's `workers_user`."""
        return {"uid": self.user[0] if self.user else os.geteuid(), "why": self.why,
                "exposed": list(self.expose), "root_accepted": self.root_accepted}


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


def choose_worker_user(out_dir: Path, reads: list[str], python: str, env: dict[str, str], uid: int,
                       allow_root: bool = False) -> WorkerUser:
    """`uid` (a run's own, allocate_worker_uid) where the coordinator is root: `out_dir` is given to it (the run
    folder's other files stay root's and read-only to it); what it must read but cannot reach through the
    folders on the way (an interpreter or a clone under root's 0700 home) is exposed to it alone
    (net/enter.py --expose); then a probe started exactly as the worker will be says whether it can read
    `reads`, write `out_dir` and find its modules. Where it cannot: CapabilityError with the reason and the
    fix, before anything trains, unless `allow_root` (--allow-root-workers) accepts uid 0, which is then said."""
    if os.geteuid() != 0:
        return WorkerUser(None, "the coordinator is not root: workers keep its uid (no capabilities, no_new_privs)")
    imports = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p)]
    expose = tuple(p for ps in exposures([*interpreter_paths(python), *imports, *reads, str(out_dir)], uid,
                                         uid).values() for p in ps)
    try:
        os.chown(out_dir, uid, uid)
        probe = subprocess.run(NetnsRef.current().wrap([python, "-c", _REACH_PROBE, str(out_dir), *reads],
                                                       no_caps=True, user=(uid, uid), expose=expose),
                               env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        problem = str(e)
    else:
        if probe.returncode == 0:
            seen = f"; {', '.join(expose)} exposed to it alone in its own mount namespace" if expose else ""
            return WorkerUser((uid, uid), f"uid {uid}, this run's own: not the coordinator's, so it can neither "
                              f"ptrace nor signal it; it owns only its output folder{seen}", expose)
        problem = (probe.stdout.strip() or probe.stderr.strip()[-300:]) or f"probe exit {probe.returncode}"
    try:
        os.chown(out_dir, 0, 0)
    except OSError:
        pass
    if allow_root:
        return WorkerUser(None, f"uid 0 without any capability, accepted by --allow-root-workers: uid {uid} cannot "
                                f"reach what a worker needs ({problem})", root_accepted=True)
    raise CapabilityError(f"workers cannot run as an unprivileged uid here: uid {uid} cannot reach what a worker "
                          f"needs ({problem}). Fix: make the interpreter, the harness, the scenario and --out "
                          "readable by other users (e.g. a venv and --out outside a 0700 home), or run as a "
                          "non-root user; or accept workers as uid 0 (no capabilities, but owner of every root "
                          "file) with --allow-root-workers")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Backend(ABC):
    """A context manager: `with backend:` brings the nodes up and always tears them down."""

    name: ClassVar[str]
    # How a run on this backend is launched, a name in run/runner.py's LAUNCHERS: "workers", one process per
    # scenario node through start_worker (train/launch.py WorkerJob); "agents", a whole `distro-bench node` agent
    # per host, which starts its workers from the same WorkerJob (ssh: run/remote.py), start_worker unused.
    launcher: ClassVar[str] = "workers"

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
        self._worker_uid: int | None = None

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
            if self._worker_uid is None and os.geteuid() == 0:
                self._worker_uid = allocate_worker_uid()
            self._worker_users[out_dir] = choose_worker_user(
                out_dir, worker_reads(self.scenario, argv) + worker_modules(self.scenario), argv[0], env,
                self._worker_uid or 0, allow_root=self.options.allow_root_workers)
        return self._worker_users[out_dir]

    def workers_user(self) -> dict | None:
        """environment.json's `workers_user`: who the workers ran as (the first folder's decision), or None."""
        first = next(iter(self._worker_users.values()), None)
        return first.record() if first else None

    def start_unprivileged(self, rank: int, argv: list[str], env: dict[str, str], log_path: Path,
                           netns=None) -> ProcessHandle:
        """A host-process worker (local, netns) started through harness/distro_bench/net/enter.py: in `netns` (a
        NetnsRef; None: this namespace), with no capability, no_new_privs, and as nobody where it can be."""
        full_env = {**os.environ, **env}
        who = self.worker_user(log_path.parent, argv, full_env)
        wrapped = (netns or NetnsRef.current()).wrap(argv, no_caps=True, user=who.user, expose=who.expose)
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
