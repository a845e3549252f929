"""Between the hosts, after each optimizer and seed: this host's records handed to node-rank 0 (written in place
on a shared path, else shipped over the agents' store), node 0 gathering everyone's, and, when our workers failed,
whether a peer host's death was the cause (blame_peer)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from distro_bench.multihost.store import LOST_AFTER_S, WATCH_S, AgentStore, PeerLost


def ship(st: AgentStore, tag: str, out: Path, run_dir: Path, me: int, shared: bool, rc,
         note: Callable[[str], None]) -> None:
    """This host's records of one optimizer: written in place on a shared path, else over the store."""
    try:
        if me != 0 and not shared:
            files = sorted(p.relative_to(run_dir) for p in out.iterdir()
                           if p.is_file() and p.suffix in (".jsonl", ".log"))
            st.put_files(tag, run_dir, files)
        st.set_json(f"done/{tag}/{me}", {"rc": rc})
    except Exception as e:  # the store is gone (node 0 ended): nothing more to hand over
        note(f"host {me}: could not hand over the records of {tag}: {e}")


def shared_of(st: AgentStore, i: int) -> bool:
    """Whether host i writes into node 0's folder itself (a shared path)."""
    host = st.get_record(f"host/{i}") if st.has(f"host/{i}") else {}
    return host.get("records") == "shared path"


def gather(st: AgentStore, tag: str, nnodes: int, run_dir: Path) -> None:
    """Node 0: every other host's records of one optimizer, taken from the store where not on a shared path."""
    keys = [f"done/{tag}/{i}" for i in range(1, nnodes)]
    st.wait_keys(keys, f"every host's records of {tag}")
    for i in range(1, nnodes):
        if not shared_of(st, i):
            st.take_files(tag, i, run_dir)


def blame_peer(st: AgentStore, me: int) -> None:
    """Our workers failed: when a peer host died, that is the cause (its workers' sockets closing is what
    failed ours). Wait long enough for its heartbeat to go stale (node 0 decides); PeerLost if it did."""
    # Node 0 decides within LOST_AFTER_S + 2 WATCH_S; the others wait longer, so that they hear its
    # verdict (a peer's failure) instead of giving up first with their own workers' consequent errors.
    deadline = time.monotonic() + LOST_AFTER_S + (2 if me == 0 else 4) * WATCH_S
    while time.monotonic() < deadline:
        if me == 0:
            lost = {i: v for i, v in st.peer_status().items() if v[0] == "lost"}
            if lost:
                i, (kind, msg) = sorted(lost.items())[0]
                st.abort(i, kind, msg)
        a = st.aborted()
        if a and a["node_rank"] != me:
            raise PeerLost(f"host {a['node_rank']} (node-rank {a['node_rank']}) {a['kind']}: {a['message']}",
                           node_rank=a["node_rank"], kind=a["kind"])
        time.sleep(1.0 if me == 0 else WATCH_S)
