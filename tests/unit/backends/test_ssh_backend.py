"""The ssh backend's pieces that need no SSH server: the inventory's validation (each problem names the field, the
value and what is valid), the exact `ssh` argument lists and remote commands (every value quoted), the scripts it
runs on a host (run here with `sh`), the scenario archive, the agent's stream (stdin's end stops it) and the relay
of streams into progress. End to end over real sshd in namespaces: tests/integration/netns/test_ssh_backend.py."""

from __future__ import annotations

import io
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from distro_bench import __version__
from distro_bench.backends.catalog import refuse_unread_options
from distro_bench.backends.inventory import load_inventory
from distro_bench.backends.ssh import FETCH, PREPARE, REMOVE, agent_argv, remote_command, shell_script, ssh_argv
from distro_bench.errors import HarnessError, InputError
from distro_bench.multihost.stream import HostStream
from distro_bench.run.launch import decode, encode
from distro_bench.run.overrides import RunSettings
from distro_bench.run.remote import Relay, RemoteAgent, agent_flags, extract_plain, scenario_archive
from distro_bench.scenario.loading import load_scenario, scenario_from_dict
from tests.helpers import REPO, free_port, tiny_scenario_dict


def inventory(tmp_path: Path, data: dict) -> Path:
    p = tmp_path / "hosts.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


# ---- the inventory ------------------------------------------------------------------------------------------

def test_an_inventory_fills_in_defaults_and_reads_paths_relative_to_itself(tmp_path):
    (tmp_path / "id").write_text("key")
    (tmp_path / "kh").write_text("")
    inv = load_inventory(inventory(tmp_path, {
        "hosts": [{"host": "10.0.0.1", "iface": "eth1"},
                  {"host": "lab-box.local", "address": "10.0.0.2", "iface": "enp3s0", "user": "bob", "port": 2222,
                   "sudo": True}],
        "defaults": {"user": "alice", "key": "id", "python": "/opt/db/.venv/bin/python"},
        "known_hosts": "kh"}))
    h0, h1 = inv.all()
    assert (h0.user, h0.key, h0.port, h0.address, h0.python, h0.sudo) == ("alice", tmp_path / "id", 22, "10.0.0.1",
                                                                          "/opt/db/.venv/bin/python", False)
    assert (h1.user, h1.port, h1.address, h1.sudo, h1.node_rank) == ("bob", 2222, "10.0.0.2", True, 1)
    assert inv.known_hosts == tmp_path / "kh" and inv.rdzv_port == 29400


@pytest.mark.parametrize("data, words", [
    ({"hosts": [{"host": "a"}]}, ["hosts[0].iface: required field is missing"]),
    ({"hosts": [{"host": "a", "iface": "eth0", "port": 70000}]}, ["hosts[0].port", "less than or equal to 65535",
                                                                 "70000"]),
    ({"hosts": [{"host": "-oProxyCommand=x", "iface": "eth0"}]}, ["hosts[0].host", "'-oProxyCommand=x' is not a host",
                                                                 "no leading '-'"]),
    ({"hosts": [{"host": "a", "iface": "eth0; reboot"}]}, ["hosts[0].iface", "should match pattern"]),
    ({"hosts": [{"host": "a", "iface": "eth0"}, {"host": "a", "iface": "eth1"}]},
     ["hosts[1] and hosts[0] are the same host (a port 22)"]),
    ({"hosts": [{"host": "a", "iface": "eth0", "colour": "red"}]}, ["hosts[0].colour: unknown field 'colour'"]),
    ({"hosts": []}, ["hosts: List should have at least 1 item"]),
    ({"hosts": [{"host": "a", "iface": "eth0"}], "defaults": {"user": "Robert'); drop"}}, ["defaults.user",
                                                                                          "should match pattern"]),
    ({"hosts": [{"host": "a", "iface": "eth0", "key": "missing"}]}, ["key: '", "missing' is not a file"]),
    ({"hosts": [{"host": "a", "iface": "eth0"}], "known_hosts": "nope"}, ["known_hosts: 'nope' is not a file"]),
])
def test_a_bad_inventory_names_the_field_the_value_and_what_is_valid(tmp_path, data, words):
    with pytest.raises(InputError) as e:
        load_inventory(inventory(tmp_path, data))
    assert str(e.value).startswith(f"--inventory {tmp_path / 'hosts.yaml'}: ")
    assert all(w in str(e.value) for w in words), str(e.value)


