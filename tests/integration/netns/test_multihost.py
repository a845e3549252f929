"""`distro-bench node` across hosts stood in for by network namespaces: each "host" a namespace with its own
`eth0` on a bridge (two real hosts on a switch), each agent a separate process entered into its host through
harness/distro_bench/net/enter.py. They rendezvous through torchrun's c10d store, shape their "real" interfaces and
produce one run folder, compared with a single-host netns run of the same scenario. Afterwards, passed or
failed, no namespace, qdisc, ifb or process of ours remains."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from distro_bench import api
from distro_bench.net import owner
from distro_bench.net.cleanup import delete_namespaces, list_namespaces, namespace_pids
from distro_bench.net.ns import NetnsRef, run_in
from distro_bench.net.topology import Star, StarSpec
from tests.helpers import REPO, free_port, netns_host

pytestmark = [pytest.mark.root, pytest.mark.slow]  # 25-90 s each: agents train across namespaces

CI_SMOKE = REPO / "scenarios" / "ci-smoke.yaml"
STEPS = 12  # ci-smoke's model, data and optimizers; fewer steps (bytes per step do not depend on them)


@pytest.fixture
def hosts():
    """make(n) -> a Star of n host namespaces (10.77.0.1.., eth0 each) on one bridge; all removed afterwards."""
    netns_host()
    stars: list[Star] = []

    def make(n: int) -> Star:
        star = Star(StarSpec.build("mh" + secrets.token_hex(3), n))
        owner.claim(star.spec.run_id)  # a concurrent `distro-bench clean` leaves live runs' namespaces alone
        stars.append(star)
        star.up()
        return star

    yield make
    problems = []
    for star in stars:
        problems += star.down()
        owner.release(star.spec.run_id)
        problems += delete_namespaces(list_namespaces(star.spec.run_id))
        assert not list_namespaces(star.spec.run_id), problems


def scenario(tmp_path: Path, workers: int, **train) -> Path:
    d = yaml.safe_load(CI_SMOKE.read_text())
    d["workers"][0]["count"] = workers
    d["train"].pop("seeds", None)  # one seed (ci-smoke has three, for the gate): the single-seed layout
    d["train"].update({"steps": STEPS, **train})
    if "time_budget" in train:
        d["train"].pop("steps")
    path = tmp_path / f"ci-smoke-{workers}.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


# The run's secret for the agents' store, as an operator hands it to every host (multihost/secret.py).
SECRET = secrets.token_hex(32)


def start_agents(star: Star, scen: Path, outs: list[Path], port: int, *extra: str,
                 nodes: int | None = None) -> list[subprocess.Popen]:
    """One agent per host (the first `nodes` of the star), each its own session, entered into its host namespace
    (no shared parent shell), all given the run's secret through the environment."""
    procs = []
    for i, node in enumerate(star.spec.nodes[:nodes]):
        argv = NetnsRef.named(node.ns).wrap(
            [sys.executable, "-m", "distro_bench.cli", "node", str(scen), "--rdzv", f"{star.spec.nodes[0].addr}:{port}",
             "--node-rank", str(i), "--nnodes", str(nodes or len(star.spec.nodes)), "--iface", "eth0", "--out", str(outs[i]),
             "--timeout", "300", "--json", *extra])
        with open(outs[i].parent / f"agent{i}.log", "w") as log:  # the agent writes to its own copy of the file
            procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True, cwd=REPO,
                                          env={**os.environ, "PYTHONPATH": str(REPO / "harness"), "DISTRO_BENCH_THREADS": "1",
                                               "DISTRO_BENCH_SECRET": SECRET}))
    return procs


def wait_all(procs: list[subprocess.Popen], timeout_s: float) -> list[int | None]:
    deadline = time.monotonic() + timeout_s
    for p in procs:
        try:
            p.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    codes = [p.poll() for p in procs]
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
    return codes


def ours_on(star: Star, i: int) -> list[str]:
    """Shaping of ours left on host i: a tbf/netem/ingress qdisc on eth0, or the ifb."""
    ns = NetnsRef.named(star.spec.nodes[i].ns)
    q = json.loads(run_in(ns, ["tc", "-j", "qdisc", "show"]).stdout or "[]")
    left = [f"{x['dev']}:{x['kind']}" for x in q if x.get("kind") in ("tbf", "netem", "ingress")]
    links = run_in(ns, ["tc", "-j", "qdisc", "show", "dev", "dbench-ifb"], check=False)
    return left + (["dbench-ifb"] if links.returncode == 0 else [])


def logs(tmp_path: Path) -> str:
    return "\n".join(f"--- {p.name}\n" + p.read_text()[-3000:] for p in sorted(tmp_path.glob("agent*.log")))


def run_folder(out: Path) -> Path:
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    return folder


