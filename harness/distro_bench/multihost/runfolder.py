"""The run folder of a multi-host run, across hosts: node-rank 0 opens it and names it in the agents' store (with
the scenario, its hash, the placement and the workers' uid); every other host joins it, written in place where the
path is shared (node 0's token is there), else as a local copy whose records are shipped (records.py). Everything
read from the store is checked before it becomes a path, a uid or a scenario."""

from __future__ import annotations

import hashlib
import os
import pwd
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from distro_bench.backends.base import DYNAMIC_UIDS, allocate_worker_uid
from distro_bench.errors import HarnessError, InputError
from distro_bench.multihost.store import AgentStore
from distro_bench.results import runfiles
from distro_bench.results.rundir import atomic_write_text
from distro_bench.run.lifecycle import RunLifecycle
from distro_bench.scenario.loading import load_scenario
from distro_bench.scenario.placement import Placement

TOKEN_FILE = ".multihost-token"


@dataclass(frozen=True)
class Joined:
    """This host's view of the run folder."""

    run_dir: Path
    shared: bool  # node 0's folder itself (a shared path), not a local copy
    worker_uid: int | None  # the run's workers' uid (None: not root here, or node 0 was not root)


def safe_run_name(name: object) -> str:
    """A run folder's name from the agents' store, as a plain name under --out: no separator, no `.`/`..`, no
    control character, at most 255 bytes. Local to multihost until results/ has one safe join for every name."""
    if (not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name
            or any(not c.isprintable() for c in name) or len(name.encode()) > 255):
        raise HarnessError(f"the agents' store names the run folder {str(name)[:200]!r}: not a plain folder name "
                           "(a separator, '..', or a control character); refused")
    return name


def checked_run(run: object) -> dict:
    """The `run` record from the agents' store, each field of the type node 0 wrote and the name a plain folder
    name; HarnessError naming the field otherwise."""
    fields = {"name": str, "path": str, "token": str, "scenario": str, "scenario_sha256": str, "placement": str}
    if not isinstance(run, dict):
        raise HarnessError("the agents' store's `run` is not a record: refused")
    for key, kind in fields.items():
        if not isinstance(run.get(key), kind):
            raise HarnessError(f"the agents' store's `run.{key}` is missing or not a {kind.__name__}: refused")
    safe_run_name(run["name"])
    return run


def checked_worker_uid(value: object) -> int | None:
    """The workers' uid node 0 chose (None where it was not root): one of backends/base.py DYNAMIC_UIDS that no
    account of this host has; HarnessError naming it otherwise."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value not in DYNAMIC_UIDS:
        raise HarnessError(f"the agents' store's `run.worker_uid` is {str(value)[:40]!r}, not one of "
                           f"{DYNAMIC_UIDS.start}-{DYNAMIC_UIDS.stop - 1}: refused")
    try:
        name = pwd.getpwuid(value).pw_name
    except KeyError:
        return value
    raise HarnessError(f"node-rank 0 chose uid {value} for the workers, but on this host it is the account {name!r}: "
                       "start the run again (node 0 picks another)")


def open_on_host0(life: RunLifecycle, out: Path, placement: Placement, st: AgentStore,
                  named: Callable[[Path], None] = lambda run_dir: None) -> Joined:
    """Node 0 opens the run folder (run/lifecycle.py: claimed, scenario.yaml, status "running") and names it in
    the store, with its token for the hosts that share the path. `named` hears the folder as soon as it exists
    (the agent ends its status and writes it, whatever fails after)."""
    run_dir = life.open(out)
    named(run_dir)
    token = secrets.token_hex(8)
    atomic_write_text(run_dir / TOKEN_FILE, token)
    text = (run_dir / "scenario.yaml").read_text()
    # One uid for the run's workers on every host: on a shared path they write into the same folders.
    worker_uid = allocate_worker_uid() if os.geteuid() == 0 else None
    st.set_json("run", {"name": run_dir.name, "path": str(run_dir.resolve()), "token": token,
                        "scenario": text, "scenario_sha256": hashlib.sha256(text.encode()).hexdigest(),
                        "placement": placement.encode(), "worker_uid": worker_uid})
    return Joined(run_dir, True, worker_uid)


def join_from_store(life: RunLifecycle, out: Path, placement: Placement, st: AgentStore, ship_records: bool,
                    named: Callable[[Path], None] = lambda run_dir: None) -> Joined:
    """Another host joins node 0's run folder: in place on a shared path, else a local copy under its own --out.
    `named` hears the folder's path as soon as it is known (before the checks of what is in it)."""
    st.wait_keys(["run"], "node-rank 0 to open the run folder")
    run = checked_run(st.get_json("run"))
    worker_uid = checked_worker_uid(run.get("worker_uid")) if os.geteuid() == 0 else None
    if run["placement"] != placement.encode():
        raise InputError(f"placement differs from node-rank 0's ({run['placement']} there, "
                         f"{placement.encode()} here): give every agent the same scenario and flags")
    # The run folder on a shared path (NFS, a bind mount) holds node 0's token: write straight into it.
    # Only ever below this host's own --out: node 0's path counts as shared when it is --out/<name> here.
    out = out.resolve()
    same_path = Path(run["path"]) == out / run["name"]
    try:
        shared = (not ship_records and same_path
                  and runfiles.read_bytes(out, Path(run["name"], TOKEN_FILE), "status.json",
                                          head=256).decode(errors="replace") == run["token"])
    except (OSError, HarnessError):
        shared = False
    run_dir = out / run["name"]
    named(run_dir)
    if not shared:
        runfiles.write_bytes(out, Path(run["name"], "scenario.yaml"), run["scenario"].encode())
    # What the workers load is what node 0 validated and hashed: read back, hashed, and validated here too.
    got = runfiles.read_text(out, Path(run["name"], "scenario.yaml"))
    if hashlib.sha256(got.encode()).hexdigest() != run["scenario_sha256"]:
        raise HarnessError(f"{run_dir / 'scenario.yaml'} differs from the scenario node-rank 0 validated "
                           "(sha256 mismatch); refused")
    try:
        load_scenario(run_dir / "scenario.yaml")
    except InputError as e:
        raise HarnessError(f"the scenario from node-rank 0 does not validate here: {e}") from None
    life.join(run_dir)
    return Joined(run_dir, shared, worker_uid)