@pytest.mark.parametrize("text, words", [("- a\n- b\n", "expected a mapping with `hosts:`"),
                                         ("hosts: [", "not YAML")])
def test_an_inventory_that_is_not_one_says_so(tmp_path, text, words):
    p = tmp_path / "hosts.yaml"
    p.write_text(text)
    with pytest.raises(InputError, match=words):
        load_inventory(p)


# ---- ssh's command lines -------------------------------------------------------------------------------------

def test_ssh_never_prompts_checks_host_keys_and_takes_one_quoted_command(tmp_path):
    (tmp_path / "id").write_text("key")
    (tmp_path / "kh").write_text("")
    inv = load_inventory(inventory(tmp_path, {"hosts": [{"host": "10.0.0.1", "iface": "eth1", "user": "alice",
                                                         "key": "id"}], "known_hosts": "kh"}))
    h = inv.resolved(0)
    argv = ssh_argv(h, inv, "echo hi")
    assert argv == ["ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=5",
                    "-o", "ServerAliveCountMax=4", "-o", "StrictHostKeyChecking=yes", "-o", "LogLevel=ERROR",
                    "-p", "22", "-o", f"UserKnownHostsFile={tmp_path / 'kh'}", "-i", str(tmp_path / "id"),
                    "-o", "IdentitiesOnly=yes", "-l", "alice", "--", "10.0.0.1", "echo hi"]
    relaxed = inv.model_copy(update={"strict_host_keys": False})
    assert "StrictHostKeyChecking=accept-new" in ssh_argv(h, relaxed, "x")


def test_every_value_in_a_remote_command_is_quoted():
    hostile = ["/opt/my venv/bin/python", "$(reboot)", "a;b", "it's", "`id`", "--x"]
    cmd = remote_command(hostile)
    assert shlex.split(cmd) == hostile  # the remote shell reads back exactly the arguments
    assert shlex.split(remote_command(["python3", "-V"], sudo=True)) == ["sudo", "-n", "--", "python3", "-V"]
    out = subprocess.run(["sh", "-c", remote_command(["printf", "%s|", *hostile])], capture_output=True, text=True)
    assert out.stdout == "|".join(hostile) + "|"  # run by a real shell: nothing expanded, nothing split


def test_the_agent_command_is_distro_bench_node_streaming(tmp_path):
    inv = load_inventory(inventory(tmp_path, {"hosts": [{"host": "h0", "iface": "eth1"}, {"host": "h1", "iface": "eth2"}]}))
    argv = agent_argv(inv.resolved(1), workdir="/tmp/dbench-ssh.X", scenario="scenario.yaml", rdzv="h0:29400",
                      nnodes=2, placement="0,1;2,3", extra=["--no-measure"])
    assert argv == ["python3", "-u", "-m", "distro_bench.cli", "node", "/tmp/dbench-ssh.X/scenario.yaml", "--rdzv",
                    "h0:29400", "--node-rank", "1", "--nnodes", "2", "--placement", "0,1;2,3", "--iface", "eth2",
                    "--out", "/tmp/dbench-ssh.X/results", "--stream", "--no-measure"]
    assert agent_flags(RunSettings()) == []
    assert agent_flags(RunSettings(allow_unemulated=True, measure_links=False, collective_timeout_s=30)) == [
        "--allow-unemulated", "--no-measure", "--collective-timeout", "30"]


# ---- the scripts a host runs (here, with sh) -----------------------------------------------------------------

