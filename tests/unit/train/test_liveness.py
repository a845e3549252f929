"""Timeouts that scale with the host, and a worker judged dead on evidence only (issue 38), on real processes
with a hand-moved clock: a stopped process, a frozen one, a busy one whose heartbeat is late."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from distro_bench.errors import HarnessError, InputError
from distro_bench.scenario.timeouts import TIMEOUT_SCALE_ENV, HostLoad, Timeouts, timeout_scale
from distro_bench.train.liveness import LivenessJudge, read_proc_stat

IDLE = HostLoad(0.1, 0.1, 0.1, 2)
BUSY = HostLoad(20.0, 18.0, 10.0, 2)  # ten runnable tasks per CPU


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []

    def start(code: str) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-c", code])
        started.append(p)
        return p
    yield start
    for p in started:
        p.kill()
        p.wait()


def _judge(clock: Clock, load: HostLoad = IDLE) -> LivenessJudge:
    return LivenessJudge(Timeouts.for_host(120.0, scale=1.0, load=load), clock=clock, load=lambda: load)


def _cpu_settled(pid: int) -> None:
    """Until the process's CPU time holds still across a second (its start-up done, now asleep): a fixed
    sleep is too short on a busy host, where a Python start-up can take longer than any guess."""
    last, deadline = None, time.monotonic() + 60
    while time.monotonic() < deadline:
        st = read_proc_stat(pid)
        assert st is not None, f"process {pid} is gone"
        if st.state == "S" and st.cpu_s == last:
            return
        last = st.cpu_s
        time.sleep(1.0)
    raise AssertionError(f"process {pid} kept using CPU for 60 s: {read_proc_stat(pid)}")


def _cpu_grew(pid: int, since: int) -> int:
    """Until the process has used CPU time beyond `since` (however long a busy host keeps it waiting)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        st = read_proc_stat(pid)
        assert st is not None, f"process {pid} is gone"
        if st.cpu_s > since:
            return st.cpu_s
        time.sleep(0.05)
    raise AssertionError(f"process {pid} got no CPU time in 60 s: {read_proc_stat(pid)}")


def _state(pid: int, want: str) -> None:
    for _ in range(200):
        st = read_proc_stat(pid)
        if st and st.state == want:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} never reached state {want}: {read_proc_stat(pid)}")


def test_timeouts_scale_with_the_load_or_the_variable(monkeypatch):
    monkeypatch.delenv(TIMEOUT_SCALE_ENV, raising=False)
    assert timeout_scale(IDLE) == 1.0 and timeout_scale(BUSY) == 10.0
    t = Timeouts.for_host(200.0, load=BUSY)
    assert (t.scale, t.collective_s, t.docker_api_s) == (10.0, 2000.0, Timeouts.DOCKER_API_S * 10)
    assert t.docker_api_s > 10.0  # the SDK's default, which died under load
    monkeypatch.setenv(TIMEOUT_SCALE_ENV, "3")
    assert Timeouts.for_host(100.0, load=BUSY).collective_s == 300.0


@pytest.mark.parametrize("raw", ["fast", "0", "-1", "nan", "inf", "1e9"])
def test_a_bad_scale_is_refused_naming_the_variable_and_the_value(monkeypatch, raw):
    monkeypatch.setenv(TIMEOUT_SCALE_ENV, raw)
    with pytest.raises(InputError) as e:
        timeout_scale(IDLE)
    assert TIMEOUT_SCALE_ENV in str(e.value) and repr(raw) in str(e.value) and "0.1 to 1000" in str(e.value)
    assert e.value.exit_code == 2


def test_a_wait_that_ran_out_names_what_how_long_and_the_load():
    msg = Timeouts.for_host(100.0, scale=2.0, load=IDLE).exceeded("starting 3 node container(s)", 241.4)
    assert msg.startswith("starting 3 node container(s): no answer after 241s")
    assert "host load average" in msg and "CPUs" in msg and TIMEOUT_SCALE_ENV in msg and "x2.0" in msg


