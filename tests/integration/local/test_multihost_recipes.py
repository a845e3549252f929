"""The sbatch script of `distro-bench export slurm`, run as Slurm would run it, under a fake `srun` (N local
copies of its command, SLURM_NODEID 0..N-1, each in its own session) and a fake `scontrol`: the agents
rendezvous on loopback with shaping disabled and write one run folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from distro_bench import api
from tests.fake_slurm import SRUN_AT_ONCE, install_slurm
from tests.helpers import REPO, free_port, tiny_scenario_dict

pytestmark = pytest.mark.slow  # the slow tier: two agents train under a fake srun

def test_sbatch_script_runs_under_a_fake_srun(tmp_path, write_scenario, cli):
    scen = write_scenario(tiny_scenario_dict(links={"dsl": {"up": "10Mbit", "down": "50Mbit"}},
                                             workers=[{"count": 2, "hardware": "host", "link": "dsl"}]))
    script = tmp_path / "job.sbatch"
    port = free_port()
    r = cli("export", "slurm", scen, "--nnodes", "2", "--dest", script, "--port", str(port))
    assert r.exit_code == 0, r.output
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    install_slurm(bin_dir, SRUN_AT_ONCE)
    out = tmp_path / "results"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(REPO / "harness"),
           "SLURM_JOB_NODELIST": "fake[1-2]", "SLURM_JOB_NUM_NODES": "2", "FAKE_SLURM_HOSTS": "127.0.0.1 127.0.0.2",
           "DISTRO_BENCH": f"{sys.executable} -m distro_bench.cli", "DISTRO_BENCH_SHAPING": "--no-shaping",
           "DISTRO_BENCH_OUT": str(out), "DISTRO_BENCH_THREADS": "1"}
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (folder,) = [p for p in out.iterdir() if p.is_dir()]  # beside it: index.parquet
    run = api.load_run(folder)
    assert run.summary["run"]["backend"] == "multihost" and run.summary["run"]["state"] == "complete"
    assert run.summary["optimizers"]["adamw"]["ranks"] == 2 and run.summary["optimizers"]["adamw"]["replicas_identical"]
    env_json = json.loads((folder / "environment.json").read_text())
    assert [h["node_rank"] for h in env_json["hosts"]] == [0, 1]
    assert all(h["shaping"] is None for h in env_json["hosts"])  # --no-shaping: nothing applied, and it says so
    assert env_json["network"]["network_emulated"] is False
    assert yaml.safe_load((folder / "scenario.yaml").read_text())["name"] == "tiny-test"