def test_prepare_unpacks_into_a_private_folder_and_says_the_version_fetch_and_remove_undo_it(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("scenario.yaml")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"x: 1"[:3]))
    env = {**os.environ, "PYTHONPATH": str(REPO / "harness")}
    r = subprocess.run(shlex.split(shell_script(PREPARE, str(tmp_path), sys.executable)), input=buf.getvalue(),
                       capture_output=True, env=env, check=True)
    workdir, version = r.stdout.decode().split()
    assert Path(workdir).parent == tmp_path and Path(workdir).name.startswith("dbench-ssh.")
    assert (Path(workdir) / "scenario.yaml").read_bytes() == b"x: "
    assert version == __version__ and oct(Path(workdir).stat().st_mode & 0o777) == "0o700"
    (Path(workdir) / "results" / "run-1").mkdir(parents=True)
    (Path(workdir) / "results" / "run-1" / "status.json").write_text("{}")
    r = subprocess.run(shlex.split(shell_script(FETCH, f"{workdir}/results", "run-1")), capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(r.stdout)) as tar:
        assert sorted(tar.getnames()) == ["run-1", "run-1/status.json"]
    # REMOVE takes only a folder PREPARE made
    assert subprocess.run(shlex.split(shell_script(REMOVE, str(tmp_path)))).returncode == 2 and tmp_path.exists()
    subprocess.run(shlex.split(shell_script(REMOVE, workdir)), check=True)
    assert not Path(workdir).exists()


def test_prepare_names_each_method_of_another_distribution_the_host_cannot_load(tmp_path):
    # Issue 47: a method from outside the project must be importable on every host; the host says which is not.
    env = {**os.environ, "PYTHONPATH": str(REPO / "harness")}
    r = subprocess.run(shlex.split(shell_script(PREPARE, str(tmp_path), sys.executable, "gone.pkg:Method",
                                                "distro_bench.train.optim.distro:DisTrO")),
                       input=_empty_tar(), capture_output=True, env=env, check=True)
    lines = r.stdout.decode().splitlines()
    assert lines[1] == __version__
    assert lines[2:] == [("method-missing: optimizer 'gone.pkg:Method': module 'gone' cannot be imported here (is its "
                         "package installed in this environment?)")]


def _empty_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w"):
        pass
    return buf.getvalue()


def test_prepare_fails_with_the_folder_named_when_the_python_has_no_distro_bench(tmp_path):
    r = subprocess.run(shlex.split(shell_script(PREPARE, str(tmp_path), "/nonexistent/python")), input=b"",
                       capture_output=True)
    assert r.returncode != 0 and r.stdout.decode().split()[0].startswith(str(tmp_path / "dbench-ssh."))


# ---- what travels ------------------------------------------------------------------------------------------------

def test_the_archive_holds_the_scenario_as_resolved_here_and_its_corpus(tmp_path, write_scenario):
    s = load_scenario(REPO / "scenarios" / "ci-smoke.yaml")
    with tarfile.open(fileobj=io.BytesIO(scenario_archive(s))) as tar:
        assert tar.getnames() == ["scenario.yaml"]
        for member in tar:
            extract_plain(tar, member, tmp_path / "a")
    assert load_scenario(tmp_path / "a" / "scenario.yaml").resolved_dict() == s.resolved_dict()
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "corpus.txt").write_text("hello world " * 2000)
    d = tiny_scenario_dict()
    d["data"]["corpus"] = "texts/corpus.txt"
    s2 = load_scenario(write_scenario(d))
    with tarfile.open(fileobj=io.BytesIO(scenario_archive(s2))) as tar:
        assert tar.getnames() == ["scenario.yaml", "texts/corpus.txt"]


# ---- the agent's stream ---------------------------------------------------------------------------------------------