def test_read_proc_stat_reads_state_and_cpu_time_of_a_name_with_parentheses(procs):
    p = procs("import time\nwhile True: pass")
    time.sleep(0.3)
    st = read_proc_stat(p.pid)
    assert st is not None and st.state in ("R", "S") and st.cpu_s >= 0
    assert read_proc_stat(2**22 + 12345) is None


def test_a_stopped_process_is_dead_after_the_stopped_bound(procs, tmp_path):
    clock = Clock()
    judge = _judge(clock)
    p = procs("import time; time.sleep(600)")
    judge.watch(2, lambda: p.pid, tmp_path / "rank2.hb")  # no heartbeat yet: stopped at spawn
    p.send_signal(signal.SIGSTOP)
    _state(p.pid, "T")
    assert judge.judge(2) is None  # seen stopped just now
    clock.t += Timeouts.STOPPED_S + 0.5
    why = judge.judge(2)
    assert why and "stopped" in why and "state T" in why, why
    assert judge.dead([0, 2]) is not None and judge.dead([2]).rank == 2
    assert judge.stopped_now([2]) == 2
    p.send_signal(signal.SIGCONT)  # running again: no longer judged stopped
    _state(p.pid, "S")
    assert judge.judge(2) is None and judge.stopped_now([2]) is None


def test_a_busy_rank_with_a_silent_heartbeat_is_slow_not_dead(procs, tmp_path):
    # Its heartbeat file is old (a starved thread), but it keeps using CPU: slow, not dead, however long.
    clock = Clock()
    judge = _judge(clock, BUSY)
    p = procs("while True: pass")
    hb = tmp_path / "rank1.hb"
    hb.write_text("3 compute 0\n")
    judge.watch(1, lambda: p.pid, hb)
    seen = -1
    for _ in range(4):
        _cpu_grew(p.pid, seen)  # real CPU time for the busy loop since the judge last looked, waited for
        clock.t += 3600
        assert judge.judge(1) is None
        seen = read_proc_stat(p.pid).cpu_s  # at least what the judge just read


def test_a_rank_using_no_cpu_and_silent_is_dead_after_a_bound_that_grows_with_the_load(procs, tmp_path):
    p = procs("import time; time.sleep(600)")  # state S, no CPU time: as a deadlocked worker
    _cpu_settled(p.pid)  # past its start-up's CPU time
    for load, factor in ((IDLE, 1.0), (BUSY, 10.0)):
        clock = Clock()
        judge = _judge(clock, load)
        judge.watch(0, lambda: p.pid, tmp_path / "none.hb")
        judge.judge(0)
        clock.t += Timeouts.UNRESPONSIVE_S * factor - 1
        assert judge.judge(0) is None, load
        clock.t += 2
        why = judge.judge(0)
        assert why and "frozen" in why and "no CPU time" in why and "load average" in why, why


def test_a_rank_whose_process_cannot_be_seen_is_judged_by_its_heartbeat(tmp_path):
    clock = Clock()
    judge = _judge(clock)
    hb = tmp_path / "rank3.hb"
    judge.watch(3, lambda: None, hb)  # e.g. a container's worker from another PID namespace
    clock.t += Timeouts.UNRESPONSIVE_S + 1
    assert judge.judge(3) is None  # before its first beat: start-up grace on top
    clock.t += Timeouts.STARTUP_GRACE_S
    assert "heartbeat silent" in (judge.judge(3) or "")


def test_a_gone_process_is_left_to_its_exit_code(procs, tmp_path):
    clock = Clock()
    judge = _judge(clock)
    p = procs("pass")
    judge.watch(0, lambda: p.pid, tmp_path / "none.hb")
    judge.judge(0)
    p.wait()
    clock.t += 10_000
    assert judge.judge(0) is None


