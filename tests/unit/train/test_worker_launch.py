"""One worker launch (train/launch.py): the single-host runner, the multi-host agent, the recipes and the ssh backend
take the worker's argv and environment, and the agent's command line, from it; the same scenario gives the same
worker command in the runner and the agent."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import yaml

from distro_bench.backends.inventory import load_inventory
from distro_bench.backends.ssh import agent_argv
from distro_bench.export.recipes import RecipeSettings, k8s_manifest, sbatch_script
from distro_bench.run.lifecycle import SilentProgress, worker_dir
from distro_bench.run.overrides import RunSettings
from distro_bench.scenario import environ
from distro_bench.scenario.loading import load_scenario
from distro_bench.train.launch import WorkerJob, node_args
from distro_bench.train.liveness import RecordTail
from tests.helpers import REPO

CI_SMOKE = REPO / "scenarios" / "ci-smoke.yaml"
SEEDS = len(load_scenario(CI_SMOKE).train.seed_list())  # how many seed folders the run has (worker_dir)
TIMEOUT_S = 77  # given, so that neither launcher scales it by the host's load between the two calls


class _ExitedHandle:
    """A worker that has already exited cleanly."""

    def __init__(self, rank: int, log_path: Path):
        self.rank, self.log_path = rank, log_path

    def poll(self) -> int:
        return 0

    def stop(self, kill: bool = False) -> None:
        pass

    def wait(self, timeout: float) -> int:
        return 0


class _RecordingBackend:
    """What the runner hands a backend's start_worker, recorded; the backend's own variables added as a real one's."""

    name = "recording"
    emulation = None

    def __init__(self):
        self.started: list[tuple[int, list[str], dict[str, str]]] = []

    def master_addr(self) -> str:
        return "10.9.0.1"

    def master_port(self) -> int:
        return 29500

    def python(self) -> str:
        return "/opt/python3"

    def worker_env(self, rank: int) -> dict[str, str]:
        return {"GLOO_SOCKET_IFNAME": f"veth{rank}"}

    def start_worker(self, rank, argv, env, log_path):
        self.started.append((rank, argv, env))
        return _ExitedHandle(rank, log_path)

    def heartbeat(self, out: Path, rank: int) -> Path:
        return out / f"rank{rank}.hb"

    def records(self, out: Path, rank: int) -> RecordTail:
        return RecordTail(out / f"rank{rank}.jsonl")


