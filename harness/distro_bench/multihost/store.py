"""The agents' channel: a key-value store served by node-rank 0's agent on the rendezvous address only
(port = the rendezvous port + 1 unless told), a client in every other agent, every connection and every
frame authenticated with the run's secret (multihost/channel.py, multihost/secret.py).

It reaches exactly the hosts that can reach the rendezvous, so a cluster needs no second port rule beyond
the rendezvous' neighbour. Through it the
agents agree on the run folder, publish their host description, heartbeat, meet before each optimizer,
report each torchrun's end and, where the run folder is not on a shared path, ship their workers'
records (rank<R>.jsonl and logs) to node-rank 0, which writes them into the one run folder.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from distro_bench.errors import HarnessError
from distro_bench.multihost.channel import ChannelError, StoreClient, StoreServer
from distro_bench.results import runfiles
from distro_bench.scenario.timeouts import Timeouts

CHUNK = 4 * 1024 * 1024
# The agents' own traffic crosses the shaped interfaces and the wire counters during training, so it is
# kept to about two small round trips per host every WATCH_S (heartbeat, and one look at `abort`): node 0
# (whose store calls stay on the host) watches every heartbeat and raises `abort` for everyone.
HEARTBEAT_S = 5.0
WATCH_S = 5.0
# A host whose heartbeat has not changed for this long is lost (killed, crashed, cut off): the coordinator's
# policy (scenario/timeouts.py), the same on every host.
LOST_AFTER_S = Timeouts.PEER_LOST_S


class PeerLost(HarnessError):
    """Another host's agent stopped responding or reported a failure."""

    def __init__(self, message: str, node_rank: int, kind: str):
        self.node_rank, self.kind = node_rank, kind
        super().__init__(message)


