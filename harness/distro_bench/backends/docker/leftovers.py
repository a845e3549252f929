"""Removing what runs of the docker backend left: containers and networks labelled as ours, after giving
Docker back a spliced eth0 (harness/distro_bench/net/splice.py). Used by every teardown and by `distro-bench clean`."""

from __future__ import annotations

import os

from distro_bench.net.ns import NetnsRef
from distro_bench.net.owner import owner_alive
from distro_bench.net.splice import undo

LABEL_OWNER = "distro-bench"  # "1" on every container and network the backend creates
LABEL_RUN = "distro-bench.run"
IFACE = "eth0"


def remove_labelled(client, run_id: str | None = None, *, include_live: bool = True) -> tuple[list[str], list[str]]:
    """Remove containers, then networks, labelled as ours (one run's, or all; with `include_live` False,
    not those of a run whose owner still lives): (removed, problems). Never raises, so a teardown
    always gets as far as it can."""
    import docker

    def dead(obj) -> bool:
        return include_live or not owner_alive((obj.attrs.get("Labels") or obj.attrs.get("Config", {}).get("Labels")
                                                or {}).get(LABEL_RUN, ""))

    label = f"{LABEL_RUN}={run_id}" if run_id else f"{LABEL_OWNER}=1"
    removed, problems = [], []
    try:
        containers = [c for c in client.containers.list(all=True, filters={"label": label}) if dead(c)]
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
        networks = [n for n in client.networks.list(filters={"label": label}) if dead(n)]
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
