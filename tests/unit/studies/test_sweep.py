"""Sweep grid parsing and validation, the sweep folder with a stand-in runner (no training), and --pick best."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from distro_bench.errors import InputError, Interrupted, ScenarioError
from distro_bench.scenario.loading import load_scenario
from distro_bench.studies.sweep import run_sweep
from distro_bench.studies.sweep_grid import grid, parse_set, parse_sets, point_scenario, validate_grid
from tests.unit.runfolders import make_run

ROOT = Path(__file__).resolve().parents[3]
SMOKE = ROOT / "scenarios" / "ci-smoke.yaml"
HOME = ROOT / "scenarios" / "home-dsl.yaml"


def test_parse_set_values_and_errors():
    a = parse_set("optimizers.distro.lr=1e-3, 3e-3,1e-2")
    assert a.path == "optimizers.distro.lr" and a.values == (0.001, 0.003, 0.01) and a.texts == ("1e-3", "3e-3", "1e-2")
    assert a.optimizer == "distro" and not a.is_rate
    r = parse_set("links.dsl.up=1Mbit,10Mbit")
    assert r.values == ("1Mbit", "10Mbit") and r.is_rate and r.optimizer is None
    assert parse_set("optimizers.distro.bucket=true,false").values == (True, False)
    assert parse_set("train.steps=10,20").values == (10, 20)
    for bad in ("optimizers.distro.lr", "=1,2", "a..b=1", "optimizers.distro.lr=1,,2", "x=1,1"):
        with pytest.raises(InputError):
            parse_set(bad)
    with pytest.raises(InputError, match="more than once"):
        parse_sets(["train.steps=1", "train.steps=2"])


def test_grid_is_every_combination():
    pts = grid(parse_sets(["optimizers.distro.lr=1e-3,3e-3", "links.dsl.up=1Mbit,10Mbit,100Mbit"]))
    assert len(pts) == 6 and pts[0].values == {"optimizers.distro.lr": 0.001, "links.dsl.up": "1Mbit"}
    assert pts[5].texts == {"optimizers.distro.lr": "3e-3", "links.dsl.up": "100Mbit"}
    assert len({p.folder_name for p in pts}) == 6


def test_points_validate_like_scenarios():
    s = load_scenario(HOME)
    (_p, scen), *_ = validate_grid(s, parse_sets(["links.dsl.up=1Mbit", "optimizers.distro.lr=1e-3"]))
    node = scen.nodes()[0]
    # a preset link named by path starts from the preset: only `up` changes
    assert node.link.up == 1_000_000 and node.link.down == 50_000_000 and node.link.delay == 0.015
    assert scen.optimizer_configs()["distro"].lr == 0.001
    with pytest.raises(ScenarioError) as e:
        validate_grid(s, parse_sets(["optimizers.distro.lr=1e-3,-1", "links.dsl.up=1Mbit,10Mbps"]))
    text = " ".join(e.value.problems)
    assert "optimizers.distro.lr" in text and "links.dsl.up" in text and "10Mbps" in text
    assert len(e.value.problems) == 2  # each bad value once, not once per point
    with pytest.raises(InputError, match="not an optimizer"):
        point_scenario(s, grid(parse_sets(["optimizers.sgd.lr=1"]))[0])


def test_fixed_budget_applies_at_every_point():
    s = load_scenario(SMOKE)  # steps 30, eval_every 10
    pts = validate_grid(s, parse_sets(["optimizers.distro.lr=1e-3,3e-3"]), fixed={"train.steps": 4})
    assert [(sc.train.steps, sc.train.eval_every) for _, sc in pts] == [(4, 4), (4, 4)]
    assert pts[0][0].label == "optimizers.distro.lr=1e-3"  # fixed settings are not part of the grid


def _fake_runner(calls: list):
    """Writes a synthetic run folder whose distro val loss is lowest at lr 3e-3."""
    def run(scen, folder):
        calls.append(list(scen.optimizers))
        lrs = {n: c.lr for n, c in scen.optimizer_configs().items()}
        opts = {}
        for n in scen.optimizers:
            final = 2.4 if n == "adamw" else 2.5 + 100 * abs(lrs[n] - 3e-3)
            opts[n] = (2_000_000, 2_000_000, final, 0.3) if n == "adamw" else (2_000, 5_000, final, 0.05)
        d = make_run(folder, f"{scen.name}-{len(calls)}", scenario=scen.name, optimizers=opts, seeds=2, ranks=1,
                     steps=10)
        return SimpleNamespace(run_dir=d, state="complete", summary=json.loads((d / "summary.json").read_text()))
    return run


def test_sweep_folder_table_and_pick_best(tmp_path):
    s = load_scenario(SMOKE)
    calls = []
    res = run_sweep(s, parse_sets(["optimizers.distro.lr=1e-3,3e-3,1e-2"]), out=tmp_path, run=_fake_runner(calls),
                    pick_best=True)
    # adamw is the same at every point: trained once, reused twice
    assert calls == [["adamw", "distro"], ["distro"], ["distro"]]
    d = res.sweep_dir
    assert d.parent == tmp_path and d.name.startswith("ci-smoke-sweep-")
    sweep = json.loads((d / "sweep.json").read_text())
    assert sweep["state"] == "complete" and len(sweep["points"]) == 3
    assert sweep["points"][1]["optimizers"]["adamw"]["reused_from"] == 0
    # distro ran without adamw at point 1: its reduction is against the reused adamw, not itself
    assert sweep["points"][1]["optimizers"]["distro"]["reduction_vs_baseline"] > 500
    for p in sweep["points"]:
        assert (d / p["run_dir"] / "summary.json").is_file()
    csv = (d / "sweep.csv").read_text().splitlines()
    assert csv[0].startswith("point,optimizers.distro.lr,optimizer") and len(csv) == 1 + 6
    best = yaml.safe_load((d / "best.yaml").read_text())
    assert best == {"optimizers": {"distro": {"lr": 0.003}}}
    follow = load_scenario(d / "best-scenario.yaml")
    assert follow.optimizer_configs()["distro"].lr == 0.003 and follow.optimizer_configs()["adamw"].lr == 3e-3
    for f in res.files:
        assert f.is_file() and f.stat().st_size > 0
    assert any(f.name.startswith("sweep_0_optimizers_distro_lr") for f in res.files)
    md = (d / "report.md").read_text()
    assert "Best setting per method" in md and "distro: optimizers.distro.lr=3e-3" in md
    # one target for the whole sweep: the highest best val loss (distro at lr 1e-2), reached by everyone
    # (seed 1's losses are 0.03 above seed 0's, so 0.015 above the mean over the two seeds)
    assert sweep["common_target"]["val_loss"] == pytest.approx(max(
        p["optimizers"]["distro"]["final_val_loss"] for p in sweep["points"]) + 0.015)
    for p in sweep["points"]:
        assert all(o["time_to_common_target_s"] > 0 for o in p["optimizers"].values())
    # the folder can be re-read and its report rewritten
    from distro_bench.studies.sweep import rewrite

    again = rewrite(d)
    assert again.target == sweep["common_target"] and (d / "report.md").read_text() == md


def test_pick_at_the_grid_edge_warns_and_is_recorded(tmp_path):
    """3e-3 is DisTrO's best; a grid that ends there cannot say whether a higher rate is better still."""
    s = load_scenario(SMOKE)
    res = run_sweep(s, parse_sets(["optimizers.distro.lr=3e-3,1e-3,1e-4"]), out=tmp_path, run=_fake_runner([]),
                    pick_best=True)
    by = res.best["by"]["distro"]
    assert by["settings"] == {"optimizers.distro.lr": "3e-3"}
    assert by["at_edge"] == [{"path": "optimizers.distro.lr", "value": "3e-3", "side": "highest"}]
    assert res.best["warnings"] and "highest value of its grid" in res.best["warnings"][0]
    sweep = json.loads((res.sweep_dir / "sweep.json").read_text())
    assert sweep["best"]["by"]["distro"]["at_edge"][0]["side"] == "highest"
    assert "Warning: distro: optimizers.distro.lr=3e-3 is the highest" in (res.sweep_dir / "report.md").read_text()
    inside = run_sweep(s, parse_sets(["optimizers.distro.lr=1e-3,3e-3,1e-2"]), out=tmp_path, run=_fake_runner([]),
                       pick_best=True)
    assert inside.best["by"]["distro"]["at_edge"] == [] and not inside.best.get("warnings")