def wire_agrees(multi: api.Run, single: api.Run, name: str, column: str) -> tuple[bool, dict]:
    """Whether steady steps' wire bytes agree within 5% on one host and on two, at the median step or at the
    cleanest one. Timing moves bytes between steps, not the backend: with large payloads a counter boundary
    shifts bytes to the neighbouring step (AdamW's cleanest step read 1.90 MB on two hosts, 2.05 MB on one,
    medians 2.072 and 2.073 MB); with DisTrO's ~1 kB a delayed ACK or a retransmitted segment adds whole
    packets to some steps (under a CPU hog the two-host median read 2091 B against 1881, rank 0 sending
    647 B more in 7 of 11 steps, while the cleanest step read 1815 B on both). A backend that missed or
    double-counted traffic would move both."""
    def steady(run):
        m = run.metrics
        return m[(m["optimizer"] == name) & (m["step"] > 0)][column].astype("float64")

    x, y = steady(multi), steady(single)
    got = {"median": (x.median(), y.median()), "cleanest": (x.min(), y.min())}
    return any(abs(a - b) <= 0.05 * b for a, b in got.values()), got


def compare(multi: Path, single: Path) -> None:
    mr, sr = api.load_run(multi), api.load_run(single)
    m, s = mr.summary, sr.summary
    assert m["run"]["backend"] == "multihost" and m["run"]["state"] == "complete"
    assert set(m["optimizers"]) == set(s["optimizers"]) == {"adamw", "distro"}
    for name in ("adamw", "distro"):
        a, b = m["optimizers"][name], s["optimizers"][name]
        assert a["steps"] == b["steps"] == STEPS
        assert a["payload_tx_bytes_per_step"] == b["payload_tx_bytes_per_step"], name
        assert a["payload_rx_bytes_per_step"] == b["payload_rx_bytes_per_step"], name
        for k in ("wire_tx_bytes_per_step", "wire_rx_bytes_per_step"):
            assert a[k] is not None and b[k] is not None, (name, k)
        for col in ("wire_tx_bytes", "wire_rx_bytes"):
            ok, got = wire_agrees(mr, sr, name, col)
            assert ok, (name, col, got)
        assert a["replicas_identical"] is True
        # Same seed, same data, same arithmetic: the same training.
        assert a["param_checksum"] == b["param_checksum"], name


def check_hosts_recorded(folder: Path, n: int) -> dict:
    env = json.loads((folder / "environment.json").read_text())
    assert [h["node_rank"] for h in env["hosts"]] == list(range(n))
    for h in env["hosts"]:
        assert h["state"] == "complete", h
        assert h["kernel"] and h["iface"]["name"] == "eth0" and h["iface"]["ipv4"].startswith("10.77.0.")
        applied = h["shaping"]["applied"]
        assert applied["up"]["qdiscs"][0]["kind"] == "tbf" and applied["down"]["iface"] == "dbench-ifb"
        assert h["shaping"]["read_back_problems"] == [] and h["shaping_removed"] is True
        peers = [str(i) for i in range(n) if i != h["node_rank"]]
        assert sorted(h["measured"]["rtt_s"]) == peers and all(v is not None for v in h["measured"]["rtt_s"].values())
        (goodput,) = h["measured"]["goodput_bps"].values()
        assert goodput is not None and goodput < 100e6 * 1.05  # the shaped 100 Mbit/s, never more
    assert len(env["network"]["nodes"]) == n and env["network"]["network_emulated"] is True
    return env


def test_two_hosts_shared_folder_match_a_single_host_run(hosts, tmp_path, cli):
    scen = scenario(tmp_path, 2)
    star = hosts(2)
    out = tmp_path / "out"  # one path every host sees: workers write straight into the run folder
    procs = start_agents(star, scen, [out, out], free_port())
    codes = wait_all(procs, 900)
    assert codes == [0, 0], logs(tmp_path)
    assert not ours_on(star, 0) and not ours_on(star, 1)
    folder = run_folder(out)
    env = check_hosts_recorded(folder, 2)
    assert all(h["records"] == "shared path" for h in env["hosts"])
    single = api.run(scen, backend="netns", out=tmp_path / "single", write_report=False)
    compare(folder, single.run_dir)
    assert cli("check", folder).exit_code in (0, 1)  # reads the folder (the verdict is the scenario's)
    assert cli("report", folder).exit_code == 0 and (folder / "report.md").exists()


