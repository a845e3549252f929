"""Multi-host failures in words a user acts on (issue 26): a host that never joined, a torchrun failure in one
line without C++ stack traces, and node 0's run folder claimed so that `clean` can end a killed run's status."""

from __future__ import annotations

import json

import pytest

from distro_bench.errors import HarnessError
from distro_bench.run.failure import cause, without_cpp_frames
from tests.helpers import free_port, tiny_scenario_dict

# What a worker of host 1 printed when host 0's worker was killed (torch 2.13, gloo; C++ frames as torch adds
# them to c10d errors with TORCH_SHOW_CPP_STACKTRACES, and torchrun's summary after it).
HOST1_LOG = """\
[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/main/distro_bench/train/worker.py", line 300, in train
[rank1]:     work.wait()
[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [10.77.0.2]:10637. This is typically caused by a remote worker crashing. Check the logs of the remote worker before reporting an error. GLHF!
[W1201 19:59:01.123 socket.cpp:464] [c10d] The server socket has failed to listen on any local network address.
Exception raised from recvBytes at /__w/pytorch/pytorch/torch/csrc/distributed/c10d/Utils.hpp:672 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3c in /x/libc10.so)
frame #1: <unknown function> + 0x5d6a (0x7f3c in /x/libtorch_cpu.so)
Exception raised from doWait at /__w/pytorch/pytorch/torch/csrc/distributed/c10d/TCPStore.cpp:552 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3c in /x/libc10.so)
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
distro_bench.train.worker FAILED
------------------------------------------------------------
Root Cause (first observed failure):
  exitcode  : 1 (pid: 4242)
"""


def test_the_cause_of_a_torchrun_failure_is_one_line():
    assert cause(HOST1_LOG) == "RuntimeError: Connection closed by peer [10.77.0.2]:10637"
    assert cause("nothing to see\n") is None


# Host 0's torchrun log when its worker was SIGKILLed: no exception of the worker's, torchrun's summary only.
HOST0_LOG = """\
  File "/x/torch/distributed/launcher/api.py", line 383, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
distro_bench.train.worker FAILED
Failures:
  <NO_OTHER_FAILURES>
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_20:17:30
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -9 (pid: 16395)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 16395
"""


def test_a_killed_worker_is_named_from_torchruns_summary():
    assert cause(HOST0_LOG) == "worker rank 0 exited with code -9 (SIGKILL)"


def test_cpp_frames_are_left_out_of_a_log_tail():
    kept = without_cpp_frames(HOST1_LOG)
    assert "frame #" not in kept and "Exception raised from" not in kept
    assert "Connection closed by peer" in kept and "exitcode  : 1" in kept


def test_a_torchrun_failure_names_its_cause_and_prints_no_trace(tmp_path):
    from distro_bench.multihost.workers import torchrun_failed as _torchrun_failed

    log = tmp_path / "host1-torchrun.log"
    log.write_text(HOST1_LOG)
    e = _torchrun_failed("adamw seed 0", 1, 1, log)
    assert str(e) == (f"adamw seed 0: torchrun on host 1 exited with code 1 (RuntimeError: Connection closed by peer "
                      f"[10.77.0.2]:10637); log: {log}")
    assert e.log_tail == ""  # the cause is in the line; the traces stay in the log


@pytest.fixture
def store():
    from distro_bench.multihost.store import AgentStore

    try:
        s = AgentStore("127.0.0.1", free_port(), 0, 2, timeout_s=5, secret=b"s" * 32)
    except HarnessError as e:
        pytest.skip(f"no local TCPStore here: {e}")
    yield s
    s.close()


def test_a_host_that_never_joined_is_named_as_a_host(store):
    store.set_json("probe/0", {})
    with pytest.raises(HarnessError) as e:
        store.wait_keys(["probe/0", "probe/1"], "every host's probe listeners", timeout_s=0.3, watch=False)
    msg = str(e.value)
    assert "host 1 never joined" in msg and "--node-rank 1" in msg, msg
    assert "probe/1" not in msg


def test_a_host_that_joined_but_stopped_short_is_told_apart(store):
    store.store.set("hb/1", "0")
    with pytest.raises(HarnessError, match="host 1 joined but did not get there"):
        store.wait_keys(["barrier/rtt/0", "barrier/rtt/1"], "every host at 'rtt'", timeout_s=0.3, watch=False)