def test_best_scenario_reports_on_seeds_not_used_in_tuning(tmp_path):
    s = point_scenario(load_scenario(SMOKE), grid(parse_sets(["train.steps=10"]))[0], {"train.seeds": [0, 1, 2]})
    res = run_sweep(s, parse_sets(["optimizers.distro.lr=1e-3,3e-3,1e-2"]), out=tmp_path, run=_fake_runner([]),
                    pick_best=True)
    follow = load_scenario(res.sweep_dir / "best-scenario.yaml")
    assert follow.train.seed_list() == [3, 4, 5]  # as many as the tuning used, none of them
    assert res.best["final_seeds"] == [3, 4, 5]


def test_pick_selects_on_the_tuning_split_and_reports_on_validation(tmp_path):
    """Issue 27: the pick reads `final_tune_loss` (held-out tuning split), never the report's `final_val_loss`.
    Here validation favours lr 3e-3 and the tuning split 1e-2: the pick must follow the tuning split."""
    s = load_scenario(SMOKE)
    inner = _fake_runner([])
    tune_batches = []

    def run(scen, folder):
        tune_batches.append(scen.data.tune_batches)
        result = inner(scen, folder)
        for n, figs in result.summary["optimizers"].items():
            lr = scen.optimizer_configs()[n].lr
            figs["final_tune_loss"] = 2.0 + 100 * abs(lr - 1e-2)
        return result

    res = run_sweep(s, parse_sets(["optimizers.distro.lr=1e-3,3e-3,1e-2"]), out=tmp_path, run=run, pick_best=True)
    # every trial evaluated the tuning split (as many batches as validation)
    assert tune_batches == [s.data.val_batches] * 3
    by = res.best["by"]["distro"]
    assert by["metric"] == "final_tune_loss" and by["settings"] == {"optimizers.distro.lr": "1e-2"}
    assert yaml.safe_load((res.sweep_dir / "best.yaml").read_text()) == {"optimizers": {"distro": {"lr": 0.01}}}
    # the follow-up run reports validation only: it does not spend time on the tuning split
    assert load_scenario(res.sweep_dir / "best-scenario.yaml").data.tune_batches == 0
    sweep = json.loads((res.sweep_dir / "sweep.json").read_text())
    assert sweep["points"][2]["optimizers"]["distro"]["final_tune_loss"] == pytest.approx(2.0)
    assert "final tune loss" in (res.sweep_dir / "report.md").read_text()
    # without a pick, no trial pays for the tuning split
    tune_batches.clear()
    run_sweep(s, parse_sets(["optimizers.distro.lr=1e-3"]), out=tmp_path, run=run)
    assert tune_batches == [0]


