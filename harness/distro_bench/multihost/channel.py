"""The agents' key-value store on the wire: a small server in node-rank 0's agent, bound to one address, that
answers only peers holding the run's secret (multihost/secret.py), and the client every agent uses.

Why not torch's TCPStore, which the agents used before: it has no authentication at all, and it lists its keys
to anyone who connects (`list_keys`), so a secret key prefix hides nothing; anyone who reached the port read
the run's scenario, set `abort`, or overwrote `run`. Why hand-written and not a library: the stdlib offers
no pre-shared-key TLS before Python 3.13 (`SSLContext.set_psk_*`, and this project supports 3.11), and
`multiprocessing.connection`'s authkey handshake is HMAC-MD5 in 3.11 and unpickles what it receives. What is
here is the standard construction with the stdlib's `hmac` and `secrets`, in one place:

- handshake: the server sends a 32-byte nonce Ns; the client answers Nc and HMAC-SHA256(secret, "client"|Ns|Nc);
  the server checks it (`hmac.compare_digest`) or closes the connection and names the peer; it then proves
  itself with HMAC(secret, "server"|Ns|Nc), so an agent never takes a scenario from an impostor of node 0;
- every frame after it, request or answer, carries HMAC-SHA256(K, direction|sequence number|body) with the
  session key K = HMAC(secret, "session"|Ns|Nc): a key or a value altered, replayed or reordered on the path
  is refused (the connection closes, and the error names the frame).

What it does not do: encrypt. Someone who captures the traffic on the path reads the values (the scenario,
host descriptions, worker records); someone who can only connect reads and writes nothing. docs/scaling-out.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable

from distro_bench.errors import HarnessError

NONCE = 32
TAG = 32
# A frame holds one request or answer: a key and at most one file chunk (store.py CHUNK, 4 MiB) plus a header.
MAX_FRAME = 8 * 1024 * 1024
HANDSHAKE_S = 10.0  # a peer that does not finish the handshake in this long is dropped (it holds a thread)
_LEN = struct.Struct(">I")


class ChannelError(HarnessError):
    """The agents' store refused a peer or a frame (wrong secret, altered frame), or could not be reached."""


def _mac(key: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("the connection closed")
        buf += chunk
    return bytes(buf)


class _Session:
    """One authenticated connection: frames tagged with the session key and numbered per direction."""

    def __init__(self, sock: socket.socket, key: bytes, mine: bytes, theirs: bytes):
        self.sock, self.key, self.mine, self.theirs = sock, key, mine, theirs
        self.sent = self.received = 0

    def send(self, body: bytes) -> None:
        tag = _mac(self.key, self.mine, self.sent.to_bytes(8, "big"), body)
        self.sent += 1
        self.sock.sendall(_LEN.pack(len(body)) + tag + body)

    def recv(self) -> bytes:
        (n,) = _LEN.unpack(_recv_exact(self.sock, _LEN.size))
        if n > MAX_FRAME:
            raise ChannelError(f"a frame of {n} bytes (at most {MAX_FRAME}): refused")
        tag = _recv_exact(self.sock, TAG)
        body = _recv_exact(self.sock, n)
        if not hmac.compare_digest(tag, _mac(self.key, self.theirs, self.received.to_bytes(8, "big"), body)):
            raise ChannelError(f"frame {self.received} failed authentication (altered, replayed or out of order): "
                               "refused")
        self.received += 1
        return body


def _pack(header: dict, payload: bytes = b"") -> bytes:
    h = json.dumps(header).encode()
    return _LEN.pack(len(h)) + h + payload


def _unpack(body: bytes) -> tuple[dict, bytes]:
    (n,) = _LEN.unpack(body[:_LEN.size])
    header = json.loads(body[_LEN.size:_LEN.size + n])
    if not isinstance(header, dict):
        raise ValueError("a frame's header is not an object")
    return header, body[_LEN.size + n:]


class StoreServer:
    """The store itself (node-rank 0): a dict behind a lock, a thread per authenticated peer. `refused(text)`
    hears every peer turned away (its address and why)."""

    def __init__(self, host: str, port: int, secret: bytes, refused: Callable[[str], None] = lambda text: None):
        self.secret, self.refused = secret, refused
        self._data: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))  # this address only, never the wildcard
        self.sock.listen(64)
        self.address = self.sock.getsockname()[:2]
        self._thread = threading.Thread(target=self._accept, daemon=True, name="agents' store")
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn, peer), daemon=True, name=f"store peer {peer[0]}").start()

    def _handshake(self, conn: socket.socket, peer) -> _Session | None:
        conn.settimeout(HANDSHAKE_S)
        ns = secrets.token_bytes(NONCE)
        conn.sendall(ns)
        got = _recv_exact(conn, NONCE + TAG)
        nc, proof = got[:NONCE], got[NONCE:]
        if not hmac.compare_digest(proof, _mac(self.secret, b"client", ns, nc)):
            self.refused(f"refused a connection from {peer[0]}:{peer[1]}: it does not hold this run's secret")
            return None
        conn.sendall(_mac(self.secret, b"server", ns, nc))
        conn.settimeout(None)
        return _Session(conn, _mac(self.secret, b"session", ns, nc), mine=b"S", theirs=b"C")

    def _serve(self, conn: socket.socket, peer) -> None:
        with conn:
            try:
                session = self._handshake(conn, peer)
                if session is None:
                    return
                while not self._stop.is_set():
                    header, payload = _unpack(session.recv())
                    session.send(self._answer(header, payload))
            except ChannelError as e:
                self.refused(f"dropped the connection from {peer[0]}:{peer[1]}: {e}")
            except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, struct.error):
                return  # the peer went away (an agent ending), or sent what is not a request: that connection ends

    def _answer(self, h: dict, payload: bytes) -> bytes:
        op, key = h["op"], h.get("key")
        with self._lock:
            if op == "set":
                self._data[str(key)] = payload
                return _pack({"ok": True})
            if op == "get":
                value = self._data.get(str(key))
                return _pack({"ok": value is not None}, value or b"")
            if op == "check":
                return _pack({"ok": all(str(k) in self._data for k in h["keys"])})
            if op == "delete":
                return _pack({"ok": self._data.pop(str(key), None) is not None})
            if op == "compare_set":  # as TCPStore's: set when the current value (absent: b"") is `expected`
                expected, desired = payload[:h["split"]], payload[h["split"]:]
                current = self._data.get(str(key), b"")
                if current == expected:
                    self._data[str(key)] = current = desired
                return _pack({"ok": True}, current)
        raise ValueError(f"unknown operation {op!r}")


