"""Docker backend against a real engine: end-to-end run with shaped links, workers that cannot
reshape their link, teardown on failure and Ctrl-C, `clean`, `auto`. Skips only where there is no
engine (or no root for shaping); `.ci/run` starts an engine and builds the images first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distro_bench.backends.docker import DockerBackend, image, remove_labelled
from distro_bench.errors import HarnessError
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import REPO, exec_as_worker, ours, start_cli, tiny_scenario_dict

pytestmark = [pytest.mark.docker]


def needs_root():
    if os.geteuid() != 0:
        pytest.skip("shaping containers' links from the host needs root")


def shaped(up="20Mbit", down="20Mbit", count=2) -> dict:
    return tiny_scenario_dict(workers=[{"count": count, "hardware": "host", "link": "l"}],
                              links={"l": {"up": up, "down": down}})


# ---- end to end ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_ci_smoke_end_to_end_with_shaped_links(worker_image, engine, tmp_path):
    needs_root()
    out = tmp_path / "results"
    # one seed (ci-smoke has three, for the gate): the single-seed folder layout, a third of the time
    proc = subprocess.run([sys.executable, "-m", "distro_bench", "run", str(REPO / "scenarios" / "ci-smoke.yaml"),
                           "--backend", "docker", "--repeat", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=1200, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    assert run_dir.parent == out and run_dir.is_dir()
    # The same kind of run folder as the netns backend's.
    for f in ("scenario.yaml", "environment.json", "metrics.parquet", "summary.json", "summary.csv", "status.json"):
        assert (run_dir / f).is_file(), f
    assert json.loads((run_dir / "status.json").read_text())["state"] == "complete"
    for r in range(4):
        assert (run_dir / "workers" / "adamw" / f"rank{r}.jsonl").stat().st_size > 0
        assert (run_dir / "workers" / "adamw" / f"rank{r}.log").exists()
        assert (run_dir / "workers" / "adamw" / f"rank{r}.jsonl").stat().st_uid == os.getuid()
    s = json.loads((run_dir / "summary.json").read_text())["optimizers"]["adamw"]
    assert s["wire_tx_bytes_per_step"] and s["wire_rx_bytes_per_step"]
    payload = s["payload_tx_bytes_per_step"]
    # All-reduce on the wire: payload plus TCP/IP overhead, never less, never wildly more.
    assert 0.95 * payload < s["wire_tx_bytes_per_step"] < 3 * payload
    env = json.loads((run_dir / "environment.json").read_text())
    net = env["network"]
    assert env["backend"] == "docker" and net["backend"] == "docker" and net["network_emulated"]
    assert net["image"]["tag"] == worker_image.tag
    assert len(net["nodes"]) == 4 and not net["not_emulated"]
    for node in net["nodes"]:
        for direction in ("up", "down"):
            tbf = [q for q in node["applied"][direction]["qdiscs"] if q["kind"] == "tbf"]
            assert tbf and int(tbf[0]["options"]["rate"]) * 8 == 100_000_000, node
    assert not ours(engine, net["run_id"])


# ---- isolation: a worker cannot change its own shaping --------------------------------------------

def test_worker_cannot_reshape_its_link(worker_image, engine, tmp_path, tracked):
    needs_root()
    from distro_bench.net.ns import NetnsRef
    from distro_bench.net.shaping import read_qdiscs

    b = DockerBackend(scenario_from_dict(shaped()), tmp_path / "run")
    tracked.append(b)
    with b:
        c = b.containers[0]
        host_cfg = c.attrs["HostConfig"]
        assert not host_cfg["Privileged"] and host_cfg["CapDrop"] == ["ALL"]
        assert "no-new-privileges" in host_cfg["SecurityOpt"] and host_cfg["PidMode"] in ("", None)  # its own pids
        assert c.attrs["Config"]["User"] == "65534:65534"  # a root coordinator's workers run as nobody
        # No capability in any set, no_new_privs (issue 39): what a worker exec'd into the node holds.
        rc, out = exec_as_worker(engine, c.id, ["grep", "-E", "^(Cap|NoNewPrivs|Uid)", "/proc/self/status"])
        st = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        assert rc == 0 and {k: int(v, 16) for k, v in st.items() if k.startswith("Cap")} == dict.fromkeys(
            ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"), 0), out
        assert st["NoNewPrivs"].strip() == "1" and st["Uid"].split()[0] == "65534", out
        assert host_cfg["ShmSize"] == 2**30
        rc, out = exec_as_worker(engine, c.id, ["tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
                                                "rate", "1gbit", "burst", "100k", "latency", "1ms"])
        assert rc != 0 and "Operation not permitted" in out, out
        rc, out = exec_as_worker(engine, c.id, ["tc", "qdisc", "del", "dev", "eth0", "root"])
        assert rc != 0 and "Operation not permitted" in out, out
        rc, out = exec_as_worker(engine, c.id, ["ip", "link", "set", "eth0", "mtu", "1400"])
        assert rc != 0 and "Operation not permitted" in out, out
        # Without iproute2 a worker would try through Python: the kernel says no just the same.
        rc, out = exec_as_worker(engine, c.id, [b.python(), "-c", (
            "import fcntl, socket, struct, errno\n"
            "s = socket.socket()\n"
            "try:\n"
            "    fcntl.ioctl(s, 0x8922, struct.pack('16si12x', b'eth0', 1400))\n"  # SIOCSIFMTU
            "except OSError as e:\n"
            "    print('errno', e.errno == errno.EPERM)\n")])
        assert "errno True" in out, out
        # What the host applied is still there, unchanged.
        qd = read_qdiscs(NetnsRef(path=f"/proc/{b.pids[0]}/ns/net"), "eth0")
        tbf = [q for q in qd if q["kind"] == "tbf"]
        assert tbf and int(tbf[0]["options"]["rate"]) * 8 == 20_000_000
        desc = b.describe()
        assert desc["nodes"][0]["applied"]["up"]["iface"] == "eth0"
        assert desc["nodes"][0]["host_veth"] == b.host_veths[0]


def test_workers_are_polled_stopped_and_logged(worker_image, engine, tmp_path, tracked):
    b = DockerBackend(scenario_from_dict(tiny_scenario_dict()), tmp_path / "run")
    tracked.append(b)
    with b:
        log = tmp_path / "run" / "w" / "rank0.log"
        quick = b.start_worker(0, [b.python(), "-c", "print('hello from', __import__('socket').gethostname())"],
                               {"X": "1"}, log)
        assert quick.wait(60) == 0
        assert "hello from node0" in log.read_text()
        failing = b.start_worker(1, [b.python(), "-c", "raise SystemExit(3)"], {}, tmp_path / "run" / "w" / "rank1.log")
        assert failing.wait(60) == 3
        slow = b.start_worker(0, [b.python(), "-c", "import time; print('up', flush=True); time.sleep(300)"], {}, log)
        deadline = time.monotonic() + 60
        while "up" not in log.read_text().split("node0", 1)[-1] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert slow.poll() is None
        slow.stop()
        assert slow.wait(30) not in (None, 0)


# ---- teardown --------------------------------------------------------------------------------------

def test_ctrl_c_inside_the_run_removes_containers_and_network(worker_image, engine, tmp_path, tracked):
    b = DockerBackend(scenario_from_dict(tiny_scenario_dict()), tmp_path / "run")
    tracked.append(b)
    with pytest.raises(KeyboardInterrupt):
        with b:
            assert len(ours(engine, b.run_id)) == 3  # two containers and the network
            raise KeyboardInterrupt
    assert ours(engine, b.run_id) == []


def test_ctrl_c_of_the_cli_mid_training_leaves_nothing(worker_image, engine, write_scenario, tmp_path):
    import signal

    out = tmp_path / "results"
    scen = write_scenario(tiny_scenario_dict(train={"steps": 10_000, "eval_every": 1000}))
    proc = start_cli(["run", str(scen), "--backend", "docker", "--out", str(out)],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    run_id, left = None, []
    try:
        deadline = time.monotonic() + 300
        while not list(out.glob("*/workers/adamw/rank1.jsonl")) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.5)
        env = json.loads(next(out.glob("*/environment.json")).read_text())
        run_id = env["network"]["run_id"]
        assert len(ours(engine, run_id)) == 3
        proc.send_signal(signal.SIGINT)
        assert proc.wait(300) == 130  # a hang guard: stopping containers on a loaded host takes a while
        left = ours(engine, run_id)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if run_id:
            remove_labelled(engine, run_id)
    assert left == []
    status = json.loads(next(out.glob("*/status.json")).read_text())
    assert status["state"] == "incomplete"


def test_failed_setup_removes_what_it_created(worker_image, engine, tmp_path, tracked, monkeypatch):
    def broken(self):
        assert len(ours(engine, self.run_id)) == 3
        raise HarnessError("shaping failed (injected)")

    monkeypatch.setattr(DockerBackend, "_emulate", broken)
    b = DockerBackend(scenario_from_dict(tiny_scenario_dict()), tmp_path / "run")
    tracked.append(b)
    with pytest.raises(HarnessError, match="injected"):
        with b:
            pass
    assert ours(engine, b.run_id) == []


def test_clean_removes_labelled_leftovers(worker_image, engine, cli, monkeypatch, tmp_path):
    from distro_bench.backends.docker.leftovers import LABEL_OWNER_PREFIX, owner_labels
    from distro_bench.backends.netns import NetnsBackend

    # this test is about containers
    monkeypatch.setattr(NetnsBackend, "clean_leftovers", classmethod(lambda cls, include_live=False: ([], [])))
    # No claim file in sight (another mount namespace): liveness comes from the owner on the labels (issue 39).
    monkeypatch.setattr("distro_bench.net.owner.runtime_dir", lambda: tmp_path)
    labels = owner_labels("leftover")  # this test process: alive
    net = engine.networks.create("distro-bench-leftover", internal=True, labels=labels)
    try:
        engine.containers.run(worker_image.id, ["sleep", "infinity"], detach=True, labels=labels,
                              network=net.name, name="distro-bench-leftover-node0")
        r = cli("clean")
        assert r.exit_code == 0 and sorted(ours(engine, "leftover")) == sorted(
            ["distro-bench-leftover-node0", "distro-bench-leftover"]), r.output
        # The same objects, their owner gone: leftovers.
        p = subprocess.Popen(["true"])
        p.wait()
        dead = {**labels, LABEL_OWNER_PREFIX + "pid": str(p.pid)}
        engine.containers.get("distro-bench-leftover-node0").remove(force=True)
        net.remove()
        net = engine.networks.create("distro-bench-leftover", internal=True, labels=dead)
        engine.containers.run(worker_image.id, ["sleep", "infinity"], detach=True, labels=dead,
                              network=net.name, name="distro-bench-leftover-node0")
        r = cli("clean")
        assert r.exit_code in (0, 1), r.output  # 1 only for another run's objects that cannot be judged
        assert "container distro-bench-leftover-node0" in r.output and "network distro-bench-leftover" in r.output
        assert ours(engine, "leftover") == []
    finally:
        remove_labelled(engine, "leftover")


# ---- choosing the backend and the image ----------------------------------------------------------------

def test_auto_picks_docker_when_engine_and_image_are_there(worker_image):
    from distro_bench.backends.registry import select_backend

    cls, why = select_backend("auto", scenario_from_dict(tiny_scenario_dict()))
    assert cls is DockerBackend and "auto: docker" in why and worker_image.tag in why


def test_missing_image_is_refused_with_how_to_build(worker_image, cli, write_scenario, tmp_path):
    r = cli("run", write_scenario(tiny_scenario_dict()), "--backend", "docker", "--image", "distro-bench-worker:nope",
            "--out", tmp_path / "out")
    assert r.exit_code == 2, r.output
    assert "not found" in r.output and "distro-bench image build --offline" in r.output


def test_second_build_is_skipped(worker_image, engine):
    first = image.build_image(offline=True, docker_client=engine)
    again = image.build_image(offline=True, docker_client=engine)
    assert again.cached and again.id == first.id