def test_cli_pick_best_tunes_on_three_seeds_by_default(cli, monkeypatch, tmp_path):
    import distro_bench.studies.sweep as sweep_mod

    seen = {}

    def fake_run_sweep(scenario, axes, **kw):
        seen.update(kw)
        raise InputError("stop here")

    monkeypatch.setattr(sweep_mod, "run_sweep", fake_run_sweep)
    r = cli("sweep", SMOKE, "--set", "optimizers.distro.lr=1e-3,3e-3", "--pick", "best", "--out", tmp_path)
    assert r.exit_code == 2 and len(seen["fixed"]["train.seeds"]) == 3
    seen.clear()
    cli("sweep", SMOKE, "--set", "optimizers.distro.lr=1e-3,3e-3", "--pick", "best", "--repeat", "5", "--out", tmp_path)
    assert len(seen["fixed"]["train.seeds"]) == 5
    seen.clear()
    cli("sweep", SMOKE, "--set", "optimizers.distro.lr=1e-3,3e-3", "--out", tmp_path)
    assert "train.seeds" not in seen["fixed"]  # no pick: the scenario's own seeds


def test_cli_pick_best_refuses_fewer_than_three_seeds_unless_told(cli, monkeypatch, tmp_path):
    import distro_bench.studies.sweep as sweep_mod

    seen = {}

    def fake_run_sweep(scenario, axes, **kw):
        seen.update(kw)
        raise InputError("stop here")

    monkeypatch.setattr(sweep_mod, "run_sweep", fake_run_sweep)
    # issue 35: `--pick best --repeat 1` tuned on seed 0 alone, with no warning
    r = cli("sweep", SMOKE, "--set", "optimizers.distro.lr=1e-3,3e-3", "--pick", "best", "--repeat", "1",
            "--out", tmp_path)
    assert r.exit_code == 2 and not seen and "Traceback" not in r.output
    assert "--repeat: 1 seed(s) per point is too few for --pick best" in r.output and "--allow-few-seeds" in r.output
    r = cli("sweep", SMOKE, "--set", "optimizers.distro.lr=1e-3,3e-3", "--pick", "best", "--repeat", "2",
            "--allow-few-seeds", "--out", tmp_path)
    assert seen["fixed"]["train.seeds"] == [0, 1]  # told: it runs (and stops at the fake)
    seen.clear()
    cli("sweep", SMOKE, "--set", "optimizers.distro.lr=1e-3,3e-3", "--repeat", "1", "--out", tmp_path)
    assert seen["fixed"]["train.seeds"] == [0]  # no pick: one seed is a plain sweep