def test_node_zero_claims_its_run_folder_for_clean(tmp_path, monkeypatch):
    import yaml

    from distro_bench.multihost.agent import Agent, NodeOptions
    from distro_bench.multihost.store import AgentStore
    from distro_bench.net import owner
    from distro_bench.run.lifecycle import RunLifecycle
    from distro_bench.run.overrides import RunSettings
    from distro_bench.scenario.loading import load_scenario
    from distro_bench.scenario.placement import from_scenario

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario_dict()))
    agent = Agent(NodeOptions(scenario=path, rdzv="127.0.0.1:1", node_rank=0, nnodes=1,
                              settings=RunSettings(out=tmp_path / "out")))
    agent.scenario = load_scenario(path)
    agent.placement = from_scenario(agent.scenario, 1, None)
    agent.life = RunLifecycle(agent.scenario, "multihost", host=0)
    try:
        agent.store = AgentStore("127.0.0.1", free_port(), 0, 1, timeout_s=5, secret=b"s" * 32)
    except HarnessError as e:
        pytest.skip(f"no local TCPStore here: {e}")
    agent._open_run_folder()
    try:
        claim = (owner.runtime_dir() / f"{agent.life.claim_id}.owner").read_text().splitlines()
        assert owner.owner_alive(agent.life.claim_id) and claim[1] == str(agent.run_dir.resolve())
        assert json.loads((agent.run_dir / "status.json").read_text())["state"] == "running"
        # Killed here (a pid that is gone): `clean` ends the folder's status.
        (owner.runtime_dir() / f"{agent.life.claim_id}.owner").write_text(f"{2**22 + 7} 1\n{claim[1]}\n")
        from distro_bench.backends.registry import mark_abandoned_runs

        fixed, problems = mark_abandoned_runs()
        assert not problems and any(claim[1] in f for f in fixed), fixed
        status = json.loads((agent.run_dir / "status.json").read_text())
        assert status["state"] == "failed" and "ended without finishing" in status["reason"]
    finally:
        claim_id = agent.life.claim_id
        agent.life.release()
    assert not (owner.runtime_dir() / f"{claim_id}.owner").exists()


@pytest.mark.parametrize("link", [
    {"up": "10Mbit", "down": "10Mbit", "schedule": [{"at": "5s", "up": "1Mbit"}]},
    {"up": "10Mbit", "down": "10Mbit", "up_trace": "up.trace"},
])
def test_a_changing_link_is_refused_before_anything_changes(tmp_path, link):
    """Host shaping is static: a schedule or trace would be silently ignored by every host (issue 26)."""
    import yaml

    from distro_bench.errors import InputError
    from distro_bench.multihost.agent import Agent, NodeOptions
    from distro_bench.run.overrides import RunSettings

    (tmp_path / "up.trace").write_text("\n".join(str(i) for i in range(1, 101)) + "\n")
    d = tiny_scenario_dict(workers=[{"count": 2, "hardware": "host", "link": "wan"}])
    d["links"] = {"wan": link}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    agent = Agent(NodeOptions(scenario=path, rdzv="127.0.0.1:1", node_rank=0, nnodes=1,
                              settings=RunSettings(out=tmp_path / "out")))
    with pytest.raises(InputError, match=r"links wan: multi-host runs .* do not follow a schedule or trace"):
        agent.prepare()
    assert not (tmp_path / "out").exists()


def test_a_single_host_failure_names_the_origin_first_with_each_ranks_error(tmp_path):
    """Two workers exited: rank 0 because its peer's connection closed, rank 1 with its own error. The message
    names rank 1 first (the origin), and says each rank's error without opening the logs."""
    from types import SimpleNamespace

    from distro_bench.run.failure import peer_gone
    from distro_bench.run.runner import _exited_error

    logs = {0: HOST1_LOG.replace("[rank1]", "[rank0]"),
            1: "[rank1]: Traceback (most recent call last):\n[rank1]: MemoryError: cannot allocate 4096 bytes\n"}
    handles = []
    for rank, text in logs.items():
        path = tmp_path / f"rank{rank}.log"
        path.write_text(text)
        handles.append(SimpleNamespace(rank=rank, log_path=path))
    nodes = [SimpleNamespace(name=f"node{r}") for r in logs]
    err = _exited_error("adamw", nodes, [(handles[0], 1), (handles[1], 1)])
    assert err.rank == 1
    assert str(err).startswith("adamw: worker rank 1 (node1) exited with code 1 (MemoryError: cannot allocate")
    assert "; then worker rank 0 (node0) exited with code 1 (RuntimeError: Connection closed by peer" in str(err)
    # a rank killed by a signal comes before either
    assert _exited_error("adamw", nodes, [(handles[1], 1), (handles[0], -9)]).rank == 0
    assert peer_gone("RuntimeError: Connection reset by peer [10.0.0.1]:5") and not peer_gone(None)
