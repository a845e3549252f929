"""The agents' store (multihost/channel.py, store.py) answers only peers holding the run's secret, listens on the
address it is given alone, refuses altered frames, and what it hands an agent is checked before it reaches the
filesystem: the run's name, the shipped files' paths (issue 51, item 1). Over loopback; the netns test shows
the same across hosts (tests/integration/netns/test_multihost_security.py)."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import pytest

from distro_bench.errors import HarnessError, InputError
from distro_bench.multihost import secret as secret_mod
from distro_bench.multihost.channel import NONCE, TAG, ChannelError, StoreClient, StoreServer
from distro_bench.multihost.runfolder import checked_run as _checked_run
from distro_bench.multihost.runfolder import safe_run_name
from distro_bench.multihost.store import AgentStore
from tests.helpers import free_port

SECRET = b"a" * 64
OTHER = b"b" * 64


@pytest.fixture
def server():
    refused: list[str] = []
    s = StoreServer("127.0.0.1", free_port(), SECRET, refused=refused.append)
    s.refused_lines = refused  # type: ignore[attr-defined]
    yield s
    s.close()


def test_a_peer_with_the_secret_reads_and_writes(server):
    host, port = server.address
    c = StoreClient(host, port, SECRET, 5)
    c.set("run", "x")
    assert c.get("run") == b"x" and c.check(["run"]) and not c.check(["run", "nope"])
    assert c.compare_set("abort", "", "first") == b"first" and c.compare_set("abort", "", "second") == b"first"
    assert c.delete_key("run") and not c.check(["run"])
    c.set("bin", b"\x00\xff" * 10)
    assert c.get("bin") == b"\x00\xff" * 10
    c.close()


def test_a_wrong_secret_is_refused_and_named(server):
    host, port = server.address
    with pytest.raises(ChannelError, match="secret differs"):
        StoreClient(host, port, OTHER, 5)
    assert any("does not hold this run's secret" in line for line in server.refused_lines), server.refused_lines


def test_a_raw_client_reads_nothing_and_writes_nothing(server):
    """No handshake (a TCPStore client, or anything else that connects): the server says nothing but its nonce."""
    host, port = server.address
    good = StoreClient(host, port, SECRET, 5)
    good.set("run", "the scenario")
    with socket.create_connection((host, port), timeout=5) as raw:
        assert len(raw.recv(NONCE)) == NONCE
        raw.sendall(b"\x00" * (NONCE + TAG) + b"set run attacker")
        raw.settimeout(5)
        try:
            answer = raw.recv(4096)
        except ConnectionResetError:  # closed with our bytes unread
            answer = b""
        assert answer == b""  # closed, nothing served
    assert good.get("run") == b"the scenario"


def test_an_altered_frame_is_refused(server):
    host, port = server.address
    c = StoreClient(host, port, SECRET, 5)
    sess = c._session
    body = b'{"op": "set", "key": "run"}'
    body = struct.pack(">I", len(body)) + body + b"evil"
    sess.sock.sendall(struct.pack(">I", len(body)) + b"\x00" * TAG + body)  # a tag that is not the session's
    with pytest.raises((ConnectionError, OSError)):
        sess.recv()
    assert any("failed authentication" in line for line in server.refused_lines), server.refused_lines


def test_the_server_listens_on_its_address_only():
    port = free_port()
    s = StoreServer("127.0.0.1", port, SECRET)
    try:
        assert s.sock.getsockname()[0] == "127.0.0.1"
        # Another loopback address of this host reaches nothing on that port.
        with pytest.raises(OSError), socket.create_connection(("127.0.0.2", port), timeout=2):
            pass
    finally:
        s.close()


def test_agent_store_node0_and_peer(tmp_path):
    port = free_port()
    s0 = AgentStore("127.0.0.1", port, 0, 2, 10, SECRET)
    s1 = AgentStore("127.0.0.1", port, 1, 2, 10, SECRET)
    try:
        s1.set_json("host/1", {"ok": 1})
        assert s0.get_json("host/1") == {"ok": 1}
        with pytest.raises(HarnessError, match="secret"):
            AgentStore("127.0.0.1", port, 1, 2, 5, OTHER)
    finally:
        s0.close()


@pytest.mark.parametrize("path", ["/tmp/x.jsonl", "workers/../../x.jsonl", "workers/a/../../../x.log", "x.jsonl",
                                  "workers/a/scenario.yaml", "workers/a/\x1b[2Jx.log", "workers//a.log"])
def test_take_files_refuses_paths_outside_the_worker_folders(tmp_path, path):
    port = free_port()
    s0 = AgentStore("127.0.0.1", port, 0, 2, 10, SECRET)
    try:
        s0.store.set("file/0/a/1/0/0", b"attacker")
        s0.set_json("files/0/a/1", [{"path": path, "chunks": 1}])
        with pytest.raises(HarnessError, match="refused"):
            s0.take_files("0/a", 1, tmp_path / "run")
        assert not any(p.is_file() for p in tmp_path.rglob("*")), list(tmp_path.rglob("*"))
    finally:
        s0.close()


def test_take_files_does_not_follow_a_link(tmp_path):
    port = free_port()
    s0 = AgentStore("127.0.0.1", port, 0, 2, 10, SECRET)
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    run = tmp_path / "run"
    (run / "workers" / "a").mkdir(parents=True)
    os.symlink(victim, run / "workers" / "a" / "rank1.jsonl")
    try:
        s0.store.set("file/0/a/1/0/0", b"attacker")
        s0.set_json("files/0/a/1", [{"path": "workers/a/rank1.jsonl", "chunks": 1}])
        with pytest.raises(HarnessError):
            s0.take_files("0/a", 1, run)
        assert victim.read_text() == "root's file\n"
        # A good one lands where it belongs.
        s0.set_json("files/0/a/1", [{"path": "workers/a/rank2.jsonl", "chunks": 1}])
        assert s0.take_files("0/a", 1, run) == ["workers/a/rank2.jsonl"]
        assert (run / "workers" / "a" / "rank2.jsonl").read_bytes() == b"attacker"
    finally:
        s0.close()


@pytest.mark.parametrize("name", ["/tmp/evil", "../evil", "..", ".", "", "a/b", "a\\b", "evil\x1b]0;x\x07", "a\nb",
                                  "x" * 300])
def test_a_run_name_that_is_not_a_plain_folder_name_is_refused(name):
    with pytest.raises(HarnessError, match="refused"):
        safe_run_name(name)


def test_the_run_record_is_checked_field_by_field():
    good = {"name": "ci-smoke-20261206-050000", "path": "/out/x", "token": "t", "scenario": "s",
            "scenario_sha256": "h", "placement": "0;1"}
    assert _checked_run(good) == good
    with pytest.raises(HarnessError, match=r"run\.scenario_sha256"):
        _checked_run({k: v for k, v in good.items() if k != "scenario_sha256"})
    with pytest.raises(HarnessError, match="not a plain folder name"):
        _checked_run({**good, "name": "/etc"})
    with pytest.raises(HarnessError, match="not a record"):
        _checked_run(["run"])


def test_the_secret_comes_from_a_private_file_or_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(secret_mod.ENV, raising=False)
    made, generated = secret_mod.resolve(None, 0)
    assert generated and len(made) == 64
    with pytest.raises(InputError, match="--node-rank 1: no secret"):
        secret_mod.resolve(None, 1)
    f = tmp_path / "s"
    f.write_text("c" * 40 + "\n")
    f.chmod(0o644)
    with pytest.raises(InputError, match="readable by others"):
        secret_mod.resolve(f, 1)
    f.chmod(0o600)
    assert secret_mod.resolve(f, 1) == (b"c" * 40, False)
    f.write_text("short\n")
    with pytest.raises(InputError, match="at least 32"):
        secret_mod.resolve(f, 1)
    monkeypatch.setenv(secret_mod.ENV, "d" * 32)
    assert secret_mod.resolve(None, 3) == (b"d" * 32, False)


def test_a_missing_path_is_not_a_secret_file(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        secret_mod.read_file(Path(tmp_path / "none"))


@pytest.mark.parametrize("name, path", [("/tmp/dbench-evil", "/tmp/dbench-evil"),
                                        ("../../dbench-evil", "/tmp/dbench-evil"),
                                        ("ok-name", "/tmp/dbench-evil")])
def test_an_overwritten_run_key_never_reaches_outside_out(tmp_path, name, path):
    """`run` overwritten by someone holding the secret (a compromised host): a name that is a path is refused;
    a plain name with a path elsewhere is written below this host's --out only, and a scenario that is not the
    one hashed is refused before any worker loads it."""
    import hashlib

    import yaml

    from distro_bench.multihost.agent import Agent, NodeOptions
    from distro_bench.run.lifecycle import RunLifecycle
    from distro_bench.run.overrides import RunSettings
    from distro_bench.scenario.loading import load_scenario
    from distro_bench.scenario.placement import from_scenario
    from tests.helpers import tiny_scenario_dict

    scen = tmp_path / "s.yaml"
    scen.write_text(yaml.safe_dump(tiny_scenario_dict()))
    out = tmp_path / "out"
    agent = Agent(NodeOptions(scenario=scen, rdzv="127.0.0.1:1", node_rank=1, nnodes=2,
                              settings=RunSettings(out=out)))
    agent.scenario = load_scenario(scen)
    agent.placement = from_scenario(agent.scenario, 2, None)
    agent.life = RunLifecycle(agent.scenario, "multihost", host=1)
    port = free_port()
    s0 = AgentStore("127.0.0.1", port, 0, 2, 10, SECRET)
    agent.store = AgentStore("127.0.0.1", port, 1, 2, 10, SECRET)
    text = "name: attacker\n"
    try:
        s0.set_json("run", {"name": name, "path": path, "token": "t", "scenario": text,
                            "scenario_sha256": hashlib.sha256(b"something else").hexdigest(),
                            "placement": agent.placement.encode()})
        with pytest.raises(HarnessError, match="refused"):
            agent._open_run_folder()
    finally:
        s0.close()
    assert not Path("/tmp/dbench-evil").exists() and not (tmp_path / "dbench-evil").exists()
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != scen]
    assert all(out in p.parents for p in written), written


def test_the_ssh_backend_carries_the_secret_in_its_private_archive_not_on_a_command_line():
    import io
    import tarfile

    from distro_bench.backends.ssh import agent_argv
    from distro_bench.run.remote import SECRET_FILE, scenario_archive
    from distro_bench.scenario.loading import scenario_from_dict
    from tests.helpers import tiny_scenario_dict

    made = secret_mod.make()
    with tarfile.open(fileobj=io.BytesIO(scenario_archive(scenario_from_dict(tiny_scenario_dict()), made))) as tar:
        info = tar.getmember(SECRET_FILE)
        assert info.mode == 0o600 and tar.extractfile(info).read().decode().strip() == made  # type: ignore[union-attr]
    # agent_argv reads a host's python, node rank and interface (a ResolvedHost) and nothing else of it.
    h = type("H", (), {"python": "python3", "node_rank": 1, "iface": "eth0"})()
    argv = agent_argv(h, workdir="/tmp/dbench-ssh.X", scenario="scenario.yaml", rdzv="h:1", nnodes=2,  # type: ignore[arg-type]
                      placement="0;1", extra=[], secret=SECRET_FILE)
    assert argv[argv.index("--secret-file") + 1] == f"/tmp/dbench-ssh.X/{SECRET_FILE}"
    assert made not in " ".join(argv)