def _run_folder(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(CI_SMOKE, run_dir / "scenario.yaml")
    return run_dir


def runner_launches(tmp_path: Path) -> list[tuple[int, list[str], dict[str, str]]]:
    from distro_bench.run import runner

    backend = _RecordingBackend()
    run_dir = _run_folder(tmp_path)
    runner._train_one(backend, load_scenario(run_dir / "scenario.yaml"), run_dir, "adamw", SilentProgress(),
                      RunSettings(collective_timeout_s=TIMEOUT_S), seed=0)
    return backend.started


def agent_launch(tmp_path: Path, monkeypatch, nnodes: int = 2):
    from distro_bench.multihost.agent import Agent, NodeOptions

    a = Agent(NodeOptions(scenario=CI_SMOKE, rdzv="127.0.0.1:29400", node_rank=0, nnodes=nnodes, shaping=False,
                          settings=RunSettings(out=tmp_path / "out", collective_timeout_s=TIMEOUT_S)))
    a.prepare()
    a.run_dir = tmp_path / "run"
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # not root: the argv as built, not wrapped by net/enter.py
    return a._launch("adamw", 0, worker_dir(a.run_dir, "adamw", 0, SEEDS))


def test_the_runner_and_the_agent_give_the_same_scenario_the_same_worker_command(tmp_path, monkeypatch):
    started = runner_launches(tmp_path)
    launch = agent_launch(tmp_path, monkeypatch)
    out = worker_dir(tmp_path / "run", "adamw", 0, SEEDS)
    job = WorkerJob(tmp_path / "run" / "scenario.yaml", "adamw", out, 0, TIMEOUT_S, "gloo")
    assert [r for r, _, _ in started] == [0, 1, 2, 3]  # ci-smoke: four workers
    for rank, argv, env in started:
        assert argv == ["/opt/python3", *job.args()]
        assert {k: env[k] for k in ("WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK")} == {
            "WORLD_SIZE": "4", "MASTER_ADDR": "10.9.0.1", "MASTER_PORT": "29500", "RANK": str(rank),
            "LOCAL_RANK": str(rank)}
        assert env["GLOO_SOCKET_IFNAME"] == f"veth{rank}"  # the backend's own, on top
    # The agent: torchrun's flags, then exactly the worker command the runner gave its processes.
    assert launch.argv[1:3] == ["-m", "distro_bench.multihost.torchrun"]
    assert launch.argv[-len(job.args()):] == started[0][1][1:] == job.args()
    shared = (environ.TIMEOUT_S, environ.DIST_BACKEND, "PYTHONUNBUFFERED")
    assert {k: launch.env[k] for k in shared} == {k: started[0][2][k] for k in shared} == {
        environ.TIMEOUT_S: str(TIMEOUT_S), environ.DIST_BACKEND: "gloo", "PYTHONUNBUFFERED": "1"}
    assert environ.THREADS in launch.env and all(environ.THREADS in env for _, _, env in started)
    assert launch.env[environ.NODE_RANK] == "0" and launch.env[environ.PLACEMENT] == "0,1;2,3"


def test_both_launchers_take_the_worker_command_from_worker_job(tmp_path, monkeypatch):
    """Change the one definition, and both launchers' workers change with it: neither keeps its own copy."""
    monkeypatch.setattr(WorkerJob, "args", lambda self: ["-m", "elsewhere.worker", "--seed", str(self.seed)])
    monkeypatch.setattr(WorkerJob, "env", lambda self, threads: {"ONE_PLACE": self.optimizer})
    started = runner_launches(tmp_path)
    launch = agent_launch(tmp_path, monkeypatch)
    assert all(argv[1:] == ["-m", "elsewhere.worker", "--seed", "0"] and env["ONE_PLACE"] == "adamw"
               and environ.TIMEOUT_S not in env for _, argv, env in started)
    assert launch.argv[-4:] == ["-m", "elsewhere.worker", "--seed", "0"] and launch.env["ONE_PLACE"] == "adamw"


def test_the_recipes_and_the_ssh_backend_start_the_agent_with_one_command_line(tmp_path, monkeypatch):
    scenario = load_scenario(CI_SMOKE)
    s = RecipeSettings(nnodes=2, i_know=True, cpus_per_task=3)
    docs = {d["kind"]: d for d in yaml.safe_load_all(k8s_manifest(scenario, str(CI_SMOKE), s)) if d}
    agent = docs["Job"]["spec"]["template"]["spec"]["containers"][0]
    assert agent["args"] == node_args("/scenario/ci-smoke.yaml", rdzv=f"{docs['Job']['metadata']['name']}-0."
                                      f"{docs['Service']['metadata']['name']}:29400",
                                      node_rank="$(JOB_COMPLETION_INDEX)", nnodes="2", placement="0,1;2,3", iface="eth0",
                                      out="/results", secret_file="/secret/agents.secret", flags=["--i-know"])
    # The pod's worker threads reach the workers: the agent passes the variable the recipe sets on to them.
    (threads,) = [e["value"] for e in agent["env"] if e["name"] == environ.THREADS]
    monkeypatch.setenv(environ.THREADS, threads)
    assert agent_launch(tmp_path, monkeypatch).env[environ.THREADS] == "3"

    script = sbatch_script(scenario, "ci-smoke.yaml", s)
    srun = " ".join(f'"{a}"' if a.startswith("$") else a for a in node_args(
        "$SCENARIO", rdzv="$HEAD:$PORT", node_rank="$SLURM_NODEID", nnodes="$NNODES", placement="$PLACEMENT",
        iface="$IFACE", out="$OUT", secret_file="$SECRET_FILE"))
    assert f"exec $DISTRO_BENCH {srun} $SHAPING --i-know'" in script.replace(" \\\n    ", " ")  # one line, unwrapped

    inv_file = tmp_path / "hosts.yaml"
    inv_file.write_text(yaml.safe_dump({"hosts": [{"host": "h0", "iface": "eth1"}, {"host": "h1", "iface": "eth2"}]}))
    inv = load_inventory(inv_file)
    argv = agent_argv(inv.resolved(1), workdir="/w", scenario="s.yaml", rdzv="h0:29400", nnodes=2, placement="0;1",
                      extra=["--no-measure"], secret="agents.secret")
    assert argv[4:] == node_args("/w/s.yaml", rdzv="h0:29400", node_rank="1", nnodes="2", placement="0;1",
                                 iface="eth2", out="/w/results", secret_file="/w/agents.secret",
                                 flags=["--stream", "--no-measure"])


def test_the_runner_takes_the_backends_launcher_by_name_without_asking_its_kind(tmp_path, monkeypatch):
    """ssh names the "agents" launcher (run/remote.py), every other backend "workers": run_scenario looks it up."""
    from distro_bench.backends.registry import BACKENDS
    from distro_bench.run import runner

    seen: list[tuple[str, str]] = []
    for name in runner.LAUNCHERS:
        monkeypatch.setitem(runner.LAUNCHERS, name, lambda scenario, options, sink, overrides, name=name: seen.append(
            (name, options.backend)))
    for backend in ("local", "netns", "ssh", "auto"):
        runner.run_scenario(load_scenario(CI_SMOKE), RunSettings(
            backend=backend, inventory=tmp_path / "hosts.yaml" if backend == "ssh" else None))
    assert seen == [("workers", "local"), ("workers", "netns"), ("agents", "ssh"), ("workers", "auto")]
    assert {name for name, cls in BACKENDS.items() if cls.launcher == "agents"} == {"ssh"}