class StoreClient:
    """A connection to node-rank 0's store, with TCPStore's calls (set, get, check, compare_set, delete_key).
    Connecting retries until `timeout_s` (node 0 may start later); every call then answers or raises."""

    def __init__(self, host: str, port: int, secret: bytes, timeout_s: float):
        self.host, self.port = host, port
        self._lock = threading.Lock()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                sock = socket.create_connection((host, port), timeout=min(30.0, timeout_s))
                break
            except OSError as e:
                if time.monotonic() > deadline:
                    raise ChannelError(f"cannot reach the agents' store at {host}:{port} ({e})") from None
                time.sleep(0.5)
        try:
            ns = _recv_exact(sock, NONCE)
            nc = secrets.token_bytes(NONCE)
            sock.sendall(nc + _mac(secret, b"client", ns, nc))
            try:
                proof = _recv_exact(sock, TAG)
            except ConnectionError:
                raise ChannelError(f"the agents' store at {host}:{port} refused this host: the secret differs from "
                                   "node-rank 0's (--secret-file / DISTRO_BENCH_SECRET)") from None
            if not hmac.compare_digest(proof, _mac(secret, b"server", ns, nc)):
                raise ChannelError(f"the agents' store at {host}:{port} does not hold this run's secret: it is not "
                                   "node-rank 0's agent; refused")
            sock.settimeout(max(60.0, min(timeout_s, 600.0)))
        except BaseException:
            sock.close()
            raise
        self._session = _Session(sock, _mac(secret, b"session", ns, nc), mine=b"C", theirs=b"S")

    def _call(self, header: dict, payload: bytes = b"") -> tuple[dict, bytes]:
        with self._lock:
            self._session.send(_pack(header, payload))
            return _unpack(self._session.recv())

    def set(self, key: str, value: str | bytes) -> None:
        self._call({"op": "set", "key": key}, value.encode() if isinstance(value, str) else value)

    def get(self, key: str) -> bytes:
        h, value = self._call({"op": "get", "key": key})
        if not h["ok"]:
            raise KeyError(key)
        return value

    def check(self, keys: list[str]) -> bool:
        return bool(self._call({"op": "check", "keys": list(keys)})[0]["ok"])

    def delete_key(self, key: str) -> bool:
        return bool(self._call({"op": "delete", "key": key})[0]["ok"])

    def compare_set(self, key: str, expected: str, desired: str) -> bytes:
        e, d = expected.encode(), desired.encode()
        return self._call({"op": "compare_set", "key": key, "split": len(e)}, e + d)[1]

    def close(self) -> None:
        self._session.sock.close()
