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
from distro_bench.net.naming import new_run_id
from distro_bench.scenario.model import Scenario

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
        except ProcessLookupError:
            pass


def start_process(rank: int, argv: list[str], env: dict[str, str], log_path: Path) -> ProcessHandle:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # The worker dies with us (harness/distro_bench/train/worker.py die_with_parent): a SIGKILLed CLI leaves no orphans.
    env = {**env, "DISTRO_BENCH_PARENT_PID": str(os.getpid())}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    return ProcessHandle(rank=rank, log_path=log_path, proc=proc)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Backend(ABC):
    """A context manager: `with backend:` brings the nodes up and always tears them down."""

    name: ClassVar[str]

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

    def worker_env(self, rank: int) -> dict[str, str]:
        """Backend-specific environment for a worker (interface to bind and count, ...)."""
        return {}

    def python(self) -> str:
        import sys

        return sys.executable

    def link_probe(self) -> tuple[list, object, str] | None:
        """(distro_bench.net.linktest.LinkTarget per node, the far end's namespace, its address) where the runner can
        measure each node's link (harness/distro_bench/net/linktest.py `measure_nodes`); None where it cannot."""
        return None

    def describe(self) -> dict:
        """For environment.json: the backend, what was emulated on every node, and what was not."""
        return {"backend": self.name, "network_emulated": False, "nodes": [], "not_emulated": []}
