"""Backends by name, and `auto`: the most faithful one this host can run for the scenario."""

from __future__ import annotations

import os

from distro_bench.backends.base import Backend, BackendOptions, WorkerHandle
from distro_bench.backends.docker import DockerBackend
from distro_bench.backends.local import LocalBackend
from distro_bench.backends.netns import NetnsBackend
from distro_bench.backends.ssh import SshBackend
from distro_bench.errors import InputError
from distro_bench.net import owner
from distro_bench.results import runfiles
from distro_bench.results.rundir import write_status
from distro_bench.scenario.model import Scenario

BACKENDS: dict[str, type[Backend]] = {
    "local": LocalBackend,
    "netns": NetnsBackend,
    "docker": DockerBackend,
    "ssh": SshBackend,
}

# `auto` tries these in order: containers, then namespaces, then loopback (ssh only when asked: it needs hosts).
AUTO_ORDER = ("docker", "netns", "local")


def select_backend(name: str, scenario: Scenario | None = None) -> tuple[type[Backend], str]:
    """(backend class, why it was chosen). An explicit name that cannot run here is an error that says why."""
    if name == "auto":
        reasons: list[str] = []
        for candidate in AUTO_ORDER:
            cls = BACKENDS.get(candidate)
            if cls is None:
                continue
            if candidate == "local" and scenario is not None and os.geteuid() == 0 and (shaped := _shaped_links(scenario)):
                # Root could emulate: a host that cannot is a problem to fix, not a reason to measure loopback and
                # print a confident verdict over a network that was never the scenario's (issue 38).
                raise InputError(f"--backend auto: the scenario's links are shaped ({', '.join(shaped)}) but no "
                                 "backend here can emulate them: " + "; ".join(reasons) + ". Fix that, or pass "
                                 "--backend local to run on loopback with the links NOT emulated (the run folder, "
                                 "report and verdict say so)")
            ok, why = cls.probe(scenario)
            if ok:
                skipped = "; ".join(reasons)
                return cls, f"auto: {candidate} ({why})" + (f"; skipped {skipped}" if skipped else "")
            reasons.append(f"{candidate}: {why}")
        raise InputError("--backend auto: no backend can run here: " + "; ".join(reasons))
    if name not in BACKENDS:
        raise InputError(f"--backend: unknown backend {name!r}; known: auto, {', '.join(sorted(BACKENDS))}")
    cls = BACKENDS[name]
    ok, why = cls.probe(scenario)
    if not ok:
        raise InputError(f"--backend {name}: cannot run here: {why}")
    return cls, f"{name} (requested; {why})"


def _shaped_links(scenario: Scenario) -> list[str]:
    """Names of the links with a rate, delay, loss, schedule or trace (each once)."""
    return list(dict.fromkeys(repr(n.link_name or "inline") for n in scenario.nodes()
                              if n.link is not None and n.link.shaped))


def clean_leftovers(include_live: bool = False) -> dict[str, tuple[list[str], list[str]]]:
    """Every backend's leftovers removed: name -> (removed, problems). One backend's failure does not
    stop the others'."""
    out = {}
    for name, cls in BACKENDS.items():
        try:
            out[name] = cls.clean_leftovers(include_live)
        except Exception as e:  # a cleaner must not stop the next one
            out[name] = ([], [f"{type(e).__name__}: {e}"])
    try:
        out["runs"] = mark_abandoned_runs()
    except Exception as e:
        out["runs"] = ([], [f"{type(e).__name__}: {e}"])
    return out


def mark_abandoned_runs() -> tuple[list[str], list[str]]:
    """Run folders still saying "running" whose process is gone (a SIGKILLed CLI has no teardown): status
    failed with the reason, and the dead claim dropped. (fixed, problems), as clean_leftovers."""
    fixed, problems = [], []
    for run_id, pid, run_dir in owner.abandoned_runs():
        try:  # a run folder's file: not followed, not waited on, capped (results/runfiles.py)
            status = runfiles.read_json(run_dir, "status.json")
        except (OSError, runfiles.RunFileError):
            status = None
        try:
            if isinstance(status, dict) and status.get("state") == "running":
                write_status(run_dir, "failed", f"the run's process (pid {pid}) ended without finishing it (killed, "
                                                "e.g. SIGKILL or out of memory); marked by distro-bench clean")
                fixed.append(f"stale 'running' status of {run_dir} (process {pid} gone; now failed)")
            owner.release(run_id)
        except OSError as e:
            problems.append(f"status of {run_dir}: {e}")
    return fixed, problems


__all__ = ["BACKENDS", "Backend", "BackendOptions", "WorkerHandle", "clean_leftovers", "select_backend"]
