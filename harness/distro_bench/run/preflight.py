"""One preflight: everything a run needs on this host (root, kernel pieces, binaries, Python modules, a
Docker engine, GPUs) for its backend and link engine, checked before anything is created, and ALL
problems reported in one CapabilityError, each with the exact line that fixes it.

Advice never names the flag the user already passed, and only names another flag when it would
work here (`--link-engine tc` only on a kernel with netem, say).

What each path needs is declared as data where it is implemented, and evaluated here with no branch on a
backend's or engine's name (docs/host-requirements.md is the table for users):
- every run: torch, and a GPU where a worker asks for cuda (harness/distro_bench/backends/requirements.py);
- each backend: its `requirements(needs)` (harness/distro_bench/backends/*): netns root, pyroute2, namespaces,
  `tc` and tbf for rates; docker the SDK and an engine, and for shaped links root, pyroute2 and `tc`;
- delay/jitter/loss: the link engine's (ENGINE_REQUIREMENTS): netem for tc, root and AF_PACKET for the
  userspace delay line (entered through harness/distro_bench/net/enter.py, offloads off through pyroute2).
No run needs ip, ethtool, nsenter, setpriv, iperf3 or ping: pyroute2, harness/distro_bench/net/enter.py and Python
TCP probes do their jobs.
"""

from __future__ import annotations

import dataclasses

from distro_bench.backends.registry import BACKENDS, select_backend
from distro_bench.backends.requirements import (
    INSTALL,
    LINK_ENGINES,
    Needs,
    Problem,
    engine_problems,
    run_requirements,
    uses_link_engine,
)
from distro_bench.errors import CapabilityError, InputError
from distro_bench.net import host
from distro_bench.net.host import HostInfo

__all__ = ["INSTALL", "Needs", "PreflightError", "Problem", "check", "check_options", "engine_problems",
           "problems", "readiness", "select_and_check"]


def problems(host: HostInfo, backend: str, needs: Needs, *, link_engine: str = "auto",
             allow_unemulated: bool = False) -> list[Problem]:
    """Every problem a run of `backend` with `link_engine` would hit here; [] when it can run: what every run
    needs, then what the backend declares (harness/distro_bench/backends/requirements.py)."""
    if backend not in BACKENDS:
        raise InputError(f"--backend: unknown backend {backend!r}; known: {', '.join(sorted(BACKENDS))}")
    out: list[Problem] = []
    for req in run_requirements(needs) + BACKENDS[backend].requirements(needs):
        if req.emulation and allow_unemulated:
            continue
        found = req.problems(host, link_engine)
        out += [dataclasses.replace(p, fix=p.fix + _or_unemulated()) for p in found] if req.emulation else found
    # One line per piece: a binary two paths need is listed once (its first reason; one install fixes both).
    seen, unique = set(), []
    for p in out:
        if p.what not in seen:
            seen.add(p.what)
            unique.append(p)
    return unique


def readiness(host: HostInfo) -> dict[str, dict[str, list[str]]]:
    """backend -> link engine -> problems (as lines; [] = ready) for a scenario with rates and delay, as
    `distro-bench doctor` shows them: each link engine of a backend that delays through one, else `none`."""
    needs = Needs(shaped=True, impaired=True)
    out: dict[str, dict[str, list[str]]] = {}
    for name, cls in BACKENDS.items():
        engines = LINK_ENGINES if uses_link_engine(cls.requirements(needs)) else ("none",)
        out[name] = {e: [p.line() for p in problems(host, name, needs, link_engine="auto" if e == "none" else e)]
                     for e in engines}
    return out


def _or_unemulated() -> str:
    return ", or --allow-unemulated (run without them; the run folder says what was not emulated)"


def format_problems(items: list[Problem], *, backend: str, link_engine: str) -> str:
    head = (f"this host cannot run the scenario with --backend {backend}"
            + (f" --link-engine {link_engine}" if link_engine != "auto" else "")
            + f": {len(items)} problem{'s' if len(items) != 1 else ''}")
    return head + "\n" + "\n".join(f"  - {p.line()}" for p in items)


class PreflightError(CapabilityError):
    """Everything this host lacks for a run, each problem with its fix."""

    def __init__(self, items: list[Problem], *, backend: str, link_engine: str):
        self.problems = items
        super().__init__(format_problems(items, backend=backend, link_engine=link_engine))


def host_for(backend: str, needs: Needs) -> HostInfo:
    """The host probe with just the slow parts this backend needs (cached per process)."""
    info = host.probe(docker=backend == "docker", gpus=False)
    if needs.cuda:
        info = dataclasses.replace(info, gpus=host.gpus(use_torch=True))
    return info


def check(backend: str, scenario, *, link_engine: str = "auto", allow_unemulated: bool = False,
          host: HostInfo | None = None) -> HostInfo:
    """Raise PreflightError listing every problem, or return the host probe the run can go on with.
    `backend` is a concrete one (local | netns | docker), after `auto` was resolved."""
    needs = Needs.of(scenario)
    info = host or host_for(backend, needs)
    found = problems(info, backend, needs, link_engine=link_engine, allow_unemulated=allow_unemulated)
    if found:
        raise PreflightError(found, backend=backend, link_engine=link_engine)
    return info


def check_options(backend: str, scenario, options) -> HostInfo:
    """`check` with a BackendOptions (what the runner holds)."""
    return check(backend, scenario, link_engine=options.link_engine, allow_unemulated=options.allow_unemulated)


def select_and_check(backend: str, scenario, options):
    """`select_backend` and then `check` for the backend chosen: (backend class, why). An explicit backend
    is checked first, so every missing piece is listed, not only the first one its probe meets."""
    if backend != "auto" and backend in BACKENDS:
        check_options(backend, scenario, options)
    cls, why = select_backend(backend, scenario)
    check_options(cls.name, scenario, options)
    return cls, why
