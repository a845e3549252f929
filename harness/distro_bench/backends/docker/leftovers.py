"""Removing what runs of the docker backend left: containers and networks labelled as ours, after giving
Docker back a spliced eth0 (harness/distro_bench/net/splice.py). Used by every teardown and by `distro-bench clean`."""

from __future__ import annotations

import os

from distro_bench.net import owner
from distro_bench.net.ns import NetnsRef
from distro_bench.net.splice import undo

LABEL_OWNER = "distro-bench"  # "1" on every container and network the backend creates
LABEL_RUN = "distro-bench.run"
# The process that made it: distro-bench.owner.{host,boot,pidns,pid,start} (harness/distro_bench/net/owner.py).
LABEL_OWNER_PREFIX = "distro-bench.owner."
IFACE = "eth0"


def owner_labels(run_id: str) -> dict[str, str]:
    """The labels of everything a run creates: ours, the run's id, and its owner as the kernel knows it."""
    return {LABEL_OWNER: "1", LABEL_RUN: run_id,
            **{LABEL_OWNER_PREFIX + k: v for k, v in owner.record().items()}}


def _labels(obj) -> dict[str, str]:
    return obj.attrs.get("Labels") or (obj.attrs.get("Config") or {}).get("Labels") or {}


def judge(labels: dict[str, str]) -> tuple[bool | None, str]:
    """Is the run that made an object with these labels alive (True), proven dead (False), or not known (None)?
    From the owner on its labels and the kernel; an object without one (an older harness's) is alive while
    this host's claim of its run lives and otherwise cannot be proven dead."""
    rec = {k: labels.get(LABEL_OWNER_PREFIX + k, "") for k in owner.OWNER_KEYS}
    if any(rec.values()):
        return owner.judge(rec)
    if owner.owner_alive(labels.get(LABEL_RUN, "")):
        return True, "its run's claim on this host is alive"
    return None, "no owner on its labels (made by an older distro-bench)"


def remove_labelled(client, run_id: str | None = None, *, include_live: bool = True) -> tuple[list[str], list[str]]:
    """Remove containers, then networks, labelled as ours (one run's, or all). With `include_live` False
    only those whose owner is proven dead (judge()); one that cannot be proven dead is kept and named among
    the problems (with --force to remove it). With `include_live`, a live run's objects go too, and the run is
    told that clean ended it (owner.mark_ended_by_clean). (removed, problems); never raises, so a teardown
    always gets as far as it can."""
    import docker

    problems: list[str] = []

    def wanted(obj, kind: str) -> bool:
        labels = _labels(obj)
        alive, why = judge(labels)
        if include_live:
            if alive and run_id is None:  # clean --force, not a run's own teardown
                rec = {k: labels.get(LABEL_OWNER_PREFIX + k, "") for k in owner.OWNER_KEYS}
                owner.mark_ended_by_clean(rec if rec["pid"] else owner.claim_record(labels.get(LABEL_RUN, "")),
                                          f"{kind} {obj.name}")
            return True
        if alive is None:
            problems.append(f"{kind} {obj.name} kept: cannot prove its run is over ({why}); "
                            "`distro-bench clean --force` removes it")
        return alive is False

    label = f"{LABEL_RUN}={run_id}" if run_id else f"{LABEL_OWNER}=1"
    removed: list[str] = []
    try:
        containers = [c for c in client.containers.list(all=True, filters={"label": label}) if wanted(c, "container")]
    except docker.errors.APIError as e:
        return [], [f"listing containers: {e}"]
    for c in containers:
        problems += unsplice(c)
        try:
            c.remove(force=True)
            removed.append(f"container {c.name}")
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            problems.append(f"container {c.name}: {str(e)[:200]}")
    try:
        networks = [n for n in client.networks.list(filters={"label": label}) if wanted(n, "network")]
    except docker.errors.APIError as e:
        return removed, [*problems, f"listing networks: {e}"]
    for n in networks:
        try:
            n.remove()
            removed.append(f"network {n.name}")
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            problems.append(f"network {n.name}: {str(e)[:200]}")
    return removed, problems


def unsplice(container) -> list[str]:
    """Give a running container of ours its own eth0 back if a delay-line hop is still spliced in (a
    killed run); Docker's cleanup needs it (harness/distro_bench/net/splice.py). Needs root; a no-op otherwise."""
    pid = (container.attrs.get("State") or {}).get("Pid")
    if os.geteuid() != 0 or not pid:
        return []
    return [f"container {container.name}: {p}" for p in undo(NetnsRef(path=f"/proc/{pid}/ns/net"), IFACE)]
