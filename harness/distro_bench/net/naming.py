"""Names of everything we create. Every run gets a short random id, and every namespace is named
`dbench-<id>-<role>`, so two runs never collide and `distro-bench clean` can find leftovers by prefix."""

from __future__ import annotations

import os
import re
import secrets

PREFIX = "dbench-"
_ID_RE = re.compile(r"^[a-z0-9]{3,12}$")


NETNS_DIR = "/run/netns"  # where `ip netns` (and pyroute2) name namespaces
_issued: set[str] = set()


def new_run_id() -> str:
    """6 hex digits (16M ids, short enough to keep namespace names readable), never one this process issued
    before nor one whose namespaces are on this host now: random draws of 24 bits collide often enough to
    matter (200 draws: 0.12%; a CI run of ours once drew the same id twice)."""
    taken = live_run_ids()
    while True:
        rid = secrets.token_hex(3)
        if rid not in _issued and rid not in taken:
            _issued.add(rid)
            return rid


def live_run_ids(netns_dir: str = NETNS_DIR) -> set[str]:
    """The run ids of our namespaces present on this host (none where the folder is absent)."""
    try:
        names = os.listdir(netns_dir)
    except OSError:
        return set()
    return {n[len(PREFIX):].split("-", 1)[0] for n in names if n.startswith(PREFIX)}


def _check(run_id: str) -> str:
    if not _ID_RE.match(run_id):
        raise ValueError(f"run id {run_id!r}: 3-12 lowercase letters or digits")
    return run_id


def run_prefix(run_id: str) -> str:
    return f"{PREFIX}{_check(run_id)}-"


def switch_ns(run_id: str) -> str:
    return f"{run_prefix(run_id)}sw"


def node_ns(run_id: str, index: int) -> str:
    return f"{run_prefix(run_id)}n{index}"


def link_ns(run_id: str, index: int) -> str:
    """The namespace between a node and the switch that holds its userspace delay line."""
    return f"{run_prefix(run_id)}l{index}"


def site_ns(run_id: str, index: int) -> str:
    """A site's namespace: its bridge, its nodes' access-link ports and its shared uplink's site side."""
    return f"{run_prefix(run_id)}s{index}"


def site_link_ns(run_id: str, index: int) -> str:
    """The namespace on a site's uplink that holds its userspace delay line."""
    return f"{run_prefix(run_id)}sl{index}"


def is_ours(name: str, run_id: str | None = None) -> bool:
    return name.startswith(run_prefix(run_id) if run_id else PREFIX)


def run_id_of(name: str) -> str:
    """The run id in one of our names (`dbench-<id>-<role>`)."""
    return name[len(PREFIX):].split("-", 1)[0]
