"""`distro-bench run --backend ssh` against real SSH servers: each "host" a network namespace on one bridge (two
machines on a switch) running its own sshd, with a host key and an authorized key the test makes; the launcher
runs in the switch's namespace (a laptop on the same network) and reaches them with the OpenSSH client, as a user
would. The agents run this checkout's Python (sys.executable) there. Afterwards, passed or failed, no namespace,
process (sshd included), qdisc, ifb or remote folder of ours remains."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from distro_bench.net import owner
from distro_bench.net.cleanup import delete_namespaces, kill_namespace_processes, list_namespaces, namespace_pids
from distro_bench.net.ns import NetnsRef
from distro_bench.net.topology import Star, StarSpec
from tests.helpers import REPO, free_port, netns_host
from tests.integration.netns.test_multihost import STEPS, ours_on, scenario

pytestmark = [pytest.mark.root, pytest.mark.slow]  # 40-120 s each: two hosts train over SSH
SSHD = "/usr/sbin/sshd"


def _need_openssh() -> None:
    if not os.path.exists(SSHD) or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("needs the OpenSSH server and client (apt-get install openssh-server openssh-client): the hosts "
                    "here are namespaces that each run sshd")


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dbench-test", "-f", str(path)], check=True)
    return (path.parent / (path.name + ".pub")).read_text().strip()


class Hosts:
    """n namespace hosts with sshd each, and the inventory that reaches them."""

    def __init__(self, tmp: Path, n: int):
        self.tmp = tmp
        self.star = Star(StarSpec.build("ss" + secrets.token_hex(3), n))
        self.sshd: list[subprocess.Popen] = []
        self.remote = tmp / "remote"  # every host's private folders go here (they share this machine's disk)

    def up(self) -> Path:
        owner.claim(self.star.spec.run_id)  # a concurrent `distro-bench clean` leaves live runs' namespaces alone
        self.star.up()
        keys = self.tmp / "keys"
        keys.mkdir(mode=0o700)
        client_pub = _keygen(keys / "client")
        host_pub = _keygen(keys / "host")
        (keys / "authorized_keys").write_text(client_pub + "\n")
        self.made_run_sshd = not os.path.isdir("/run/sshd")
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation folder (the package's)
        known = []
        for node in self.star.spec.nodes:
            cfg = self.tmp / f"sshd-{node.index}.conf"
            cfg.write_text("\n".join([
                f"ListenAddress {node.addr}", "Port 22", f"HostKey {keys / 'host'}",
                f"AuthorizedKeysFile {keys / 'authorized_keys'}", "PidFile none", "UsePAM no", "StrictModes no",
                "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
                "LogLevel VERBOSE", ""]))
            with open(self.tmp / f"sshd-{node.index}.log", "w") as log:
                self.sshd.append(subprocess.Popen(NetnsRef.named(node.ns).wrap([SSHD, "-D", "-e", "-f", str(cfg)]),
                                                  stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                  start_new_session=True))
            known.append(f"{node.addr} {host_pub}")
        (keys / "known_hosts").write_text("\n".join(known) + "\n")
        inventory = self.tmp / "hosts.yaml"
        inventory.write_text(yaml.safe_dump({
            "hosts": [{"host": n.addr, "iface": "eth0"} for n in self.star.spec.nodes],
            "defaults": {"user": "root", "key": str(keys / "client"), "python": sys.executable},
            "known_hosts": str(keys / "known_hosts"), "rdzv_port": free_port(), "workdir": str(self.remote)}))
        self._wait_for_sshd()
        return inventory

    def _wait_for_sshd(self) -> None:
        deadline = time.monotonic() + 30
        for node, proc in zip(self.star.spec.nodes, self.sshd):
            while b"Server listening" not in (self.tmp / f"sshd-{node.index}.log").read_bytes():
                assert proc.poll() is None and time.monotonic() < deadline, \
                    (self.tmp / f"sshd-{node.index}.log").read_text()
                time.sleep(0.1)

    def launcher(self, argv: list[str], log: Path) -> subprocess.Popen:
        """`distro-bench ARGV` in the switch's namespace (on the hosts' network), its own session."""
        with open(log, "w") as f:
            return subprocess.Popen(NetnsRef.named(self.star.spec.switch_ns).wrap(
                [sys.executable, "-m", "distro_bench", *argv]), stdout=f, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True, cwd=REPO,
                env={**os.environ, "PYTHONPATH": str(REPO / "harness"), "DISTRO_BENCH_THREADS": "1"})

    def ours_running(self, i: int) -> list[str]:
        """Processes in host i other than its sshd listener: agents, janitors, torchrun, workers, ssh sessions."""
        out = []
        for pid in namespace_pids(self.star.spec.nodes[i].ns):
            if pid == self.sshd[i].pid:
                continue
            try:
                out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120])
            except OSError:
                continue
        # the listener runs through enter.py, which execs sshd in place (same pid)
        return out

    def down(self) -> list[str]:
        problems = []
        for ns in [self.star.spec.switch_ns, *(n.ns for n in self.star.spec.nodes)]:
            kill_namespace_processes(ns)  # sshd, the launcher, the agents: whatever the test left
        for p in self.sshd:
            p.wait(10)
        problems += self.star.down()
        owner.release(self.star.spec.run_id)
        problems += delete_namespaces(list_namespaces(self.star.spec.run_id))
        if getattr(self, "made_run_sshd", False):
            os.rmdir("/run/sshd")
        return problems


@pytest.fixture
def ssh_hosts(tmp_path):
    netns_host()
    _need_openssh()
    made: list[Hosts] = []

    def make(n: int) -> tuple[Hosts, Path]:
        h = Hosts(tmp_path, n)
        made.append(h)
        return h, h.up()

    yield make
    for h in made:
        problems = h.down()
        assert not list_namespaces(h.star.spec.run_id), problems


def wait(proc: subprocess.Popen, timeout_s: float) -> int | None:
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        return None


def test_a_run_over_ssh_on_two_hosts_shapes_each_reads_it_back_and_removes_it(ssh_hosts, tmp_path, cli):
    hosts, inventory = ssh_hosts(2)
    scen = scenario(tmp_path, 2)
    out = tmp_path / "out"
    log = tmp_path / "launcher.log"
    t0 = time.monotonic()
    # One method (DisTrO): what is proved here is the launcher (start, shape, stream, read back, remove), the same
    # for every method; a second would add a start-up of every host's torchrun (~70 s of CI, issue 38).
    code = wait(hosts.launcher(["run", str(scen), "--backend", "ssh", "--inventory", str(inventory), "--out", str(out),
                                "--optimizer", "distro"], log), 900)
    took = time.monotonic() - t0
    text = log.read_text()
    assert code == 0, text
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    assert text.strip().splitlines()[-1] == str(folder), text  # `run`'s contract: the folder is the last line
    # live progress came through the agents' streams, one line per host's notes
    assert "host 0: shaped eth0" in text and "host 1: shaped eth0" in text, text
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["run"]["state"] == "complete" and summary["run"]["backend"] == "multihost"
    assert set(summary["optimizers"]) == {"distro"}
    o = summary["optimizers"]["distro"]
    assert o["steps"] == STEPS and o["replicas_identical"] is True, o
    assert o["wire_tx_bytes_per_step"] is not None, o
    env = json.loads((folder / "environment.json").read_text())
    for h in env["hosts"]:
        applied = h["shaping"]["applied"]
        assert applied["up"]["qdiscs"][0]["kind"] == "tbf" and applied["down"]["iface"] == "dbench-ifb", h
        assert h["shaping"]["read_back_problems"] == [] and h["shaping_removed"] is True, h
    launched = env["launcher"]
    assert launched["backend"] == "ssh" and [h["agent_state"] for h in launched["hosts"]] == ["complete"] * 2
    assert [h["ssh_exit"] for h in launched["hosts"]] == [0, 0]
    # nothing of ours left on the hosts: no shaping, no process besides sshd, no private folder
    assert not ours_on(hosts.star, 0) and not ours_on(hosts.star, 1)
    assert not hosts.ours_running(0) and not hosts.ours_running(1)
    assert list(hosts.remote.iterdir()) == []
    assert cli("report", folder).exit_code == 0 and (folder / "report.md").exists()
    print(f"ssh run of 2 hosts x {STEPS} steps of distro: {took:.1f} s")
    assert "Fatal Python error" not in text, text  # the agents exit cleanly (ssh_exit 0 above says so too)


def started_training(hosts: Hosts, proc: subprocess.Popen, rank: int, log: Path) -> None:
    """Wait until host `rank`'s worker recorded a step (its records lie in its private folder)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if any('"type": "step"' in p.read_text()
               for p in hosts.remote.glob(f"*/results/*/workers/adamw/rank{rank}.jsonl")):
            return
        time.sleep(0.5)
    raise AssertionError(f"host {rank} never trained a step\n" + log.read_text())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_stopping_the_launcher_stops_every_agent_and_removes_every_shaping(ssh_hosts, tmp_path, sig):
    """SIGTERM (as Ctrl-C): each agent's stdin is closed, it stops and removes its shaping, node 0 writes the folder
    `incomplete`, which comes back here; exit 130. SIGKILL: no word from the launcher at all; its ssh clients die
    with it, and each agent sees its stdin close and takes the same path."""
    hosts, inventory = ssh_hosts(2)
    scen = scenario(tmp_path, 2, time_budget="240s", seeds=[0])
    out = tmp_path / "out"
    log = tmp_path / "launcher.log"
    proc = hosts.launcher(["run", str(scen), "--backend", "ssh", "--inventory", str(inventory), "--out", str(out),
                           "--optimizer", "adamw"], log)
    started_training(hosts, proc, 1, log)
    t_stop = time.monotonic()
    os.kill(proc.pid, sig)
    code = wait(proc, 300)
    deadline = time.monotonic() + 120  # after a SIGKILL the agents end on their own, unobserved
    while time.monotonic() < deadline and any(hosts.ours_running(i) or ours_on(hosts.star, i) for i in (0, 1)):
        time.sleep(0.5)
    took = time.monotonic() - t_stop
    text = log.read_text()
    for i in (0, 1):
        assert not ours_on(hosts.star, i), (i, ours_on(hosts.star, i), text)
        assert not hosts.ours_running(i), (i, hosts.ours_running(i), text)
    if sig == signal.SIGTERM:
        assert code == 130, text
        (folder,) = [p for p in out.iterdir() if p.is_dir()]
        status = json.loads((folder / "status.json").read_text())
        assert status["state"] == "incomplete", status
        env = json.loads((folder / "environment.json").read_text())
        assert all(h["shaping_removed"] is True for h in env["hosts"]), env["hosts"]
        assert list(hosts.remote.iterdir()) == []
    print(f"launcher {sig.name}: every agent gone and every shaping removed {took:.1f} s later")


