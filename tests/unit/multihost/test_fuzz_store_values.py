"""Issue 51, item 9 (its share for the agents' store): forged values in the agents' store, as a host holding the
secret could write them, and forged frames from an authenticated peer. Every reader either takes the value or
refuses it with a HarnessError that names it: never another exception (an internal error), never a file
outside the run folder's worker folders, and the server keeps serving the others.

Seeded (hypothesis, derandomized): the same cases every run. CI runs DISTRO_BENCH_FUZZ_CASES (default 200) per
reader; the full run is `DISTRO_BENCH_FUZZ_CASES=2000 .venv/bin/python -m pytest tests/unit/multihost/test_fuzz_store_values.py`.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from distro_bench.errors import HarnessError
from distro_bench.multihost.channel import StoreClient, StoreServer
from distro_bench.multihost.runfolder import checked_run as _checked_run
from distro_bench.multihost.runfolder import checked_worker_uid as _checked_worker_uid
from distro_bench.multihost.runfolder import safe_run_name
from distro_bench.multihost.store import AgentStore
from tests.helpers import free_port

# An exception in a server thread (a connection's handler dying) fails the test, not only warns.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")

CASES = int(os.environ.get("DISTRO_BENCH_FUZZ_CASES", "200"))
SECRET = b"f" * 64
FUZZ = settings(max_examples=CASES, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Hostile text: separators, dot names, terminal escapes, bidi overrides, NUL, long names.
HOSTILE_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["..", ".", "/", "/etc/passwd", "../../x", "a/../../b", "workers/../../x.log", "\x1b]0;x\x07",
                     "\u202eevil", "a\x00b", "x" * 300, "workers/a/rank0.jsonl", "workers/a\\..\\b.log", "~root",
                     "workers/a/rank0.jsonl/..", "workers/./a.log"]),
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70) | st.floats() | HOSTILE_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(HOSTILE_TEXT, inner, max_size=4),
    max_leaves=12,
)
RUN_KEYS = ("name", "path", "token", "scenario", "scenario_sha256", "placement", "worker_uid")


@pytest.fixture(scope="module")
def store():
    s = AgentStore("127.0.0.1", free_port(), 0, 2, 10, SECRET)
    yield s
    s.close()


@FUZZ
@seed(51)
@given(st.one_of(JSON, st.fixed_dictionaries({k: st.one_of(JSON, HOSTILE_TEXT) for k in RUN_KEYS})))
def test_a_forged_run_record_is_taken_or_refused_by_name(run):
    try:
        checked = _checked_run(run)
    except HarnessError as e:
        assert "refused" in str(e)
        return
    # Taken: its name is one plain folder name, so out/<name> is a child of out.
    out = Path("/nonexistent-out")
    assert (out / checked["name"]).parent == out and checked["name"] not in (".", "..")
    try:
        _checked_worker_uid(checked.get("worker_uid"))
    except HarnessError as e:
        assert "refused" in str(e) or "account" in str(e)


@FUZZ
@seed(52)
@given(HOSTILE_TEXT)
def test_a_run_name_is_a_plain_name_or_refused(name):
    try:
        got = safe_run_name(name)
    except HarnessError:
        return
    assert "/" not in got and got not in (".", "..") and all(c.isprintable() for c in got)


@FUZZ
@seed(53)
@given(manifest=JSON, data=st.binary(max_size=64))
def test_a_forged_manifest_writes_only_below_workers_or_is_refused(store, manifest, data):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        dest = root / "run"
        dest.mkdir()
        store.store.set("file/0/a/1/0/0", data)
        store.store.set("files/0/a/1", json.dumps(manifest))
        try:
            store.take_files("0/a", 1, dest)
        except HarnessError:
            pass
        written = [p for p in root.rglob("*") if not p.is_dir()]
        assert all((dest / "workers") in p.parents for p in written), written


@FUZZ
@seed(54)
@given(st.one_of(JSON.map(json.dumps), st.binary(max_size=40).map(lambda b: b.decode("latin-1"))))
def test_a_forged_abort_or_record_is_read_as_a_stop_or_refused(store, value):
    store.store.set("abort", value)
    a = store.aborted()  # never raises: a malformed abort is a stop all the same, saying what was wrong
    assert isinstance(a, dict) and isinstance(a["node_rank"], int) and isinstance(a["message"], str)
    store.store.delete_key("abort")
    store.store.set("host/1", value)
    try:
        rec = store.get_record("host/1", {"addr": str, "rtt_port": int})
    except HarnessError as e:
        assert "host/1" in str(e)
    else:
        assert isinstance(rec["addr"], str) and isinstance(rec["rtt_port"], int)


@FUZZ
@seed(55)
@given(st.binary(max_size=300))
def test_forged_frames_from_an_authenticated_peer_never_stop_the_server(store, body):
    """A peer that holds the secret and sends any body, correctly tagged: the server answers or drops that
    connection; the others' connections work on."""
    host, port = store.host, store.port
    c = StoreClient(host, port, SECRET, 5)
    try:
        c._session.sock.settimeout(5)
        c._session.send(body)
        try:
            c._session.recv()
        except (OSError, HarnessError, struct.error):
            pass
    finally:
        c.close()
    store.store.set("still", "here")
    assert store.store.get("still") == b"here"


@FUZZ
@seed(56)
@given(st.binary(max_size=200))
def test_bytes_from_a_stranger_never_stop_the_server(store, junk):
    with socket.create_connection((store.host, store.port), timeout=5) as raw:
        raw.settimeout(5)
        try:
            raw.recv(32)
            raw.sendall(junk)
        except OSError:
            pass
    store.store.set("still", "here")
    assert store.store.get("still") == b"here"


def test_the_server_counts_nothing_it_was_not_asked_by_an_authenticated_peer():
    """Sanity of the fixtures above: a fresh server holds nothing, and a wrong secret writes nothing."""
    s = StoreServer("127.0.0.1", free_port(), SECRET)
    try:
        with pytest.raises(HarnessError):
            StoreClient(*s.address, b"g" * 64, 3)
        assert s._data == {}
    finally:
        s.close()
