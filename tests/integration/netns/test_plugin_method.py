"""A method from outside the project (examples/signvote, installed as a user would: `pip install
./examples/signvote`) runs on netns beside AdamW and DisTrO, named by import path and, separately, by the name its
distribution registers in the entry-point group distro_bench.optimizers: its counted bytes equal its prediction,
its replicas end identical and its validation loss falls. Then `report` and `check` read the run folder in an
environment without the package (exit 0 or 1, never 2): only `run` needs a method's code (issue 47)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from distro_bench import api
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import netns_host

pytestmark = [pytest.mark.root, pytest.mark.slow]  # about 65 s: four methods trained over shaped links

REPO = Path(__file__).resolve().parents[3]
PLUGIN = "signvote"


def _plugin_installed() -> None:
    try:
        import signvote.method  # noqa: F401
    except ImportError:
        pytest.skip("the example plugin is not installed here: pip install ./examples/signvote (.ci/run does)")


def _scenario(tmp_path: Path):
    return scenario_from_dict({
        "name": "plugin",
        "workers": [{"count": 2, "link": "home"}],
        "links": {"home": {"up": "50Mbit", "down": "100Mbit", "delay": "2ms"}},
        "model": {"preset": "tiny", "dim": 64, "n_layers": 2, "n_heads": 4, "ffn_dim": 192, "max_seq_len": 64},
        "data": {"corpus": "builtin:pydoc", "seq_len": 32, "batch_size": 8},
        "train": {"steps": 30, "eval_every": 10, "seed": 0},
        "optimizers": {
            "adamw": {"lr": 3e-3},
            "distro": {"lr": 3e-3, "topk": 8, "values": "1bit"},
            "by-path": {"type": "signvote.method:SignVote", "lr": 3e-3},  # an import path: no registration needed
            PLUGIN: {"lr": 3e-3},  # the name the distribution registers (its type defaults to the run's name)
        },
        "baseline": "adamw",
        "checks": {"min_reduction": 1.5},
    }, base_dir=tmp_path)


def _without_plugin(tmp_path: Path) -> Path:
    """A site-packages folder holding everything this environment has but the plugin (module and metadata)."""
    site = Path(sysconfig.get_paths()["purelib"])
    view = tmp_path / "site-without-plugin"
    view.mkdir()
    for entry in site.iterdir():
        if entry.name.startswith((PLUGIN, "distro_bench_signvote")) or entry.suffix == ".pth":
            continue
        (view / entry.name).symlink_to(entry)
    return view


def test_a_plugin_method_runs_on_netns_and_its_folder_reads_without_it(tmp_path):
    netns_host()
    _plugin_installed()
    scenario = _scenario(tmp_path)
    assert type(scenario.optimizers["by-path"]) is type(scenario.optimizers[PLUGIN])
    result = api.run(scenario, backend="netns", out=tmp_path / "runs", write_report=False)
    run_dir = Path(result.run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    params = None
    for name in ("by-path", PLUGIN):
        o = summary["optimizers"][name]
        assert o["steps"] == 30 and o["replicas_identical"] is True, o
        assert o["final_val_loss"] < o["first_val_loss"], o
        assert o["bytes_vs_prediction"] == "matches", o
        # one all-gather of the packed signs: ceil(parameters / 8) bytes from each of the 2 workers
        predicted = json.loads((run_dir / "prediction.json").read_text())["optimizers"][name]
        params = predicted["params"]
        assert o["payload_tx_bytes_per_step"] == math.ceil(params / 8) == predicted["payload_tx_bytes"], o
        assert o["payload_rx_bytes_per_step"] == predicted["payload_rx_bytes"], o
    assert summary["optimizers"]["adamw"]["payload_tx_bytes_per_step"] > 20 * math.ceil(params / 8)

    # The readers, in an environment without the plugin: no module, no entry point.
    env = {"PYTHONPATH": f"{REPO / 'harness'}:{_without_plugin(tmp_path)}", "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path)}
    absent = subprocess.run([sys.executable, "-S", "-c", "import signvote"], env=env, capture_output=True, text=True)
    assert absent.returncode == 1 and "No module named 'signvote'" in absent.stderr
    for args in (["report", str(run_dir), "--out", str(tmp_path / "report")], ["check", str(run_dir)]):
        done = subprocess.run([sys.executable, "-S", "-m", "distro_bench", *args], env=env, capture_output=True,
                              text=True, timeout=300, cwd=tmp_path)
        assert done.returncode in (0, 1), (args, done.stdout, done.stderr)
    report = (tmp_path / "report" / "report.md").read_text()
    assert PLUGIN in report and "by-path" in report
    code = f"from distro_bench import api; print(api.load_run({str(run_dir)!r}).scenario['optimizers']['by-path']['type'])"
    loaded = subprocess.run([sys.executable, "-S", "-c", code],
                            env=env, capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0 and loaded.stdout.strip() == "signvote.method:SignVote", loaded.stderr
