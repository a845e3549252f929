"""A worker process exec'ed into its node container, seen through the engine's API."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distro_bench.backends.base import WorkerHandle


@dataclass
class ContainerWorker(WorkerHandle):
    """A worker process exec'ed into its node container. Its pid (inside the container) is kept in a
    file there so stop() can signal it through the engine, without host privileges."""

    rank: int
    log_path: Path
    api: Any = field(repr=False)
    container_id: str = ""
    exec_id: str = ""
    pid_file: str = ""
    user: str | None = None  # the exec's user: stop() signals as it (the container's root has no CAP_KILL)
    _rc: int | None = None

    def poll(self) -> int | None:
        import docker

        if self._rc is not None:
            return self._rc
        try:
            info = self.api.exec_inspect(self.exec_id)
        except docker.errors.NotFound:  # container removed under it
            self._rc = 137
            return self._rc
        if info.get("Running"):
            return None
        if info.get("ExitCode") is None:
            # Not started yet, or its container died (then the exec never reports an exit code).
            try:
                state = self.api.inspect_container(self.container_id)["State"]
            except docker.errors.NotFound:
                state = {"Running": False}
            if state.get("Running"):
                return None
            self._rc = 137
            return self._rc
        self._rc = int(info["ExitCode"])
        return self._rc

    def stop(self, kill: bool = False) -> None:
        import docker

        if self.poll() is not None:
            return
        sig = "KILL" if kill else "TERM"
        try:
            ex = self.api.exec_create(self.container_id, ["sh", "-c", f'kill -{sig} "$(cat {self.pid_file})" 2>/dev/null; true'],
                                      **({"user": self.user} if self.user else {}))
            self.api.exec_start(ex["Id"])
        except docker.errors.APIError:
            pass  # the container is gone or stopping: nothing left to signal
