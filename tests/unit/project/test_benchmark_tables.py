"""The figures issue 17's benchmarks print, from made-up runs: the overlap ratios of
benchmarks/overlap_step.py and the shoot-out ranking of benchmarks/methods_shootout.py."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import make_run

REPO = Path(__file__).resolve().parents[3]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # a dataclass resolves its annotations through its module
    spec.loader.exec_module(mod)
    return mod


def _records(opt: str, step_s: float, compute_s: float, comm_s: float) -> list[dict]:
    rows = []
    for rank in range(2):
        for step in range(5):
            slow = 10.0 if step == 0 else 1.0  # start-up: left out by skip=1
            rows.append({"optimizer": opt, "seed": 0, "rank": rank, "step": step, "step_time_s": step_s * slow,
                         "compute_s": compute_s, "comm_s": comm_s, "compress_s": 0.01, "apply_s": 0.01})
    return rows


def test_overlap_ratios_against_both_readings_of_compute():
    ov = _load("overlap_step")
    df = pd.DataFrame(_records("distro", 0.5, 0.3, 0.15) + _records("distro-overlap", 0.385, 0.31, 0.02))
    [r] = ov.ratios(ov.per_seed(df, skip=1), "distro-overlap")
    assert r["vs_work"] == pytest.approx(0.385 / 0.35)  # plain run's local work: 0.5 - 0.15
    assert r["vs_fwd_bwd"] == pytest.approx(0.385 / 0.3)
    assert r["vs_own_work"] == pytest.approx(0.385 / 0.365)
    assert r["speedup"] == pytest.approx(0.5 / 0.385)


def test_overlap_ratio_takes_communication_when_it_dominates():
    ov = _load("overlap_step")
    df = pd.DataFrame(_records("distro", 0.33, 0.09, 0.22) + _records("distro-overlap", 0.2, 0.14, 0.045))
    [r] = ov.ratios(ov.per_seed(df, skip=1), "distro-overlap")
    assert r["vs_work"] == pytest.approx(0.2 / 0.22)
    assert r["vs_fwd_bwd"] == pytest.approx(0.2 / 0.22)


def test_overlap_report_needs_both_runs(tmp_path, capsys):
    ov = _load("overlap_step")
    run = make_run(tmp_path, optimizers={"distro": (1e3, 3e3, 2.5, 0.1)})
    assert ov.report(run, skip=1, overlapped=["distro-overlap", "distro-eager"]) == 2
    assert "distro-overlap" in capsys.readouterr().err


def test_shootout_ranks_by_time_to_target(tmp_path):
    so = _load("methods_shootout")
    # adamw: 8 MB a step (slower steps), higher final loss; distro: fast steps, lower loss: it reaches the
    # common target first. sparse: never gets below the others' best, so it sets the target and is last.
    run = make_run(tmp_path, optimizers={"adamw": (4e6, 4e6, 2.6, 0.1), "distro": (1e3, 3e3, 2.5, 0.1),
                                         "sparse": (1e3, 3e3, 2.7, 0.3)})
    lines = so.table(run).splitlines()
    assert lines[0].startswith("target val loss")
    rows = [line for line in lines if line.startswith("| ") and line[2].isdigit()]
    assert [r.split("|")[2].strip() for r in rows] == ["distro", "adamw", "sparse"]
    assert "8,000,000" in rows[1]  # adamw's payload tx + rx per step
    assert rows[0].rstrip(" |").endswith("-")  # no goodput recorded (a run from before it): nothing made up
    summary = json.loads((run / "summary.json").read_text())
    summary["optimizers"]["distro"].update({"goodput_model_flops_per_s": 2.5e9, "goodput_of_peak": 0.125,
                                            "ci95": {"goodput_model_flops_per_s": [2e9, 3e9]}})
    (run / "summary.json").write_text(json.dumps(summary))
    distro = next(line for line in so.table(run).splitlines() if "| distro |" in line)
    assert distro.endswith("| 2,500 [2,000, 3,000] (12.5% of peak) |")


def test_overlap_loss_inside_or_outside_the_plain_interval():
    ov = _load("overlap_step")
    rows = []
    for seed, plain in enumerate([3.0, 3.2, 3.1]):  # mean 3.1, 95% interval about [2.85, 3.35]
        for opt, val in (("distro", plain), ("distro-overlap", plain + 0.05 if seed else 3.9)):
            rows.append({"optimizer": opt, "seed": seed, "rank": 0, "step": 9, "val_loss": val})
            rows.append({"optimizer": opt, "seed": seed, "rank": 1, "step": 9, "val_loss": 99.0})  # rank 0 only
            rows.append({"optimizer": opt, "seed": seed, "rank": 0, "step": 19, "val_loss": plain - 0.5})
    [at9, at19] = ov.loss_rows(pd.DataFrame(rows), "distro-overlap")
    assert at9["plain"] == pytest.approx(3.1) and at9["lo"] < 3.1 < at9["hi"]
    assert at9["overlap"] == pytest.approx((3.9 + 3.25 + 3.15) / 3) and not at9["inside"]
    assert at19["overlap"] == pytest.approx(2.6) and at19["inside"]


def test_overlap_report_covers_every_overlapped_run_present(tmp_path, capsys):
    ov = _load("overlap_step")
    run = make_run(tmp_path, optimizers={"distro": (1e3, 3e3, 2.5, 0.1), "distro-overlap": (1e3, 3e3, 2.6, 0.1),
                                         "distro-eager": (1e3, 3e3, 2.55, 0.1)})
    assert ov.report(run, skip=1, overlapped=["distro-overlap", "distro-eager", "distro-absent"]) == 0
    out = capsys.readouterr().out
    assert "distro-overlap against distro" in out and "distro-eager against distro" in out
    assert "distro-absent" not in out


def _churn_figures(goodput: float, reached: int, time_to_target: float | None) -> dict:
    return {"seeds": 3, "goodput_tokens_per_s": goodput, "worker_availability": 0.9, "lost_steps": 4.0,
            "time_to_target_s": time_to_target, "val_loss_at_equal_time": 2.5, "target_reached": reached,
            "ci95": {"goodput_tokens_per_s": [goodput - 10, goodput + 10], "time_to_target_s": None}}


def test_churn_table_rows_by_failure_rate_and_method(tmp_path):
    import json

    import yaml

    cg = _load("churn_goodput")
    doc = yaml.safe_load((REPO / "scenarios" / "churn-home-dsl.yaml").read_text())
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump(doc))
    rate = "churn.failures_per_minute"
    points = [{"index": 0, "values": {rate: 0}, "texts": {rate: "0"}, "state": "complete", "run_dir": "r0",
               "optimizers": {"adamw": _churn_figures(1000.0, 3, 12.0), "diloco": _churn_figures(2000.0, 3, 8.0)}},
              {"index": 1, "values": {rate: 6}, "texts": {rate: "6"}, "state": "complete", "run_dir": "r1",
               "optimizers": {"adamw": _churn_figures(800.0, 1, None)}},
              {"index": 2, "values": {rate: 12}, "texts": {rate: "12"}, "state": "failed", "run_dir": None,
               "reason": "worker 2 died", "optimizers": {}}]
    (tmp_path / "sweep.json").write_text(json.dumps({
        "scenario": "churn-home-dsl", "state": "complete", "points": points,
        "axes": [{"path": rate, "texts": ["0", "6", "12"], "values": [0, 6, 12]}]}))
    lines = cg.sweep_table(tmp_path).splitlines()
    assert lines[0] == f"target val loss {doc['checks']['target_val_loss']:g}"
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in lines[3:]]
    assert [r[:2] for r in rows] == [["0", "adamw"], ["0", "diloco"], ["6", "adamw"], ["12", "failed: worker 2 died"]]
    assert rows[0][2] == "1,000 [990, 1,010]" and rows[0][5] == "12.0" and rows[0][-1] == "3/3"
    assert rows[2][5] == "not reached" and rows[2][-1] == "1/3"


def test_churn_rates_must_be_numbers_at_least_zero():
    cg = _load("churn_goodput")
    assert cg.parse_rates("0, 2,6") == [0.0, 2.0, 6.0]
    for bad in ("", "a,2", "-1"):
        with pytest.raises(cg.InputError, match="--rates"):
            cg.parse_rates(bad)


def test_shootout_table_holm_columns_and_the_set_tied_with_the_best(tmp_path):
    """Five seeds written into a made-up run: distro is faster than adamw on every seed (distinct after Holm);
    sparse is within noise of distro, so it stays in the set not distinguishable from the best."""
    so = _load("methods_shootout")
    run = make_run(tmp_path, optimizers={"adamw": (4e6, 4e6, 2.6, 0.1), "distro": (1e3, 3e3, 2.5, 0.1),
                                         "sparse": (1e3, 3e3, 2.55, 0.1)})
    summary = json.loads((run / "summary.json").read_text())
    times = {"adamw": [20.0, 22.0, 21.0, 19.0, 20.5], "distro": [9.0, 10.5, 9.8, 9.1, 9.6],
             "sparse": [9.4, 10.1, 10.0, 8.8, 9.9]}
    for name, ts in times.items():
        summary["optimizers"][name]["per_seed"] = {
            str(k): {"time_to_target_s": t, "time_to_target_exact": True, "train_time_s": 25.0,
                     "val_loss_at_equal_time": 2.5 + t / 100} for k, t in enumerate(ts)}
    summary["run"]["budget"] = {"kind": "time", "value": 25.0}
    summary["target"] = {"val_loss": 3.0, "source": "scenario"}
    (run / "summary.json").write_text(json.dumps(summary))
    lines = so.table(run).splitlines()
    assert lines[1].startswith("5 seeds; paired by seed") and "ALL pairs" in lines[1]
    rows = {r.split("|")[2].strip(): [c.strip() for c in r.split("|")[1:-1]] for r in lines if r.startswith("| ")
            and r[2].isdigit()}
    assert rows["adamw"][4] == "(ref)" and rows["distro"][5] == "(ref)"  # time vs adamw, time vs best
    assert rows["distro"][4].endswith(" *") and rows["distro"][4].startswith("0.47x [0.45, 0.48] p<0.001")
    assert not rows["sparse"][5].endswith("*")
    tied = next(line for line in lines if line.startswith("by time to target"))
    assert "may be the best: distro, sparse" in tied and "best by mean distro" in tied
    assert "no method is lower than every other" in tied  # sparse is within noise of distro


def test_size_ladder_rungs_are_valid_scenarios_of_the_named_size(tmp_path):
    import yaml

    from distro_bench.scenario.loading import load_scenario

    sl = _load("size_ladder")
    base = yaml.safe_load((REPO / "scenarios" / "home-dsl.yaml").read_text())
    rates = yaml.safe_load((REPO / "scenarios" / "methods-home-dsl.yaml").read_text())
    doc = sl.rung_scenario(base, rates, "small", ["adamw", "distro", "diloco", "sparseloco"], "builtin:stdlib")
    (tmp_path / "rung.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    s = load_scenario(tmp_path / "rung.yaml")
    assert s.model.preset == "small" and s.data.corpus == "builtin:stdlib" and s.baseline == "adamw"
    assert list(s.optimizers) == ["adamw", "distro", "diloco", "sparseloco"]
    assert s.optimizers["diloco"].lr == float(rates["optimizers"]["diloco"]["lr"])
    with pytest.raises(sl.InputError, match="--methods: nope"):
        sl.rung_scenario(base, rates, "tiny", ["adamw", "nope"], "builtin:pydoc")


def test_size_ladder_rung_hook_puts_every_worker_on_the_device_and_fails_with_the_runs_error(tmp_path, monkeypatch):
    import subprocess

    import yaml

    from distro_bench.scenario.loading import load_scenario

    sl = _load("size_ladder")
    assert sl.RUNGS[0] == "tiny" and sl.RUNGS[-1] == "base"
    base = yaml.safe_load((REPO / "scenarios" / "home-dsl.yaml").read_text())
    rates = yaml.safe_load((REPO / "scenarios" / "methods-home-dsl.yaml").read_text())
    doc = sl.rung_for_device(sl.rung_scenario(base, rates, "base", ["adamw", "distro"], "builtin:stdlib"), "cuda", 2, 1)
    (tmp_path / "rung.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    s = load_scenario(tmp_path / "rung.yaml")
    assert [n.hardware.device for n in s.nodes()] == ["cuda", "cuda"] and s.train.seeds == [1]
    assert s.model.preset == "base" and all(n.link is not None for n in s.nodes())  # home-dsl's links kept
    four = sl.rung_for_device(sl.rung_scenario(base, rates, "tiny", ["adamw"], "builtin:stdlib"), "cpu", None, 1)
    assert sum(g["count"] for g in four["workers"]) == 4

    def broken(argv, **kw):
        return subprocess.CompletedProcess(argv, 2, stdout="", stderr="Traceback\nerror: something broke\n")
    monkeypatch.setattr(sl.subprocess, "run", broken)
    figures = sl.run_rung("tiny", device="cpu", out=tmp_path / "out", steps=2)
    assert figures["status"] == "FAIL" and figures["figure"] == "distro-bench run exited 2: error: something broke"
    assert figures["argv"][-4:] == ["--steps", "2", "--out", str(tmp_path / "out")]


def _with_seeds(run: Path, losses: dict[str, list[float]], figure: str = "val_loss_at_equal_time") -> Path:
    summary = json.loads((run / "summary.json").read_text())
    for name, ls in losses.items():
        summary["optimizers"][name]["per_seed"] = {str(k): {figure: v} for k, v in enumerate(ls)}
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def test_size_ladder_table_gaps_and_only_tested_orders(tmp_path):
    sl = _load("size_ladder")
    opts = {"adamw": (4e6, 4e6, 2.6, 0.1), "distro": (1e3, 3e3, 2.5, 0.1), "diloco": (1e3, 3e3, 2.55, 0.1)}
    tiny = _with_seeds(make_run(tmp_path, "tiny", optimizers=opts),
                       {"adamw": [3.0, 3.2, 3.1], "distro": [2.8, 3.0, 2.9], "diloco": [2.9, 3.1, 3.0]})
    small = _with_seeds(make_run(tmp_path, "small", optimizers=opts),
                        {"adamw": [2.6, 2.8, 2.7], "distro": [2.75, 2.95, 2.86], "diloco": [2.5, 2.7, 2.6]})
    text = sl.ladder_table({"equal time": {"tiny": tiny, "small": small}})
    assert "order by mean" not in text  # issue 48: no order that was not tested
    tiny_row = next(line for line in text.splitlines() if line.startswith("| tiny |") and "(baseline)" in line)
    assert "-0.200 [-0.200, -0.200] p n/a" in tiny_row
    pairs = {tuple(c.strip() for c in line.split("|")[1:3]): [c.strip() for c in line.split("|")[3:-1]]
             for line in text.splitlines() if " vs " in line}
    assert pairs[("tiny", "adamw vs distro")][0].startswith("+0.200") and pairs[("tiny", "adamw vs distro")][3] == "distro < adamw"
    # every pair is tested, Holm over the three pairs of the rung
    assert pairs[("small", "adamw vs diloco")][3] == "diloco < adamw"
    assert all(len(v) == 4 for v in pairs.values()) and len(pairs) == 6
    # Equal-tokens runs alone (--budget none): their final val losses, re-printed and written from the folders.
    tokens = _with_seeds(make_run(tmp_path, "tokens", optimizers=opts),
                         {"adamw": [2.6, 2.8, 2.7], "distro": [2.75, 2.95, 2.86], "diloco": [2.5, 2.7, 2.6]},
                         "final_val_loss")
    doc = tmp_path / "size-ladder.md"
    assert sl.main(["--tokens-run", f"tiny={tokens}", f"small={tokens}", "--write-docs", str(doc)]) == 0
    written = doc.read_text()
    assert "### At equal tokens" in written and "### At equal time" not in written
    assert "| small | adamw vs diloco |" in written and "order by mean" not in written
    # The committed record keeps a run's summary.json alone (benchmarks/ladder/DATE/RUNG): the same table.
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "summary.json").write_text((tokens / "summary.json").read_text())
    assert sl.ladder_table({"equal tokens": {"tiny": kept}}) == sl.ladder_table({"equal tokens": {"tiny": tokens}})
    with pytest.raises(sl.InputError, match=r"no summary\.json"):
        sl.rung_cells(tmp_path / "empty", "final_val_loss")


def test_tuning_widens_at_an_edge_on_each_methods_own_grid_and_budget(tmp_path, monkeypatch):
    """The shoot-out's and the ladder's tuning: a pick at a grid's edge is tried one rate (x3) beyond it; a pick
    inside stops; a method's own grid (the ladder's --lr-factors) and an equal-tokens budget reach the sweeps."""
    so = _load("methods_shootout")
    assert so.widen([1e-3, 3e-3], 1e-3) == pytest.approx(1e-3 / 3) and so.widen([1e-3, 3e-3, 1e-2], 3e-3) is None
    best = {"adamw": 1e-3 / 3, "distro": 3e-3}  # adamw: better below its grid; distro: inside it
    calls = []

    def sweep(doc, name, lrs, budget, backend, out, seed, budget_flag="--time-budget"):
        calls.append((name, sorted(lrs), budget_flag, budget, backend, seed))
        return min(lrs, key=lambda x: abs(math.log(x / best[name]))), tmp_path

    monkeypatch.setattr(so, "_sweep", sweep)
    monkeypatch.setattr(so, "lr_figures", lambda d, n: "")
    picked = so.tune({}, "unused", "160k", "local", tmp_path, ["adamw", "distro"], 0, max_widen=1,
                     grids={"adamw": [1e-3, 3e-3], "distro": [1e-3, 3e-3, 1e-2]}, budget_flag="--tokens")
    assert picked == {"adamw": pytest.approx(1e-3 / 3), "distro": 3e-3}
    assert calls[0] == ("adamw", [1e-3, 3e-3], "--tokens", "160k", "local", 0)
    assert calls[1][:2] == ("adamw", [pytest.approx(1e-3 / 3), 1e-3])  # widened once (max_widen 1), then stopped
    assert [c[0] for c in calls] == ["adamw", "adamw", "distro"]


def test_a_tuning_sweep_leaves_no_scenario_file_behind(tmp_path, monkeypatch):
    """The one-method scenario a tuning sweep hands the CLI is written beside the sweeps and removed once the sweep
    ends, whether it ended well or not (the sweep folder keeps its own copy)."""
    so = _load("methods_shootout")
    doc = {"optimizers": {"adamw": {"type": "adamw", "lr": 1e-3}}, "train": {"steps": 2, "seeds": [1, 2]}}
    seen = []

    def cli(args):
        scenario = Path(args[1])
        seen.append((scenario, scenario.is_file()))
        if len(seen) > 1:
            raise SystemExit("harness sweep failed (2)")
        return tmp_path / "no-such-sweep"

    monkeypatch.setattr(so, "_cli", cli)
    lr, _ = so._sweep(doc, "adamw", [1e-3, 3e-3], "20s", "local", tmp_path, 0)
    assert lr == 1e-3  # no best.yaml: the scenario's own rate
    with pytest.raises(SystemExit):
        so._sweep(doc, "adamw", [1e-3], "20s", "local", tmp_path, 0)
    assert [ok for _, ok in seen] == [True, True]
    assert not list(tmp_path.glob("*.yaml")), list(tmp_path.glob("*.yaml"))


def test_size_ladder_budgets_are_compute_matched_with_enough_syncs(tmp_path, monkeypatch, capsys):
    """Issue 48: every rung at the same tokens per parameter (20 by default), at least 20 outer syncs of the
    periodic methods, rates bracketing each rung's pick; --plan prints it and runs nothing."""
    import yaml

    from distro_bench.scenario.loading import load_scenario

    sl = _load("size_ladder")
    base = yaml.safe_load((REPO / "scenarios" / "home-dsl.yaml").read_text())
    rates = yaml.safe_load((REPO / "scenarios" / "methods-home-dsl.yaml").read_text())
    methods = ["adamw", "distro", "diloco", "sparseloco"]
    budgets = {size: sl.rung_budget(sl.rung_scenario(base, rates, size, methods, "builtin:stdlib"), 20)
               for size in ("tiny", "small", "35m")}
    for b in budgets.values():
        assert 20 <= b.tokens_per_param < 20 + b.tokens_per_step / b.params + 1e-9  # whole steps, rounded up
        assert b.tokens_per_step == 4 * 8 * 128 and min(b.syncs.values()) >= 20
    assert 30e6 < budgets["35m"].params < 40e6  # the GPU rung near the published 35M
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(sl.rung_scenario(base, rates, "350m", methods, "builtin:stdlib")))
    assert load_scenario(tmp_path / "r.yaml").model.dim == 1280
    with pytest.raises(sl.InputError, match=r"diloco 0 outer syncs \(H = 10\), fewer than --min-syncs 20; it needs 200"):
        sl.rung_budget(sl.rung_scenario(base, rates, "tiny", methods, "builtin:stdlib"), 0.001)

    def no_runs():
        raise AssertionError("--plan ran something")
    monkeypatch.setattr(sl, "_shootout", no_runs)
    assert sl.main(["--plan", "--sizes", "tiny,35m"]) == 0
    out = capsys.readouterr().out
    assert "tiny: 0.49M parameters" in out and "(20.0 a parameter)" in out and "h on one H100 at MFU 0.3" in out
    assert "4 methods x (3 seeds + 3 tuning rates)" in out