def test_the_stream_passes_records_on_and_stdin_closing_stops_the_agent(tmp_path):
    r, w = os.pipe()
    out, stopped = io.StringIO(), []
    s = HostStream(1, out=out, stdin_fd=r, on_eof=lambda: stopped.append(True))
    s.start(lambda: "running")
    s.begin("adamw", 0, tmp_path, [2], total_steps=5)
    (tmp_path / "rank2.jsonl").write_text('{"type": "step", "step": 0}\n{"type": "st')  # the 2nd still being written
    (tmp_path / "rank2.hb").write_text("0 compute 1.0")
    s.pump()
    s.finish(0)
    assert not stopped
    os.close(w)
    deadline = time.monotonic() + 5
    while not stopped and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stopped
    s.close("incomplete", "interrupted", tmp_path)
    os.close(r)
    events = [decode(x) for x in out.getvalue().splitlines()]
    kinds = [e.event for e in events if e]
    assert kinds[0] == "heartbeat" and kinds[-1] == "end"
    assert [k for k in kinds if k != "heartbeat"] == ["start", "record", "finish", "end"]
    rec = next(e for e in events if e and e.event == "record")
    assert rec.node_rank == 1 and rec.fields == {"optimizer": "adamw", "seed": 0, "record": {"type": "step", "step": 0}}
    assert decode("not json") is None and decode('{"event": "other", "node_rank": 0}') is None


class Sink:
    def __init__(self):
        self.calls = []

    def note(self, text): self.calls.append(("note", text))
    def start(self, optimizer, total): self.calls.append(("start", optimizer, total))
    def step(self, optimizer, record): self.calls.append(("step", optimizer, record["step"], record["ranks"]))
    def finish(self, optimizer): self.calls.append(("finish", optimizer))


def test_the_relay_joins_every_hosts_records_into_one_step_as_run_shows_it(tmp_path):
    s = scenario_from_dict(tiny_scenario_dict(workers=[{"count": 2}]))
    inv = load_inventory(inventory(tmp_path, {"hosts": [{"host": "h0", "iface": "e"}, {"host": "h1", "iface": "e"}]}))
    agents = [RemoteAgent(h, inv, "/tmp/dbench-ssh.X") for h in inv.all()]
    sink = Sink()
    relay = Relay(sink, s, 2)
    step = {"type": "step", "step": 0, "step_time_s": 1.0, "loss": 2.0, "payload_tx_bytes": 1, "payload_rx_bytes": 1}
    lines = [encode("start", 0, optimizer="adamw", seed=0, total_steps=3),
             encode("start", 1, optimizer="adamw", seed=0, total_steps=3),
             encode("record", 0, optimizer="adamw", seed=0, record={**step, "rank": 0}),
             encode("note", 1, text="host 1: shaped eth0"),
             encode("record", 1, optimizer="adamw", seed=0, record={**step, "rank": 1}),
             encode("finish", 0, optimizer="adamw", seed=0, rc=0), encode("finish", 1, optimizer="adamw", seed=0, rc=0),
             encode("end", 1, state="complete", reason=None, run_dir=None)]
    for line in lines:
        ev = decode(line)
        assert ev is not None
        relay.handle(agents[ev.node_rank], ev)
    assert sink.calls == [("start", "adamw", 3), ("note", "host 1: shaped eth0"), ("step", "adamw", 0, 2),
                          ("finish", "adamw")]
    assert agents[1].end == {"state": "complete", "reason": None, "run_dir": None}


# ---- choosing it ------------------------------------------------------------------------------------------------

def test_the_inventory_belongs_to_the_ssh_backend_only(cli, tmp_path):
    with pytest.raises(InputError, match=r"--inventory: the netns backend does not use it .*applies to ssh"):
        refuse_unread_options("netns", {"inventory": Path("hosts.yaml")})
    with pytest.raises(InputError, match="--image: the ssh backend does not use it"):
        refuse_unread_options("ssh", {"image": "x"})
    r = cli("run", "scenarios/ci-smoke.yaml", "--inventory", "hosts.yaml")
    assert r.exit_code == 2 and "which auto never picks" in r.output and "add --backend ssh" in r.output, r.output
    r = cli("run", "scenarios/ci-smoke.yaml", "--backend", "ssh")
    assert r.exit_code == 2 and "--backend ssh needs --inventory HOSTS.yaml" in r.output, r.output
    bad = inventory(tmp_path, {"hosts": [{"host": "a"}]})
    r = cli("run", "scenarios/ci-smoke.yaml", "--backend", "ssh", "--inventory", bad, "--out", tmp_path / "r")
    assert r.exit_code == 2 and "hosts[0].iface: required field is missing" in r.output, r.output
    assert "Traceback" not in r.output and not (tmp_path / "r").exists()
    three = inventory(tmp_path, {"hosts": [{"host": f"h{i}", "iface": "e"} for i in range(3)]})
    r = cli("run", "scenarios/ci-smoke.yaml", "--backend", "ssh", "--inventory", three)
    assert r.exit_code == 2 and "--inventory lists 3 hosts: --nnodes: 3 hosts cannot share" in r.output, r.output