class AgentStore:
    """`host`: the address node-rank 0 serves on (and only on) and the others connect to; `secret`: the run's
    (multihost/secret.py); `note` hears the peers the server refused."""

    def __init__(self, host: str, port: int, node_rank: int, nnodes: int, timeout_s: float, secret: bytes,
                 note=lambda text: None):
        self.node_rank, self.nnodes, self.timeout_s = node_rank, nnodes, timeout_s
        self.host, self.port, self._secret = host, port, secret
        self.server: StoreServer | None = None
        try:
            if node_rank == 0:
                self.server = StoreServer(host, port, secret, refused=lambda text: note(f"agents' store: {text}"))
            self.store = StoreClient(host, port, secret, timeout_s)
        except ChannelError as e:
            self.close()
            raise HarnessError(f"node-rank {node_rank}: {e}") from None
        except OSError as e:
            self.close()
            who = "serve" if node_rank == 0 else "reach"
            raise HarnessError(f"node-rank {node_rank}: cannot {who} the agents' store at {host}:{port} ({e}); "
                               "node-rank 0 must run on the rendezvous host and the port must be open") from None
        self._hb_stop = threading.Event()
        self._hb_thread: threading.Thread | None = None
        self._seen: dict[int, tuple[str, float]] = {}  # peer -> (last heartbeat value, monotonic when it changed)
        self._started = time.monotonic()

    # ---- plain values ---------------------------------------------------------------------------
    def set_json(self, key: str, obj) -> None:
        self.store.set(key, json.dumps(obj, default=str))

    def get_json(self, key: str):
        """The JSON value under `key`; HarnessError naming the key for what is not JSON."""
        try:
            return json.loads(self.store.get(key))
        except (ValueError, RecursionError):
            raise HarnessError(f"the agents' store's `{key}` is not JSON: refused") from None

    def get_record(self, key: str, fields: dict[str, type | tuple[type, ...]] | None = None) -> dict:
        """The JSON object under `key`, each of `fields` present with its type; HarnessError naming the key and
        the field otherwise (a value from another host is checked before it is used)."""
        obj = self.get_json(key)
        if not isinstance(obj, dict):
            raise HarnessError(f"the agents' store's `{key}` is not a record: refused")
        for name, kind in (fields or {}).items():
            if not isinstance(obj.get(name), kind) or (isinstance(obj.get(name), bool) and bool not in (
                    kind if isinstance(kind, tuple) else (kind,))):
                raise HarnessError(f"the agents' store's `{key}.{name}` is missing or of the wrong type: refused")
        return obj

    def has(self, *keys: str) -> bool:
        return self.store.check(list(keys))

    def wait_keys(self, keys: list[str], what: str, timeout_s: float | None = None, watch: bool = True) -> None:
        """Wait until every key exists; PeerLost as soon as a peer fails or goes silent (when `watch`)."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while not self._check(keys):
            if watch:
                self.raise_if_peer_down()
            if time.monotonic() > deadline:
                missing = [k for k in keys if not self.store.check([k])]
                raise HarnessError(f"waited {timeout_s or self.timeout_s:.0f}s for {what}: "
                                   + self._missing_hosts(missing))
            time.sleep(0.2)

    def _missing_hosts(self, missing: list[str]) -> str:
        """The hosts behind missing keys (`probe/1`, `barrier/rtt/1`: host 1), in words a user acts on."""
        hosts = sorted({int(k.rsplit("/", 1)[1]) for k in missing if k.rsplit("/", 1)[-1].isdigit()})
        others = [k for k in missing if not k.rsplit("/", 1)[-1].isdigit()]
        parts = []
        for i in hosts:
            if i == self.node_rank:
                continue
            if self.store.check([f"hb/{i}"]):
                parts.append(f"host {i} joined but did not get there (its own output says why)")
            else:
                parts.append(f"host {i} never joined (is `distro-bench node --node-rank {i}` running there, and "
                             f"can it reach {self.host}:{self.port}?)")
        if others or not parts:
            parts.append("still missing: " + ", ".join(others or missing))
        return "; ".join(parts)

    def _check(self, keys: list[str]) -> bool:
        try:
            return self.store.check(keys)
        except Exception as e:
            if self.node_rank == 0:
                raise
            raise PeerLost(f"host 0 (node-rank 0) lost: the agents' store is unreachable ({type(e).__name__}: {e})",
                           node_rank=0, kind="lost") from None

    def barrier(self, name: str, timeout_s: float | None = None) -> None:
        self.store.set(f"barrier/{name}/{self.node_rank}", "1")
        self.wait_keys([f"barrier/{name}/{i}" for i in range(self.nnodes)], f"every host at '{name}'", timeout_s)

    # ---- liveness -----------------------------------------------------------------------------------
    def close(self) -> None:
        """The server (node 0) stops answering; call once every host said goodbye."""
        if self.server is not None:
            self.server.close()

    def start_heartbeat(self) -> None:
        client = StoreClient(self.host, self.port, self._secret, 30.0)

        def beat():
            n = 0
            while not self._hb_stop.is_set():
                try:
                    client.set(f"hb/{self.node_rank}", str(n))
                except Exception:
                    return  # the store is gone: node-rank 0 ended; the main thread finds out on its own
                n += 1
                self._hb_stop.wait(HEARTBEAT_S)

        self._hb_thread = threading.Thread(target=beat, daemon=True, name="agent heartbeat")
        self._hb_thread.start()

    def stop_heartbeat(self) -> None:
        self._hb_stop.set()

    def report_failure(self, message: str) -> None:
        try:
            self.store.set(f"fail/{self.node_rank}", message)
            self.abort(self.node_rank, "failed", message)
        except Exception:
            pass

    def abort(self, node_rank: int, kind: str, message: str) -> None:
        """Tell every agent to stop; the first reason stands."""
        self.store.compare_set("abort", "", json.dumps({"node_rank": node_rank, "kind": kind, "message": message}))

    def aborted(self) -> dict | None:
        """The abort every agent must follow (one round trip), or None."""
        if not self._check(["abort"]):
            return None
        try:
            return self.get_record("abort", {"node_rank": int, "kind": str, "message": str})
        except HarnessError as e:  # a stop all the same: the reason says what was wrong with it
            return {"node_rank": -1, "kind": "failed", "message": str(e)}

    def peer_status(self) -> dict[int, tuple[str, str]]:
        """Peers that failed or went silent: node rank -> (failed|lost, message)."""
        try:
            return self._peer_status()
        except HarnessError:
            raise
        except Exception as e:  # the store itself is gone: it lived in node-rank 0's agent
            if self.node_rank == 0:
                raise
            return {0: ("lost", f"the agents' store on node-rank 0 is unreachable ({type(e).__name__}: {e})")}

    def _peer_status(self) -> dict[int, tuple[str, str]]:
        out: dict[int, tuple[str, str]] = {}
        now = time.monotonic()
        for i in range(self.nnodes):
            if i == self.node_rank:
                continue
            if self.store.check([f"fail/{i}"]):
                out[i] = ("failed", self.store.get(f"fail/{i}").decode(errors="replace"))
                continue
            if self.store.check([f"bye/{i}"]):
                continue
            value = self.store.get(f"hb/{i}").decode() if self.store.check([f"hb/{i}"]) else ""
            last = self._seen.get(i)
            if last is None or last[0] != value:
                self._seen[i] = (value, now)
            elif now - last[1] > LOST_AFTER_S and (value or now - self._started > LOST_AFTER_S * 4):
                out[i] = ("lost", f"no heartbeat for {now - last[1]:.0f}s (agent killed, or the host went down)")
        return out

    def raise_if_peer_down(self) -> None:
        """Node 0 reads every heartbeat (its store calls stay on the host) and raises `abort` for all; the
        others look at `abort` alone. PeerLost when another host failed or was lost."""
        if self.node_rank == 0:
            down = self.peer_status()
            if down:
                i, (kind, msg) = sorted(down.items(), key=lambda kv: kv[1][0] != "lost")[0]
                self.abort(i, kind, msg)
        a = self.aborted()
        if a and a["node_rank"] != self.node_rank:
            raise PeerLost(f"host {a['node_rank']} (node-rank {a['node_rank']}) {a['kind']}: {a['message']}",
                           node_rank=a["node_rank"], kind=a["kind"])

    # ---- files --------------------------------------------------------------------------------------
    def put_files(self, tag: str, root: Path, paths: list[Path]) -> None:
        """Ship files (paths relative to `root`) under `tag`; the manifest goes last."""
        manifest: list[dict[str, object]] = []
        for rel in paths:
            data = (root / rel).read_bytes()
            chunks = max(1, -(-len(data) // CHUNK))
            for c in range(chunks):
                chunk = data[c * CHUNK:(c + 1) * CHUNK]
                self.store.set(f"file/{tag}/{self.node_rank}/{len(manifest)}/{c}", chunk)
            manifest.append({"path": str(rel), "chunks": chunks})
        self.set_json(f"files/{tag}/{self.node_rank}", manifest)

    def take_files(self, tag: str, node_rank: int, dest: Path) -> list[str]:
        """Write a peer's shipped files under `dest`; their relative paths."""
        out = []
        manifest = self.get_json(f"files/{tag}/{node_rank}")
        if not isinstance(manifest, list):
            raise HarnessError(f"host {node_rank} shipped a manifest that is not a list (files/{tag}): refused")
        for i, entry in enumerate(manifest):
            rel = _shipped_path(entry, node_rank)
            data = b"".join(self.store.get(f"file/{tag}/{node_rank}/{i}/{c}") for c in range(entry["chunks"]))
            # As every write into the run folder: no link on the way or at the file is followed (runfiles.py).
            runfiles.write_bytes(dest, rel, data)
            for c in range(entry["chunks"]):
                self.store.delete_key(f"file/{tag}/{node_rank}/{i}/{c}")
            out.append(str(rel))
        return out


# What a host ships: its workers' records and logs, in the worker folders below the run folder.
_SHIPPED_SUFFIXES = (".jsonl", ".log")


def _shipped_path(entry, node_rank: int) -> Path:
    """A manifest entry's relative path, or HarnessError naming it: relative, no `..`, no control character,
    a record or log below workers/ (what _ship sends), a positive chunk count."""
    if not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or not isinstance(entry.get("chunks"), int) \
            or not 0 < entry["chunks"] <= 1024:
        raise HarnessError(f"host {node_rank} shipped a malformed manifest entry {str(entry)[:200]!r}: refused")
    text = entry["path"]
    rel = Path(text)
    if (rel.is_absolute() or any(p in ("..", ".", "") for p in text.split("/")) or rel.parts[:1] != ("workers",)
            or rel.suffix not in _SHIPPED_SUFFIXES or any(not c.isprintable() for c in text)):
        raise HarnessError(f"host {node_rank} shipped a file outside its worker folders: {text[:200]!r}: refused")
    return rel
