"""Methods from outside the project (issue 47): `validate` checks a plugin's options with its own model, and the
readers (report, check, compare, export, load_run) read a run folder whose method is not installed here, its
options shown as data. The end-to-end run of a real plugin distribution is tests/integration/netns/
test_plugin_method.py."""

from __future__ import annotations

import json
from typing import Literal

import yaml
from pydantic import Field

from distro_bench import StrategyConfig, api
from distro_bench.results.build import against_prediction
from tests.helpers import make_run, tiny_scenario_dict

HERE = f"{__name__}:VoteConfig"


class VoteConfig(StrategyConfig):
    """A plugin's options model, named by import path (its strategy is not needed to validate)."""

    votes: Literal["majority", "mean"] = "majority"
    rounds: int = Field(default=1, ge=1)


def test_validate_checks_a_plugins_options_with_its_own_model(cli, write_scenario):
    good = write_scenario(tiny_scenario_dict(optimizers={"adamw": {"lr": 1e-3},
                                                         "mine": {"type": HERE, "lr": 1e-3, "votes": "mean"}}))
    r = cli("validate", good)
    assert r.exit_code == 0, r.output
    bad = write_scenario(tiny_scenario_dict(optimizers={
        "adamw": {"lr": 1e-3}, "mine": {"type": HERE, "lr": 1e-3, "votes": "all", "rounds": 0, "bogus": 1}}),
        name="bad.yaml")
    r = cli("validate", bad)
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.split())
    assert "optimizers.mine.votes: Input should be 'majority' or 'mean' (got 'all')" in text, text
    assert "optimizers.mine.rounds: Input should be greater than or equal to 1 (got 0)" in text, text
    assert f"optimizers.mine.bogus: unknown field 'bogus' for optimizer 'mine' (type {HERE}); valid:" in text, text
    assert "Traceback" not in r.output


def test_an_unknown_method_names_the_registry_and_the_import_path_form(cli, write_scenario):
    p = write_scenario(tiny_scenario_dict(optimizers={"adamw": {"lr": 1e-3}, "mine": {"type": "lion", "lr": 1e-3}}))
    r = cli("validate", p)
    text = " ".join(r.output.split())
    assert r.exit_code == 2 and "optimizers.mine.type: unknown optimizer 'lion'; known: adamw," in text, text
    assert "or an import path 'package.module:Class'" in text


def _plugin_run(tmp_path, name="synth"):
    """A run folder whose `mine` was a method of a package not installed here (gone.pkg)."""
    run = make_run(tmp_path, name, optimizers={"adamw": (2_000_000, 2_000_000, 2.40, 0.10),
                                               "mine": (250_000, 250_000, 2.50, 0.10)})
    scen = yaml.safe_load((run / "scenario.yaml").read_text())
    scen["optimizers"]["mine"] = {"type": "gone.pkg:SignVote", "lr": 0.002, "momentum": 0.9, "votes": "majority"}
    (run / "scenario.yaml").write_text(yaml.safe_dump(scen, sort_keys=False))
    return run


def test_the_readers_read_a_folder_whose_method_is_not_installed(tmp_path, cli):
    run = _plugin_run(tmp_path)
    loaded = api.load_run(run)
    assert loaded.scenario["optimizers"]["mine"] == {"type": "gone.pkg:SignVote", "lr": 0.002, "momentum": 0.9,
                                                     "votes": "majority"}
    r = cli("report", run, "--out", tmp_path / "report")
    assert r.exit_code == 0, r.output
    assert "mine" in (tmp_path / "report" / "report.md").read_text()
    r = cli("check", run, "--min-reduction", "2")
    assert r.exit_code in (0, 1), r.output
    other = _plugin_run(tmp_path, "synth2")
    r = cli("report", run, other, "--out", tmp_path / "compare")
    assert r.exit_code == 0, r.output
    r = cli("export", run, "--to", "tensorboard", "--dest", tmp_path / "tb")
    assert r.exit_code == 0, r.output


def test_a_shipped_methods_stored_options_are_still_checked(tmp_path, cli):
    run = make_run(tmp_path)
    scen = yaml.safe_load((run / "scenario.yaml").read_text())
    scen["optimizers"]["distro"]["topk"] = "many"
    (run / "scenario.yaml").write_text(yaml.safe_dump(scen, sort_keys=False))
    r = cli("check", run)
    assert r.exit_code == 2 and "topk" in r.output