def test_docker_node_start_that_times_out_names_the_wait_and_the_load(tmp_path, monkeypatch):
    # Issue 38: `_start_node` died as "internal error: ReadTimeout ... (read timeout=10.0)" under load.
    pytest.importorskip("docker")
    import requests

    from distro_bench.backends.docker.backend import DockerBackend
    from distro_bench.scenario.loading import scenario_from_dict
    from tests.helpers import tiny_scenario_dict

    b = DockerBackend(scenario_from_dict(tiny_scenario_dict()), tmp_path)
    assert b.timeouts.docker_api_s >= Timeouts.DOCKER_API_S

    def read_timeout(node):
        raise requests.exceptions.ReadTimeout("UnixHTTPConnectionPool(host='localhost', port=None): Read timed out. "
                                              "(read timeout=10.0)")
    monkeypatch.setattr(b, "_start_node", read_timeout)
    with pytest.raises(HarnessError) as e:
        b._start_nodes()
    msg = str(e.value)
    assert "starting 2 node container(s)" in msg and "ReadTimeout" in msg and "host load average" in msg, msg


def test_docker_backend_asks_the_engine_with_the_scaled_timeout(tmp_path, monkeypatch):
    from distro_bench.backends.docker import backend as docker_backend
    from distro_bench.scenario.loading import scenario_from_dict
    from tests.helpers import tiny_scenario_dict

    asked = []

    class Stop(Exception):
        pass

    def client(timeout: float = 10.0):
        asked.append(timeout)
        raise Stop
    monkeypatch.setattr(docker_backend.image, "client", client)
    monkeypatch.setenv(TIMEOUT_SCALE_ENV, "2")
    b = docker_backend.DockerBackend(scenario_from_dict(tiny_scenario_dict()), tmp_path)
    b.plan = object()
    with pytest.raises(Stop):
        b.setup()
    assert asked == [Timeouts.DOCKER_API_S * 2]


def test_a_rendezvous_that_runs_out_names_what_how_long_and_the_load(monkeypatch):
    # Rank 0 of 2, alone: the store waits for the other rank, then torch's DistStoreError; the worker's error now
    # says what it waited for, how long, and how busy the host was.
    import torch

    from distro_bench.backends.base import free_port
    from distro_bench.train.distributed import close_process_group, init_process_group

    port = free_port()
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    monkeypatch.setenv("DISTRO_BENCH_TIMEOUT_S", "2")
    monkeypatch.setenv("DISTRO_BENCH_DIST_BACKEND", "gloo")
    try:
        with pytest.raises(RuntimeError) as e:
            init_process_group(torch.device("cpu"), 0, 2)
    finally:
        close_process_group()
    msg = str(e.value)
    assert f"rendezvous of 2 ranks at 127.0.0.1:{port} did not complete in 2s" in msg and "load average" in msg, msg


@pytest.mark.parametrize("raw", [None, "", "soon", "0", "-5", "inf"])
def test_a_worker_without_the_coordinators_collective_timeout_refuses_to_start(monkeypatch, raw):
    # Issue 50: no fallback of its own (it was 300 s, unscaled): the coordinator always sets the value.
    pytest.importorskip("torch")
    from distro_bench.scenario.timeouts import COLLECTIVE_TIMEOUT_ENV
    from distro_bench.train.distributed import collective_timeout_s

    if raw is None:
        monkeypatch.delenv(COLLECTIVE_TIMEOUT_ENV, raising=False)
    else:
        monkeypatch.setenv(COLLECTIVE_TIMEOUT_ENV, raw)
    with pytest.raises(RuntimeError) as e:
        collective_timeout_s()
    assert COLLECTIVE_TIMEOUT_ENV in str(e.value) and repr(raw) in str(e.value)
    monkeypatch.setenv(COLLECTIVE_TIMEOUT_ENV, "41")
    assert collective_timeout_s() == 41.0
