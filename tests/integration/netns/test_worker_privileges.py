"""Workers have no privilege to escape (issue 39, item 5; issue 51, item 2): started through
harness/distro_bench/net/enter.py they hold no capability in any set, have no_new_privs, run as a uid of their
run's own (never uid 0 unless --allow-root-workers says so), cannot ptrace nor signal the coordinator (a
full-capability root process), and cannot write the harness's source, /etc or another run's folder; during a real
netns run every worker's CapEff is 0 and its uid is its run's."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from distro_bench.backends.base import DYNAMIC_UIDS, WORKER_UID, allocate_worker_uid, choose_worker_user
from distro_bench.errors import CapabilityError
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
    # Never uid 0, even with root's python under a 0700 /root (exposed to the worker alone): its run's own uid.
    assert result["uid"] in DYNAMIC_UIDS, log
    assert result["kill"] == errno.EPERM, log
    assert f"worker runs as uid {result['uid']}" in log, log


def test_an_unreachable_file_stops_the_run_unless_root_workers_are_accepted(full_root, tmp_path):
    out = tmp_path / "w"
    out.mkdir()
    secret = tmp_path / "secret.yaml"
    secret.write_text("x: 1\n")
    secret.chmod(0o600)  # root's alone: exposing its folder does not make it readable, and nothing chmods it
    uid = allocate_worker_uid()
    with pytest.raises(CapabilityError, match="--allow-root-workers") as e:
        choose_worker_user(out, [str(secret)], sys.executable, dict(os.environ), uid)
    assert "secret.yaml" in str(e.value) and out.stat().st_uid == 0, e.value
    who = choose_worker_user(out, [str(secret)], sys.executable, dict(os.environ), uid, allow_root=True)
    assert who.user is None and who.root_accepted and "accepted by --allow-root-workers" in who.why, who
    assert who.record()["root_accepted"] is True and out.stat().st_uid == 0


def test_a_worker_reaches_its_interpreter_and_run_under_a_0700_home(full_root, tmp_path):
    """The run folder and the interpreter under 0700 folders (as root's /root and a clone in it): the worker gets
    its run's uid, with exactly what it needs exposed, and sees nothing else of those folders."""
    home = tmp_path / "home"
    (home / "run" / "w").mkdir(parents=True)
    home.chmod(0o700)
    (home / "private.txt").write_text("root's\n")
    (home / "run" / "s.yaml").write_text("x: 1\n")
    uid = allocate_worker_uid()
    who = choose_worker_user(home / "run" / "w", [str(home / "run" / "s.yaml")], sys.executable, dict(os.environ), uid)
    assert who.user == (uid, uid) and (home / "run" / "w").stat().st_uid == uid, who
    assert str(home / "run" / "w") in who.expose and str(home / "run" / "s.yaml") in who.expose, who
    look = ("import os, sys; print(os.getuid(), open(sys.argv[1]).read().strip(), "
            "os.path.exists(sys.argv[2]), os.access(sys.argv[3], os.W_OK))")
    p = subprocess.run(NetnsRef.current().wrap([sys.executable, "-c", look, str(home / "run" / "s.yaml"),
                                                str(home / "private.txt"), str(home / "run" / "w")],
                                               no_caps=True, user=who.user, expose=who.expose),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [str(uid), "x:", "1", "False", "True"], p.stdout


# Run with a worker's credentials: try to write each path given; print one line per path, "wrote" or the error.
WRITE_PROBE = r"""
import os, sys
for path in sys.argv[1:]:
    try:
        with open(path, "a") as f:
            f.write("")
        print("wrote", path)
    except OSError as e:
        print("refused", path, e.strerror)
"""


def test_a_worker_cannot_write_the_harness_etc_or_another_runs_folder(full_root, tmp_path):
    from distro_bench import paths

    mine, other = tmp_path / "run-a" / "workers" / "adamw", tmp_path / "run-b" / "workers" / "adamw"
    mine.mkdir(parents=True)
    other.mkdir(parents=True)
    uid_a, uid_b = allocate_worker_uid(), None
    who_a = choose_worker_user(mine, [], sys.executable, dict(os.environ), uid_a)
    while uid_b in (None, uid_a):
        uid_b = allocate_worker_uid()
    assert uid_b is not None
    choose_worker_user(other, [], sys.executable, dict(os.environ), uid_b)  # another run, live beside it
    targets = [str(paths.IMPORT_ROOT / "distro_bench" / "__init__.py"), "/etc/passwd", str(other / "rank0.jsonl"),
               str(tmp_path / "run-b" / "summary.json"), str(mine / "rank0.jsonl")]
    p = subprocess.run(NetnsRef.current().wrap([sys.executable, "-c", WRITE_PROBE, *targets], no_caps=True,
                                               user=who_a.user, expose=who_a.expose),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["refused"] * 4 + ["wrote"], p.stdout


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
        assert int(st["Uid"].split()[0]) in DYNAMIC_UIDS, (pid, st)  # its run's own uid, never root's


def test_relative_paths_from_a_0700_working_folder_reach_the_worker(full_root, tmp_path, monkeypatch):
    """As in a clone under /root with the default `--out results`: the coordinator's working folder is 0700 and
    the worker's paths are relative to it (its import path holds that folder too, which must not hide them)."""
    home = tmp_path / "clone"
    (home / "results" / "w").mkdir(parents=True)
    (home / "results" / "s.yaml").write_text("x: 1\n")
    home.chmod(0o700)
    monkeypatch.chdir(home)
    monkeypatch.syspath_prepend(str(home))  # `python -m` puts the working folder first on sys.path
    uid = allocate_worker_uid()
    who = choose_worker_user(Path("results/w"), ["results/s.yaml"], sys.executable, dict(os.environ), uid)
    assert who.user == (uid, uid), who
    p = subprocess.run(NetnsRef.current().wrap([sys.executable, "-c", "print(open('results/s.yaml').read().strip())"],
                                               no_caps=True, user=who.user, expose=who.expose),
                       capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stdout.strip()) == (0, "x: 1"), p.stderr