def test_rate_sweep_draws_the_crossing(tmp_path):
    s = load_scenario(HOME)

    def run(scen, folder):
        # adamw's step time falls with the rate, distro's barely: measured crossing between 10 and 100 Mbit
        rate = scen.nodes()[0].link.up
        step = {"adamw": 0.05 + 20e6 / rate, "distro": 0.6}
        d = make_run(folder, f"{scen.name}-{rate}", scenario=scen.name, seeds=1, ranks=1, steps=10,
                     optimizers={"adamw": (2_000_000, 2_000_000, 2.4, step["adamw"]),
                                 "distro": (2_000, 5_000, 2.5, step["distro"])})
        return SimpleNamespace(run_dir=d, state="complete", summary=json.loads((d / "summary.json").read_text()))

    res = run_sweep(s, parse_sets(["links.dsl.up=1Mbit,10Mbit,100Mbit"]), out=tmp_path, run=run)
    png = res.sweep_dir / "plots" / "sweep_crossing.png"
    assert png.is_file() and png.stat().st_size > 0
    crossing = json.loads((res.sweep_dir / "crossing.json").read_text())
    (c,) = crossing["measured"]["distro vs adamw"]
    assert 10e6 < c < 100e6
    assert "predicted" in crossing


def test_table_takes_null_intervals():
    from distro_bench.studies.sweep import PointResult, table_frame

    pts = grid(parse_sets(["optimizers.distro.lr=1e-3"]))
    figs = {"final_val_loss": 2.5, "ci95": {"final_val_loss": None, "step_time_s_mean": [0.1, 0.2]}}
    frame = table_frame([PointResult(pts[0], "complete", None, {"distro": figs})])
    assert "final_val_loss_lo" not in frame.columns and frame["step_time_s_mean_hi"].iloc[0] == 0.2


def test_interrupt_keeps_finished_points(tmp_path):
    s = load_scenario(SMOKE)
    inner = _fake_runner([])
    n = {"calls": 0}

    def run(scen, folder):
        n["calls"] += 1
        if n["calls"] == 2:
            raise Interrupted("interrupted")
        return inner(scen, folder)

    with pytest.raises(Interrupted, match="1 finished point"):
        run_sweep(s, parse_sets(["optimizers.distro.lr=1e-3,3e-3,1e-2"]), out=tmp_path, run=run)
    (d,) = tmp_path.iterdir()
    sweep = json.loads((d / "sweep.json").read_text())
    assert sweep["state"] == "incomplete" and [p["state"] for p in sweep["points"]] == ["complete", "incomplete"]
    assert (d / "report.md").is_file()


def test_cli_bad_set_exits_2(cli):
    r = cli("sweep", SMOKE, "--set", "optimizers.distro.lrr=1e-3")
    assert r.exit_code == 2 and "optimizers.distro.lrr" in r.output and "Traceback" not in r.output
    r = cli("sweep", SMOKE, "--set", "train.steps=5", "--pick", "worst")
    assert r.exit_code == 2 and "--pick" in r.output
