"""`distro-bench clean`: remove what any backend left behind (a killed run, a crashed teardown).

Each backend with something to leave registers a cleaner here: a function of `include_live` returning
(removed, problems) that never raises. A cleaner whose prerequisites are missing (no engine, no root) finds
nothing or reports why it could not remove something.
"""

from __future__ import annotations

from collections.abc import Callable


def _docker(include_live: bool) -> tuple[list[str], list[str]]:
    from harness.backends.docker import clean_leftovers

    return clean_leftovers(include_live)


def _netns(include_live: bool) -> tuple[list[str], list[str]]:
    # Namespaces named dbench-* (harness/net/naming.py), with their veths, bridges and qdiscs.
    from harness.net.cleanup import clean

    removed, problems = clean(include_live=include_live)
    return [f"namespace {n}" for n in removed], problems


CLEANERS: dict[str, Callable[[bool], tuple[list[str], list[str]]]] = {
    "docker": _docker,
    "netns": _netns,
}


def clean_all(include_live: bool = False) -> dict[str, tuple[list[str], list[str]]]:
    """Run every cleaner: backend -> (removed, problems). Runs whose harness process still lives are
    left alone unless `include_live` (harness/owner.py)."""
    out = {}
    for name, cleaner in CLEANERS.items():
        try:
            out[name] = cleaner(include_live)
        except Exception as e:  # one backend's failure must not stop the others' cleanup
            out[name] = ([], [f"{type(e).__name__}: {e}"])
    return out