def test_counted_bytes_against_the_prediction():
    figures = {"payload_tx_bytes_per_step": 100.0, "payload_rx_bytes_per_step": 300.0}
    assert against_prediction(figures, 400.0) == {"payload_predicted_bytes_per_step": 400.0,
                                                  "bytes_vs_prediction": "matches"}
    assert against_prediction(figures, 500.0)["bytes_vs_prediction"] == "differs"
    assert against_prediction(figures, None) == {"payload_predicted_bytes_per_step": None,
                                                 "bytes_vs_prediction": "not predicted"}


def test_the_report_says_counted_not_predicted_and_flags_a_difference(tmp_path, cli):
    run = make_run(tmp_path, optimizers={"adamw": (2_000_000, 2_000_000, 2.40, 0.10),
                                         "distro": (1_000, 3_000, 2.55, 0.10)})
    summary = json.loads((run / "summary.json").read_text())
    summary["optimizers"]["adamw"].update(payload_predicted_bytes_per_step=1_000_000, bytes_vs_prediction="differs")
    summary["optimizers"]["distro"].update(payload_predicted_bytes_per_step=None, bytes_vs_prediction="not predicted")
    (run / "summary.json").write_text(json.dumps(summary))
    r = cli("report", run, "--out", tmp_path / "r")
    assert r.exit_code == 0, r.output
    text = " ".join((tmp_path / "r" / "report.md").read_text().split())
    assert "distro: bytes counted, not predicted" in text
    assert "adamw: FLAGGED, counted payload" in text and "differs from its prediction" in text


def test_run_records_from_before_the_registry_still_read():
    # The committed records (scenario.yaml and summary.json; most written before issue 47): every method name
    # they hold resolves through the one registry, and a summary from before it migrates with no prediction
    # keys, while one written since keeps its own.
    from distro_bench.results.rundir import read_scenario, read_summary
    from tests.helpers import REPO

    folders = sorted({p.parent for p in (REPO / "benchmarks").rglob("scenario.yaml")
                      if (p.parent / "summary.json").is_file()})
    before = [f for f in folders
              if all("bytes_vs_prediction" not in o
                     for o in json.loads((f / "summary.json").read_text())["optimizers"].values())]
    assert before and len(before) < len(folders)  # both kinds are committed
    for folder in folders:
        scenario, summary = read_scenario(folder), read_summary(folder)
        assert scenario and summary and set(summary["optimizers"]) <= set(scenario["optimizers"]), folder
        got = {o.get("bytes_vs_prediction") for o in summary["optimizers"].values()}
        assert got == {None} if folder in before else got <= {"matches", "differs", "not predicted"}, folder


def test_validating_the_shipped_methods_imports_no_torch():
    # The registry names the shipped options models (torch-free); only `run` imports a strategy.
    import subprocess
    import sys

    from tests.helpers import REPO

    code = ("import sys; from distro_bench.scenario.loading import load_scenario; "
            "s = load_scenario('scenarios/home-dsl.yaml'); print(sorted(s.optimizers), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                         env={"PYTHONPATH": str(REPO / "harness"), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip().endswith("False"), (out.stdout, out.stderr)


def test_the_unprivileged_worker_is_probed_for_a_plugins_module_too(tmp_path):
    # A package the worker's uid cannot import (installed in a private home folder) must not become a worker
    # traceback: the reach probe looks for it, and the worker then keeps the coordinator's uid, capability-free.
    import subprocess
    import sys

    from distro_bench.backends.base import _REACH_PROBE, worker_modules
    from distro_bench.scenario.loading import scenario_from_dict

    s = scenario_from_dict(tiny_scenario_dict(optimizers={"adamw": {"lr": 1e-3}, "mine": {"type": HERE, "lr": 1e-3}}))
    assert worker_modules(s) == ["module:tests"]
    probe = subprocess.run([sys.executable, "-c", _REACH_PROBE, str(tmp_path), "module:nowhere_at_all"],
                           capture_output=True, text=True)
    assert probe.returncode == 1 and "module nowhere_at_all" in probe.stdout
