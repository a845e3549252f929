"""Every backend's name, what it is, and which run options it reads: data the CLI builds its choices and help
from without importing the backends (that costs 0.6 s: pandas, the docker SDK's modules), and the check that a
run does not pass an option its backend would ignore. Each Backend class names the same options
(`Backend.options`); a unit test keeps the two in step."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from distro_bench.errors import InputError


@dataclass(frozen=True)
class BackendEntry:
    name: str
    what: str
    options: tuple[str, ...]  # the run settings (RunSettings fields) it reads besides the scenario
    needs: tuple[tuple[str, str], ...] = ()  # (option, what to give) it cannot run without


# The run options only some backends read, and the flag that sets each.
OPTION_FLAGS = {"link_engine": "--link-engine", "allow_unemulated": "--allow-unemulated",
                "measure_links": "--measure-links", "image": "--image", "inventory": "--inventory"}
_EMULATED = ("link_engine", "allow_unemulated", "measure_links")

CATALOG: dict[str, BackendEntry] = {e.name: e for e in (
    # local reads allow_unemulated: a scenario whose links it cannot emulate (all of them) runs only when allowed
    BackendEntry("local", "worker processes on 127.0.0.1, links not emulated", ("allow_unemulated",)),
    BackendEntry("netns", "a network namespace per worker, a star of shaped links (root)", _EMULATED),
    BackendEntry("docker", "a container per worker, links shaped from the host (root, a Docker engine)",
                 (*_EMULATED, "image")),
    # ssh: each host's agent shapes its own interface with tc (no link engine to choose) and measures its peers
    BackendEntry("ssh", "hosts from --inventory, each running `distro-bench node` over SSH and shaping its "
                        "interface (root there)", ("allow_unemulated", "measure_links", "inventory"),
                 needs=(("inventory", ("HOSTS.yaml: the hosts to run on, in node-rank order, each with its "
                                       "interface (docs/backends.md, 'The ssh backend')")),)),
)}
NAMES = ("auto", *CATALOG)  # `auto`: the most faithful one this host can run (docker, then netns, then local; never ssh)


def refuse_unread_options(backend: str, given: Mapping[str, object]) -> None:
    """An explicit backend given an option it does not read (`given`: option -> value, None where not set) is an
    error naming the option and the backends that take it; an option turned off (`--no-measure-links`) or left
    to choose (`--link-engine auto`) asks nothing and passes. `auto` takes them all: the one it picks reads what applies to it.
    A backend not given an option it needs (its entry's `needs`) is an error naming the option and what to give."""
    entry = CATALOG.get(backend)
    if entry is None:
        return
    unread = [o for o, v in given.items() if v not in (None, False, "auto") and o in OPTION_FLAGS
              and o not in entry.options]
    if unread:
        raise InputError("; ".join(
            f"{OPTION_FLAGS[o]}: the {backend} backend does not use it (it applies to "
            f"{', '.join(n for n, e in CATALOG.items() if o in e.options)}); leave it out or choose one of those"
            for o in unread))
    # Before the backend probes this host: an option it cannot run without is the first thing to fix, anywhere.
    for option, _ in entry.needs:
        if given.get(option) in (None, False):
            raise InputError(needs_message(backend, option))


def needs_message(backend: str, option: str) -> str:
    """The error of a backend run without an option it needs (catalog entry's `needs`)."""
    what = dict(CATALOG[backend].needs)[option]
    return f"--backend {backend} needs {OPTION_FLAGS[option]} {what}"
