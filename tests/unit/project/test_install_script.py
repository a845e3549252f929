"""install.sh where only a PyPI mirror is reachable (issue 38): the default falls back to PyPI's torch and says
so; TORCH=cpu stops with one line naming TORCH=pypi. Run against a stand-in venv python that records each pip
call and fails the ones aimed at PyTorch's index, as an unreachable index does: no network, nothing installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

FAKE_PYTHON = r"""#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/../calls.log"
case "$*" in
  "-c import torch") exit 1 ;;  # no torch in the venv yet
  *"--no-index"*) exit 1 ;;  # no local wheel
  *"download.pytorch.org"*) echo "ERROR: No matching distribution found for torch>=2.4" >&2; exit 1 ;;
  *"import torch, distro_bench"*) echo "install.sh: ready: torch 2.5.1 (CUDA 12.4) | distro-bench 0.1.0" ;;
esac
exit 0
"""


def _install(tmp_path: Path, torch: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    if shutil.which("bash") is None:
        pytest.skip("install.sh needs bash")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    py = venv / "bin" / "python"
    py.write_text(FAKE_PYTHON)
    py.chmod(0o755)
    env = {**os.environ, "VENV": str(venv), "TORCH": torch, "PATH": os.environ.get("PATH", "")}
    out = subprocess.run(["bash", str(REPO / "install.sh")], env=env, capture_output=True, text=True, timeout=60)
    return out, (venv / "calls.log").read_text().splitlines()


def test_default_falls_back_to_pypi_torch_and_says_so(tmp_path):
    if shutil.which("nvidia-smi") and "GPU" in subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                                                              text=True).stdout:
        pytest.skip("nvidia-smi lists a GPU: TORCH=auto means pypi here, there is no CPU index to fall back from")
    out, calls = _install(tmp_path, "auto")
    assert out.returncode == 0, out.stdout + out.stderr
    pip_torch = [c for c in calls if "install" in c and "torch>=2.4" in c and "--no-index" not in c]
    assert len(pip_torch) == 2 and "download.pytorch.org/whl/cpu" in pip_torch[0], calls
    assert "--index-url" not in pip_torch[1], calls  # PyPI (the configured index) the second time
    assert "installing PyPI's torch" in out.stdout and "TORCH=cpu" in out.stdout and "TORCH=pypi" in out.stdout
    assert "ready: torch 2.5.1 (CUDA 12.4)" in out.stdout  # which build it installed


def test_torch_cpu_insists_and_says_how_to_choose(tmp_path):
    out, calls = _install(tmp_path, "cpu")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "TORCH=pypi" in out.stderr and "could not be installed" in out.stderr
    assert not any("install" in c and "torch>=2.4" in c and "--index-url" not in c and "--no-index" not in c
                   for c in calls), calls
