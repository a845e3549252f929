"""Issue 27's report fixes: the Scenario section names the budget and seeds the run used, and the loss
bands cover only the steps every seed ran."""

from __future__ import annotations

import yaml

from distro_bench.report import describe
from distro_bench.report.load import load_for_report
from distro_bench.report.plots import curves
from tests.unit.runfolders import make_run


def _text(blocks) -> str:
    return " ".join(str(getattr(b, "text", "")) + " ".join(getattr(b, "items", []) or []) for b in blocks)


def test_scenario_section_names_a_time_budget_and_the_seeds(tmp_path):
    run = make_run(tmp_path)
    scen = yaml.safe_load((run / "scenario.yaml").read_text())
    scen["train"] = {"time_budget": "60s", "eval_every": 4, "seeds": [0, 1, 2]}
    (run / "scenario.yaml").write_text(yaml.safe_dump(scen))
    text = _text(describe.scenario_blocks(load_for_report(run)))
    assert "None steps" not in text and "seed 0" not in text
    assert "60s of training per optimizer" in text and "3 seeds (0, 1, 2)" in text


def test_loss_bands_stop_where_a_seed_stops(tmp_path):
    import pandas as pd

    run = load_for_report(make_run(tmp_path))
    df = run.data.metrics[run.data.metrics["optimizer"] == "distro"]
    last = df["step"].max()
    # seed 2 stops 5 steps early (a time budget ends each seed at its own step)
    cut = df[~((df["seed"] == 2) & (df["step"] > last - 5))]
    c = curves(pd.DataFrame(cut))
    assert c["step"].max() == last - 5 and (c["seeds"] == 3).all()


def test_banner_when_the_hardware_profile_was_not_present_and_the_host_was_busy(tmp_path):
    import json

    from distro_bench.report.run_report import _banners

    path = make_run(tmp_path)  # gaming-pc: an 80 TFLOPS GPU asked for; the workers' start records say cpu
    text = " ".join(b.text for b in _banners(load_for_report(path)))
    assert "Hardware profile not present: gaming-pc (80 TFLOPS GPU)" in text and "busy" not in text
    env = json.loads((path / "environment.json").read_text())
    (path / "environment.json").write_text(json.dumps({**env, "load_avg": [3.5, 2.0, 1.0], "cpu_count": 2}))
    text = " ".join(b.text for b in _banners(load_for_report(path)))
    assert "load average 3.5 on 2 cores" in text
    # a run on the GPU the profile asked for has no such banner
    for f in (path / "workers").rglob("rank*.jsonl"):
        f.write_text(f.read_text().replace('"device": "cpu"', '"device": "cuda:0"'))
    assert "Hardware profile" not in " ".join(b.text for b in _banners(load_for_report(path)))


def test_time_to_target_plot_keeps_its_title_and_rows_when_nothing_reached(tmp_path):
    import json

    import matplotlib

    matplotlib.use("Agg")
    from distro_bench.report import plots

    path = make_run(tmp_path)
    summary = json.loads((path / "summary.json").read_text())
    summary["run"]["budget"] = {"kind": "time", "value": 20}
    summary["target"] = {"val_loss": 1.0, "how": "checks.target_val_loss in the scenario, a long reason " * 3}
    for s in summary["optimizers"].values():
        s["time_to_target_s"], s["target_reached"] = None, 0
    (path / "summary.json").write_text(json.dumps(summary))
    out = tmp_path / "plots"
    out.mkdir()
    captured = {}
    orig = plots.save

    def keep(fig, p, root=None):
        ax = fig.axes[0]
        captured.update(title=ax.get_title(), xlim=ax.get_xlim(), ylim=ax.get_ylim(),
                        texts=[t.get_text() for t in ax.texts])
        orig(fig, p, root=root)

    plots.save = keep
    try:
        plots.time_to_target(load_for_report(path), out)
    finally:
        plots.save = orig
    assert max(len(line) for line in captured["title"].splitlines()) <= 90  # wrapped, not cut off
    assert captured["xlim"][0] == 0 and captured["xlim"][1] >= 20  # "not reached" at 0 s and the budget line
    assert captured["ylim"] == (1.5, -0.5)
    assert any("not reached by every seed (0/3 did)" in t for t in captured["texts"])
