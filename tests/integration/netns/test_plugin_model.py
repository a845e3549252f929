"""A model from outside the project (examples/tinymlp-model, installed as a user would: `pip install
./examples/tinymlp-model`), named by its factory's import path, trains on netns beside AdamW and DisTrO: validation
loss falls, replicas end identical, counted bytes equal the prediction made from the model's own shapes (meta
device), and summary.json states its parameters and FLOPs basis. Then `report` and `check` read the run folder in
an environment without the package (exit 0 or 1, never 2): only `run` needs the model's code (issue 47)."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from distro_bench import api
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.train.models import parameter_count
from tests.helpers import netns_host

pytestmark = [pytest.mark.root, pytest.mark.slow]  # about 25 s: two methods trained over shaped links

REPO = Path(__file__).resolve().parents[3]
PACKAGE = "tinymlp"


def _installed() -> None:
    try:
        import tinymlp  # noqa: F401
    except ImportError:
        pytest.skip("the example model is not installed here: pip install ./examples/tinymlp-model (.ci/run does)")


def _without_package(tmp_path: Path) -> Path:
    """A site-packages folder holding everything this environment has but the model's distribution."""
    site = Path(sysconfig.get_paths()["purelib"])
    view = tmp_path / "site-without-model"
    view.mkdir()
    for entry in site.iterdir():
        if entry.name.startswith((PACKAGE, "tinymlp_model")) or entry.suffix == ".pth":
            continue
        (view / entry.name).symlink_to(entry)
    return view


def test_a_model_factory_from_another_distribution_trains_on_netns_and_its_folder_reads_without_it(tmp_path):
    netns_host()
    _installed()
    scenario = scenario_from_dict({
        "name": "plugin-model",
        "workers": [{"count": 2, "link": "home"}],
        "links": {"home": {"up": "50Mbit", "down": "100Mbit", "delay": "2ms"}},
        "model": {"factory": "tinymlp:build", "args": {"dim": 32, "context": 8, "hidden": 256}},
        "data": {"corpus": "builtin:pydoc", "seq_len": 32, "batch_size": 8},
        "train": {"steps": 30, "eval_every": 10, "seed": 0},
        "optimizers": {"adamw": {"lr": 3e-3}, "distro": {"lr": 5e-3, "topk": 4, "values": "1bit", "bucket": True}},
        "baseline": "adamw",
    }, base_dir=tmp_path)
    result = api.run(scenario, backend="netns", out=tmp_path / "runs", write_report=False)
    run_dir = Path(result.run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    for name, o in summary["optimizers"].items():
        assert o["steps"] == 30 and o["replicas_identical"] is True, (name, o)
        assert o["final_val_loss"] < o["first_val_loss"] - 0.5, (name, o)
        assert o["bytes_vs_prediction"] == "matches", (name, o)
    params = parameter_count(scenario.resolved_model())
    assert params == 256 * 32 + (8 * 32 * 256 + 256) + (256 * 256 + 256)  # embedding, hidden, output
    assert summary["model"] == {"parameters": params, "flops_per_token": 6.0 * params,
                                "flops_basis": "6 x parameters (estimate)"}
    assert summary["optimizers"]["adamw"]["payload_tx_bytes_per_step"] == 4 * params  # fp32 gradients, all-reduced

    env = {"PYTHONPATH": f"{REPO / 'harness'}:{_without_package(tmp_path)}", "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path)}
    absent = subprocess.run([sys.executable, "-S", "-c", "import tinymlp"], env=env, capture_output=True, text=True)
    assert absent.returncode == 1 and "No module named 'tinymlp'" in absent.stderr
    for args in (["report", str(run_dir), "--out", str(tmp_path / "report")], ["check", str(run_dir)]):
        done = subprocess.run([sys.executable, "-S", "-m", "distro_bench", *args], env=env, capture_output=True,
                              text=True, timeout=300, cwd=tmp_path)
        assert done.returncode in (0, 1), (args, done.stdout, done.stderr)
    assert "Model: factory tinymlp:build" in (tmp_path / "report" / "report.md").read_text()
