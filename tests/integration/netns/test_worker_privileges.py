"""Workers have no privilege to escape (issue 39, item 5): started through harness/distro_bench/net/enter.py they
hold no capability in any set, have no_new_privs, cannot ptrace the coordinator (a full-capability root
process), and cannot signal it (as nobody, or as uid 0 in a Landlock domain that scopes signals); during a real netns run every worker's CapEff is 0."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from distro_bench.backends.base import WORKER_UID, choose_worker_user
from distro_bench.net.enter import signal_scope_missing
from distro_bench.net.ns import NetnsRef
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import netns_host, tiny_scenario_dict

pytestmark = pytest.mark.root

CAP_FIELDS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")


def _status(pid: int | str) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


@pytest.fixture
def full_root():
    if os.geteuid() != 0:
        pytest.skip("needs root: the point is a worker of a root coordinator")
    me = _status("self")
    if int(me["CapEff"], 16) & (1 << 19) == 0:  # CAP_SYS_PTRACE
        pytest.skip("this test process lacks CAP_SYS_PTRACE itself: it is not the full-capability coordinator")
    return me


def test_launcher_leaves_no_capability_and_sets_no_new_privs(full_root):
    for user in (None, (WORKER_UID, WORKER_UID)):
        argv = NetnsRef.current().wrap(["/bin/cat", "/proc/self/status"], no_caps=True, user=user)
        p = subprocess.run(argv, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        st = {k: v.strip() for k, _, v in (line.partition(":") for line in p.stdout.splitlines())}
        assert {f: int(st[f], 16) for f in CAP_FIELDS} == dict.fromkeys(CAP_FIELDS, 0), st
        assert st["NoNewPrivs"] == "1"
        if user:
            assert st["Uid"].split() == [str(WORKER_UID)] * 4 and st["Gid"].split() == [str(WORKER_UID)] * 4
            assert st["Groups"] == ""


def test_nobody_cannot_signal_the_coordinator(full_root):
    # kill(2) needs the sender's uid to match the target's, or CAP_KILL: a root worker without caps could still
    # signal a root coordinator; nobody cannot.
    argv = NetnsRef.current().wrap(["/bin/sh", "-c", 'kill -0 "$1"', "sh", str(os.getpid())], no_caps=True,
                                   user=(WORKER_UID, WORKER_UID))
    p = subprocess.run(argv, capture_output=True, text=True)
    assert p.returncode != 0 and "not permitted" in p.stderr.lower(), (p.returncode, p.stderr)


# The worker-like process: PTRACE_ATTACH onto the coordinator (and, should it succeed, let it go again at
# once), then kill(coordinator, 0); prints both errnos and its own status.
PROBE = r"""
import ctypes, json, os, signal, sys
pid = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.ptrace(16, pid, None, None)  # PTRACE_ATTACH
attach = 0 if rc == 0 else ctypes.get_errno()
if rc == 0:
    os.waitpid(pid, 0x40000000)  # __WALL
    libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    os.kill(pid, signal.SIGCONT)
try:
    os.kill(pid, 0)
    kill = 0