def test_four_hosts_records_shipped_to_node_zero(hosts, tmp_path):
    scen = scenario(tmp_path, 4)
    star = hosts(4)
    outs = [tmp_path / f"out{i}" for i in range(4)]  # as without a shared path: node 0 gathers over the store
    procs = start_agents(star, scen, outs, free_port(), "--ship-records")
    codes = wait_all(procs, 1500)
    assert codes == [0, 0, 0, 0], logs(tmp_path)
    assert not any(ours_on(star, i) for i in range(4))
    folder = run_folder(outs[0])
    env = check_hosts_recorded(folder, 4)
    assert [h["records"] for h in env["hosts"]][1:] == ["shipped to node-rank 0 over the agents' store"] * 3
    for name in ("adamw", "distro"):
        assert sorted(p.name for p in (folder / "workers" / name).glob("rank*.jsonl")) == [f"rank{r}.jsonl" for r in range(4)]
    single = api.run(scen, backend="netns", out=tmp_path / "single", write_report=False)
    compare(folder, single.run_dir)


@pytest.mark.parametrize("sig, kind", [(signal.SIGKILL, "lost"), (signal.SIGTERM, "failed")])
def test_killing_one_agent_stops_all_names_it_and_removes_every_shaping(hosts, tmp_path, sig, kind):
    """SIGKILL: the agent cannot clean up (its janitor does) and node 0 finds it lost by its silence;
    SIGTERM (as Ctrl-C): it removes its shaping itself and tells the others why it stopped."""
    # A time budget bounds the run if the kill never lands; the kill waits for host 1's first steps.
    scen = scenario(tmp_path, 2, time_budget="240s", seeds=[0])
    star = hosts(2)
    outs = [tmp_path / "out0", tmp_path / "out1"]
    procs = start_agents(star, scen, outs, free_port(), "--optimizer", "adamw", "--ship-records")
    record = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and record is None:
        found = list(outs[1].glob("*/workers/adamw/**/rank1.jsonl"))
        if found and '"type": "step"' in found[0].read_text():
            record = found[0]
        elif any(p.poll() is not None for p in procs):
            break
        time.sleep(0.5)
    assert record is not None, "host 1 never trained a step\n" + logs(tmp_path)
    os.kill(procs[1].pid, sig)  # the agent alone: its janitor and torchrun must notice
    codes = wait_all(procs[:1], 300)
    procs[1].wait(10)
    assert codes[0] not in (None, 0), logs(tmp_path)
    folder = run_folder(outs[0])
    status = json.loads((folder / "status.json").read_text())
    assert status["state"] == "failed" and "host 1" in status["reason"], status
    env = json.loads((folder / "environment.json").read_text())
    assert env["failed_host"]["node_rank"] == 1 and env["failed_host"]["kind"] == kind, env["failed_host"]
    assert env["hosts"][1]["state"] == kind
    if sig == signal.SIGTERM:
        assert procs[1].returncode == 130 and "interrupted on host 1" in status["reason"], status
    # Host 1's shaping goes with its janitor, its workers with their torchrun (bounded waits, not timings).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (ours_on(star, 1) or namespace_pids(star.spec.nodes[1].ns)):
        time.sleep(0.5)
    assert not ours_on(star, 0) and not ours_on(star, 1)
    assert not namespace_pids(star.spec.nodes[1].ns), "processes of host 1 outlived its agent"
    # What was recorded stays readable.
    assert api.load_run(folder).summary["run"]["state"] == "failed"


def test_a_killed_worker_on_host_0_ends_both_hosts_in_one_line_each(hosts, tmp_path):
    """Host 0's worker SIGKILLed: node 0's folder ends `failed` (it once stayed `running`), and host 1 says in
    one line why its torchrun failed, without the C++ stack traces torch attaches to c10d errors."""
    scen = scenario(tmp_path, 2, time_budget="240s", seeds=[0])
    star = hosts(2)
    outs = [tmp_path / "out0", tmp_path / "out1"]
    procs = start_agents(star, scen, outs, free_port(), "--optimizer", "adamw", "--ship-records")
    worker = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and worker is None:
        found = list(outs[1].glob("*/workers/adamw/**/rank1.jsonl"))
        if found and '"type": "step"' in found[0].read_text():
            for pid in namespace_pids(star.spec.nodes[0].ns):
                try:
                    if b"distro_bench.train.worker" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                        worker = pid
                except OSError:
                    continue
        elif any(p.poll() is not None for p in procs):
            break
        time.sleep(0.5)
    assert worker is not None, "host 1 never trained a step\n" + logs(tmp_path)
    os.kill(worker, signal.SIGKILL)
    codes = wait_all(procs, 300)
    assert codes[0] not in (None, 0) and codes[1] not in (None, 0), logs(tmp_path)
    status = json.loads((run_folder(outs[0]) / "status.json").read_text())
    assert status["state"] == "failed" and "host 0" in status["reason"], status
    text = logs(tmp_path)
    assert "frame #" not in text and "Exception raised from" not in text, text
    assert "last lines of its log" not in text, text  # the cause is in the error line; the log keeps the rest
    assert "worker rank 0 exited with code -9 (SIGKILL)" in (tmp_path / "agent0.log").read_text(), text
    host1 = (tmp_path / "agent1.log").read_text()
    assert "host 0" in host1, host1
