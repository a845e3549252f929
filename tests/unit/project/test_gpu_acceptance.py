"""benchmarks/gpu_acceptance.sh: its CPU dry mode end to end (what CI runs so the GPU script never rots), its
exit codes, the scenario it derives from ci-smoke, and the size-ladder hook."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "benchmarks" / "gpu_acceptance.sh"
STEPS = ["environment", "fidelity", "run", "ladder", "optimizer-compute"]


def _module():
    spec = importlib.util.spec_from_file_location("gpu_acceptance", REPO / "benchmarks" / "gpu_acceptance.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_acceptance"] = mod
    spec.loader.exec_module(mod)
    return mod


def _script(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHON": sys.executable})


@pytest.mark.slow
def test_dry_mode_passes_every_step_and_writes_its_figures(tmp_path):
    """The local backend: the unit tier creates no namespaces (on the GPU box `auto` takes netns where it can)."""
    out = tmp_path / "acceptance.json"
    proc = _script("--dry", "--backend", "local", "--out", str(out), timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for name in STEPS:
        assert any(ln.split()[:2] == ["PASS", name] for ln in lines), (name, proc.stdout)
    assert lines[-1].startswith("PASS: 5 passed, 0 failed, 0 skipped")

    rec = json.loads(out.read_text())
    assert rec["schema_version"] == 1 and rec["mode"] == "dry" and rec["device"] == "cpu" and rec["ok"] is True
    assert set(rec) >= {"finished", "git_commit", "wall_s", "steps"}
    assert list(rec["steps"]) == STEPS
    assert [rec["steps"][s]["status"] for s in STEPS] == ["PASS"] * 5
    # Step 4 trained the ladder's smallest rung on the CPU: both methods, replicas agreeing, below ln 256.
    ladder = rec["steps"]["ladder"]["figures"]
    assert ladder["preset"] == "tiny" and ladder["device"] == "cpu" and ladder["steps"] == 3
    assert set(ladder["methods"]) == {"adamw", "distro"} and 400_000 < ladder["params"] < 600_000
    for row in ladder["methods"].values():
        assert row["steps"] == 3 and row["replicas_identical"] is True and row["final_val_loss"] < 5.545
    env = rec["steps"]["environment"]["figures"]
    assert set(env) >= {"torch", "torch_cuda", "cuda_available", "gpu_count", "device_name", "nccl_version"}
    assert env["torch"] == torch.__version__ and env["missing_modules"] == []
    assert env["process_group"] == "gloo all-reduce ok"
    fid = rec["steps"]["fidelity"]["figures"]
    assert fid["atol"] == 1e-6 and fid["max_share_differing"] == 1e-3
    assert fid["worst_share_vs_demo"] <= 1e-3
    assert set(fid["settings"]) == {"small-fp32", "small-1bit"}
    assert all(s["replicas_identical"] and s["moved"] for s in fid["settings"].values())
    assert fid["payload"]["demo-fp32-int64"] == {"predicted": 900, "counted": 900, "reference": 900}
    assert all(p["predicted"] == p["counted"] > 0 for p in fid["payload"].values())
    run = rec["steps"]["run"]["figures"]
    assert run["backend"] == "local" and run["dist_backend"] == "gloo" and run["worker_devices"] == ["cpu"]
    assert run["state"] == "complete" and run["workers"] == 2
    assert set(run["optimizers"]) == {"adamw", "distro"}
    assert all(o["replicas_identical"] is True and o["steps"] == 4 for o in run["optimizers"].values())
    run_dir = Path(run["run_dir"])
    assert run_dir.parent == tmp_path / "acceptance-runs"
    assert all((run_dir / f).is_file() for f in ["summary.json", "metrics.parquet", "report.md"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the answer of a machine without CUDA")
def test_cuda_mode_without_a_gpu_fails_its_environment_step_and_exits_1(tmp_path):
    out = tmp_path / "a.json"
    proc = _script("--only", "environment", "--out", str(out), timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL  environment torch sees no CUDA device" in proc.stdout
    rec = json.loads(out.read_text())
    assert rec["ok"] is False and rec["mode"] == "cuda" and rec["steps"]["environment"]["status"] == "FAIL"


@pytest.mark.parametrize(("args", "says"), [
    (["--steps", "0"], "--steps: 0 is not a step count"),
    (["--backend", "docker"], "argument --backend: invalid choice: 'docker'"),
    (["--only", "nothing"], "argument --only: invalid choice: 'nothing'"),
])
def test_bad_arguments_exit_2_naming_the_option(args, says):
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_acceptance.py"), *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert says in proc.stderr and "Traceback" not in proc.stderr


def test_the_scenario_is_ci_smoke_with_every_worker_on_the_device():
    """On CUDA the whole ci-smoke (3 seeds, its steps); four workers on one host GPU share it, so the harness picks
    gloo (NCCL refuses two ranks on one GPU); dry, two of the workers on the CPU with one seed."""
    from distro_bench.run.lifecycle import choose_dist_backend
    from distro_bench.scenario.loading import scenario_from_dict

    ga = _module()
    cuda = scenario_from_dict(ga.acceptance_scenario("cuda", dry=False))
    assert [n.hardware.device for n in cuda.nodes()] == ["cuda"] * 4
    assert cuda.train.seeds == [0, 1, 2] and set(cuda.optimizers) == {"adamw", "distro"}
    if torch.cuda.device_count() < 4:
        assert choose_dist_backend(cuda) == "gloo"
    dry = scenario_from_dict(ga.acceptance_scenario("cpu", dry=True))
    assert [n.hardware.device for n in dry.nodes()] == ["cpu"] * 2 and dry.train.seeds == [0]
    assert choose_dist_backend(dry) == "gloo"


def test_ladder_hook_skips_without_the_ladder_then_runs_the_largest_rung(tmp_path, monkeypatch):
    ga = _module()
    monkeypatch.setattr(ga, "LADDER", tmp_path / "absent.py")
    step = ga.ladder_rung(None, "cpu", tmp_path)
    assert step.status == "SKIP" and "does not exist yet" in step.figure
    ladder = tmp_path / "size_ladder.py"
    ladder.write_text("RUNGS = ['tiny', 'small', 'm20']\n"
                      "def run_rung(preset, *, device, out, **small):\n"
                      "    return {'status': 'PASS', 'figure': f'{preset} on {device}', 'val_loss_gap': 0.1, **small}\n")
    monkeypatch.setattr(ga, "LADDER", ladder)
    step = ga.ladder_rung(None, "cpu", tmp_path)
    assert (step.status, step.figure) == ("PASS", "m20: m20 on cpu")
    assert step.figures == {"preset": "m20", "val_loss_gap": 0.1}
    assert ga.ladder_rung("small", "cpu", tmp_path).figures["preset"] == "small"
    # The dry mode (CI) trains the smallest rung, small and short.
    assert ga.ladder_rung(None, "cpu", tmp_path, dry=True).figures == {"preset": "tiny", "val_loss_gap": 0.1,
                                                                         "steps": 3, "workers": 2}


def test_the_optimizer_compute_step_times_every_method_and_writes_its_file(tmp_path):
    """Step 5 in its dry form (the tiny model's tensors on the CPU, 2 workers): the same script the GPU box runs
    at the 1.2B shapes, whose file replaces the projection's assumed CPU-to-H100 rule."""
    mod = _module()
    step = mod.step_optimizer_compute("cpu", tmp_path / "acceptance.json", dry=True)
    assert step.status == "PASS", step.figure
    result = json.loads((tmp_path / "optimizer-compute-dry.json").read_text())
    assert result["device"] == "cpu" and result["model"] == "tiny" and result["copy_bandwidth_Bps"] > 0
    assert set(result["methods"]) >= {"adamw", "distro", "diloco", "sparseloco", "demo-reference"}
    for m in result["methods"].values():
        assert [r["world"] for r in m["per_world"]] == [2] and m["per_world"][0]["step_s_per_param"] > 0
    assert result["methods"]["diloco"]["per_world"][0]["sync_s_per_param"] >= 0  # a periodic method's sync apart
    assert step.figures["ns_per_param"]["distro"] > 0 and "DisTrO" in step.figure