except OSError as e:
    kill = e.errno
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
print(json.dumps({"attach": attach, "kill": kill, "uid": os.getuid(),
                  "caps": {k: status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh")}}))
"""


def test_a_netns_worker_cannot_ptrace_or_signal_the_coordinator(full_root, tmp_path):
    from distro_bench.backends.netns import NetnsBackend

    if not netns_host().netns:
        pytest.skip("network namespaces unavailable here")
    import json

    scenario = scenario_from_dict(tiny_scenario_dict())
    out = tmp_path / "workers" / "probe"
    out.mkdir(parents=True)
    with NetnsBackend(scenario, tmp_path) as backend:
        # The very launch path of a worker (setns, capabilities, uid), the worker's module swapped for the probe.
        h = backend.start_worker(0, [sys.executable, "-c", PROBE, str(os.getpid())], backend.worker_env(0),
                                 out / "rank0.log")
        rc = h.wait(120)
        if rc is None:
            h.stop(kill=True)
    log = (out / "rank0.log").read_text()
    assert rc == 0, log
    result = json.loads(log.strip().splitlines()[-1])
    assert result["attach"] == errno.EPERM, log  # sys_ptrace gone, and a target with more caps than the tracer
    assert set(result["caps"].values()) == {"0000000000000000"}, log
    if result["uid"] != 0 or signal_scope_missing() is None:  # nobody, or uid 0 in a Landlock domain
        assert result["kill"] == errno.EPERM, log
    if result["uid"] == 0:  # root's python under a 0700 /root: say so, and whether signals are scoped
        assert "uid 0" in log and "cannot reach" in log, log
        assert ("cannot signal or ptrace the coordinator" if signal_scope_missing() is None else "not scoped") in log, log


def test_worker_user_is_nobody_only_where_it_can_reach_its_files(full_root, tmp_path):
    # The interpreter as workers start it (sys.executable, not the file it resolves to: a venv under a 0700 home
    # is out of nobody's reach even where /usr/bin/python is not) and the harness it must import.
    reachable = subprocess.run(NetnsRef.current().wrap([sys.executable, "-c", "import distro_bench"], no_caps=True,
                                                       user=(WORKER_UID, WORKER_UID)), capture_output=True).returncode == 0
    out = tmp_path / "w"
    out.mkdir()
    secret = tmp_path / "secret.yaml"
    secret.write_text("x: 1\n")
    secret.chmod(0o600)
    who = choose_worker_user(out, [str(secret)], sys.executable, dict(os.environ))
    # The 0600 file is root's: never nobody's, whatever else it could reach; the folder is root's again.
    assert who.user is None and out.stat().st_uid == 0, who
    assert ("cannot run" in who.why or "secret.yaml" in who.why or str(tmp_path) in who.why), who.why
    if not reachable:
        return
    # A world-readable folder and file (and a python nobody can run): nobody, owning only its output folder.
    pub = Path("/tmp") / f"dbench-priv-{os.getpid()}"
    pub.mkdir(mode=0o755)
    try:
        (pub / "w").mkdir()
        (pub / "s.yaml").write_text("x: 1\n")
        who = choose_worker_user(pub / "w", [str(pub / "s.yaml")], sys.executable, dict(os.environ))
        assert who.user == (WORKER_UID, WORKER_UID) and (pub / "w").stat().st_uid == WORKER_UID, who
    finally:
        subprocess.run(["rm", "-rf", str(pub)], check=False)


@pytest.mark.slow
def test_every_worker_of_a_netns_run_has_capeff_0(full_root, tmp_path):
    if not netns_host().netns:
        pytest.skip("network namespaces unavailable here")
    d = tiny_scenario_dict(train={"steps": 40, "eval_every": 20, "seed": 0})
    d["links"] = {"l": {"up": "50Mbit", "down": "50Mbit"}}
    d["workers"] = [{"count": 2, "hardware": "host", "link": "l"}]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    out = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "distro_bench", "run", str(path), "--backend", "netns",
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    seen: dict[int, dict[str, str]] = {}
    try:
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            for d_ in Path("/proc").iterdir():
                if not d_.name.isdigit() or int(d_.name) in seen:
                    continue
                try:
                    cmd = (d_ / "cmdline").read_bytes().split(b"\0")
                    if b"distro_bench.train.worker" in cmd and any(str(out).encode() in c for c in cmd):
                        st = _status(d_.name)
                        if b"enter.py" not in b" ".join(cmd):  # the worker itself, after enter.py's exec
                            seen[int(d_.name)] = st
                except OSError:
                    continue
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
        output = proc.communicate()[0]
    assert proc.returncode == 0, output[-3000:]
    assert len(seen) >= 2, f"saw {len(seen)} worker processes: {output[-2000:]}"
    for pid, st in seen.items():
        assert {f: int(st[f], 16) for f in CAP_FIELDS} == dict.fromkeys(CAP_FIELDS, 0), (pid, st)
        assert st["NoNewPrivs"] == "1", (pid, st)