def test_a_host_that_drops_mid_run_is_named_and_the_others_shaping_is_removed(ssh_hosts, tmp_path):
    """Host 1 loses power mid-training (every process of it SIGKILLed, its sshd too): the launcher's connection
    to it ends, node 0 finds it lost by its silence and writes a `failed` folder naming it, which comes back here;
    host 0 removes its shaping and leaves nothing running. (A dead host's shaping dies with it.)"""
    hosts, inventory = ssh_hosts(2)
    scen = scenario(tmp_path, 2, time_budget="240s", seeds=[0])
    out = tmp_path / "out"
    log = tmp_path / "launcher.log"
    proc = hosts.launcher(["run", str(scen), "--backend", "ssh", "--inventory", str(inventory), "--out", str(out),
                           "--optimizer", "adamw"], log)
    started_training(hosts, proc, 1, log)
    t_drop = time.monotonic()
    kill_namespace_processes(hosts.star.spec.nodes[1].ns)  # the host is gone, sshd and all
    code = wait(proc, 300)
    took = time.monotonic() - t_drop
    text = log.read_text()
    assert code == 1, text
    error = next(line for line in text.splitlines() if line.startswith("error:"))
    assert "host 1" in error and "lost" in error, text
    assert re.search(r"ssh: host 1 \(10\.77\.0\.2\): connection (lost|ended)|host 1 .*no word", text), text
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    status = json.loads((folder / "status.json").read_text())
    assert status["state"] == "failed" and "host 1" in status["reason"], status
    env = json.loads((folder / "environment.json").read_text())
    assert env["failed_host"]["node_rank"] == 1 and env["failed_host"]["kind"] == "lost", env["failed_host"]
    assert [h["agent_state"] for h in env["launcher"]["hosts"]][1] == "no word (lost)"
    assert (folder / "workers" / "adamw" / "rank0.jsonl").is_file()  # what host 0 recorded is kept
    assert not ours_on(hosts.star, 0) and not hosts.ours_running(0)
    print(f"host 1 dropped: the launcher ended {took:.1f} s later with: {error}")