def test_a_host_that_cannot_be_reached_stops_the_run_before_any_agent_naming_it(cli, tmp_path):
    if shutil.which("ssh") is None:
        pytest.skip("no OpenSSH client here (apt-get install openssh-client)")
    port = free_port()  # nothing listens there
    inv = inventory(tmp_path, {"hosts": [{"host": "127.0.0.1", "port": port, "iface": "lo"},
                                         {"host": "127.0.0.1", "port": port + 1 if port < 65535 else port - 1,
                                          "iface": "lo"}], "connect_timeout_s": 5})
    r = cli("run", "scenarios/ci-smoke.yaml", "--backend", "ssh", "--inventory", inv, "--steps", "2",
            "--out", tmp_path / "r")
    assert r.exit_code == 1, r.output
    assert "host 0 (127.0.0.1): ssh could not reach it or log in" in r.output and "host 1 (127.0.0.1)" in r.output
    assert "Connection refused" in r.output and not (tmp_path / "r").exists(), r.output


def test_a_backend_says_where_the_runner_reads_its_workers_records_and_heartbeats(tmp_path):
    """Backend.records / Backend.heartbeat (issue 36): by default the worker's own files in its folder, the
    records read as complete lines land (a line still being written waits for its newline)."""
    from distro_bench.backends.local import LocalBackend
    from distro_bench.scenario.loading import scenario_from_dict
    from tests.helpers import tiny_scenario_dict

    backend = LocalBackend(scenario_from_dict(tiny_scenario_dict()), tmp_path)
    assert backend.heartbeat(tmp_path, 2) == tmp_path / "rank2.hb"
    tail = backend.records(tmp_path, 1)
    assert tail.new_records() == []  # no file yet
    with open(tmp_path / "rank1.jsonl", "a") as f:
        f.write('{"type": "step", "step": 0}\n{"type": "step", "st')
    assert tail.new_records() == [{"type": "step", "step": 0}]
    with open(tmp_path / "rank1.jsonl", "a") as f:
        f.write('ep": 1}\n')
    assert tail.new_records() == [{"type": "step", "step": 1}] and tail.new_records() == []


def test_a_hosts_archive_gives_only_plain_files_and_folders_inside_the_run_folder(tmp_path):
    """What comes back from host 0 is extracted as tarfile's data filter would (extract_plain), on every Python
    (the filter is missing before 3.11.4): files and folders at relative paths; a link or a path out is refused."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("run/summary.json", b"{}"), ("run/workers/adamw/rank0.jsonl", b"1\n")):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o4755  # a setuid bit is not kept
            tar.addfile(info, io.BytesIO(data))
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue())) as tar:
        for member in tar:
            extract_plain(tar, member, tmp_path)
    assert (tmp_path / "run" / "summary.json").read_bytes() == b"{}"
    assert (tmp_path / "run" / "workers" / "adamw" / "rank0.jsonl").read_bytes() == b"1\n"
    assert not (tmp_path / "run" / "summary.json").stat().st_mode & 0o4000
    for bad in ("run/../../escape", "/etc/passwd"):
        with pytest.raises(HarnessError, match="a path outside"):
            extract_plain(None, tarfile.TarInfo(bad), tmp_path)
    link = tarfile.TarInfo("run/link")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc"
    with pytest.raises(HarnessError, match="a link or special file"):
        extract_plain(None, link, tmp_path)
    assert not (tmp_path.parent / "escape").exists()
