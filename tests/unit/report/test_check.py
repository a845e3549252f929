"""`distro-bench check`, the CI gate: pass, fail and malformed input, each with its exit code."""

from __future__ import annotations

import json

import pytest

from tests.helpers import make_run


def check(cli, run, *flags):
    """`check` on make_run's one-seed folders: the loss gap judged on that seed (the 3-seed rule has its own
    tests in test_check_intervals.py)."""
    return cli("check", run, "--allow-few-seeds", *flags)


def _assert_clean(result):
    """A user error is one readable line, never a traceback."""
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_passes_with_scenario_thresholds(cli, tmp_path):
    r = check(cli, make_run(tmp_path))
    assert r.exit_code == 0, r.output
    assert "PASS" in r.output and "FAIL" not in r.output and "all checks passed" in r.output


def test_json_output_lists_every_check(cli, tmp_path):
    run = make_run(tmp_path)
    r = check(cli, run, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["passed"] is True and data["baseline"] == "adamw" and data["candidates"] == ["distro"]
    by_name = {(c["check"], c["optimizer"]): c for c in data["results"]}
    assert by_name[("reduction vs adamw", "distro")]["measured"] == pytest.approx(1000, rel=0.01)
    # the gap at equal training time (the shorter run's seconds), from the summary's own figures
    opts = json.loads((run / "summary.json").read_text())["optimizers"]
    gap = opts["distro"]["val_loss_at_equal_time"] - opts["adamw"]["val_loss_at_equal_time"]
    assert by_name[("val loss gap vs adamw", "distro")]["measured"] == pytest.approx(gap, abs=1e-6)
    assert gap != pytest.approx(0.15, abs=1e-3)  # not the final losses' gap (DisTrO's run is shorter)
    assert by_name[("run complete", None)]["status"] == "PASS"
    assert by_name[("replicas identical", "adamw")]["status"] == "PASS"


@pytest.mark.parametrize("flags, failing", [
    (["--min-reduction", "5000"], "reduction vs adamw"),
    (["--max-loss-gap", "0.05"], "val loss gap vs adamw"),
])
def test_fails_when_a_threshold_is_missed(cli, tmp_path, flags, failing):
    r = check(cli, make_run(tmp_path), *flags, "--json")
    assert r.exit_code == 1, r.output
    failed = [c["check"] for c in json.loads(r.stdout)["results"] if c["status"] == "FAIL"]
    assert failed == [failing]


def test_flags_override_the_scenario_and_scenario_thresholds_apply_without_flags(cli, tmp_path):
    run = make_run(tmp_path, checks={"min_reduction": 2000, "max_loss_gap": 0.3})
    assert check(cli, run).exit_code == 1
    assert check(cli, run, "--min-reduction", "10").exit_code == 0


def test_fails_when_replicas_differ(cli, tmp_path):
    r = check(cli, make_run(tmp_path, diverge="distro"), "--json")
    assert r.exit_code == 1
    failed = [c for c in json.loads(r.stdout)["results"] if c["status"] == "FAIL"]
    assert [(c["check"], c["optimizer"]) for c in failed] == [("replicas identical", "distro")]
    assert "different parameters" in failed[0]["note"]


def test_fails_on_an_incomplete_run_and_says_why(cli, tmp_path):
    r = check(cli, make_run(tmp_path, state="failed", reason="distro: worker rank 2 exited with code 1"))
    assert r.exit_code == 1
    text = " ".join(r.output.split())
    assert "This run FAILED" in text and "rank 2 exited with code 1" in text


def test_fails_when_there_is_no_candidate_to_check(cli, tmp_path):
    run = make_run(tmp_path, optimizers={"adamw": (2_000_000, 2_000_000, 2.4, 0.1)})
    r = check(cli, run, "--json")
    assert r.exit_code == 1
    assert "only the baseline" in r.stdout


def test_candidate_and_baseline_flags(cli, tmp_path):
    opts = {"adamw": (2_000_000, 2_000_000, 2.4, 0.1), "distro": (1_000, 3_000, 2.55, 0.1),
            "demo-bf16": (20_000, 60_000, 2.5, 0.1)}
    run = make_run(tmp_path, optimizers=opts)
    assert check(cli, run).exit_code == 1  # demo-bf16 is only 50x
    assert check(cli, run, "--candidate", "distro").exit_code == 0
    r = check(cli, run, "--baseline", "demo-bf16", "--candidate", "distro", "--min-reduction", "15", "--json")
    assert r.exit_code == 0, r.output
    red = next(c for c in json.loads(r.stdout)["results"] if c["check"].startswith("reduction"))
    assert red["measured"] == pytest.approx(20, rel=0.01)


def test_candidate_from_the_scenario_checks(cli, tmp_path):
    opts = {"adamw": (2_000_000, 2_000_000, 2.4, 0.1), "distro": (1_000, 3_000, 2.55, 0.1),
            "demo-bf16": (20_000, 60_000, 2.5, 0.1)}
    run = make_run(tmp_path, optimizers=opts, checks={"min_reduction": 100, "candidate": "distro"})
    r = check(cli, run, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["candidates"] == ["distro"]


@pytest.mark.parametrize("breakage", ["missing", "not_a_run", "no_summary", "bad_json", "bad_parquet", "foreign_json"])
def test_malformed_run_folder_exits_2(cli, tmp_path, breakage):
    run = tmp_path / "nowhere"
    if breakage != "missing":
        run = make_run(tmp_path)
        if breakage == "not_a_run":
            run = tmp_path / "empty"
            run.mkdir()
        elif breakage == "no_summary":
            (run / "summary.json").unlink()
        elif breakage == "bad_json":
            (run / "summary.json").write_text("{not json")
        elif breakage == "bad_parquet":
            (run / "metrics.parquet").write_bytes(b"PAR1 garbage")
        elif breakage == "foreign_json":
            (run / "summary.json").write_text('{"hello": 1}')
    r = check(cli, run)
    assert r.exit_code == 2, r.output
    _assert_clean(r)
    assert "error:" in r.output and len(r.output.strip().splitlines()) <= 3


@pytest.mark.parametrize("flags", [["--candidate", "nope"], ["--baseline", "nope"], ["--candidate", "adamw"],
                                   ["--min-reduction", "-1"], ["--max-loss-gap", "abc"]])
def test_bad_flags_exit_2(cli, tmp_path, flags):
    r = check(cli, make_run(tmp_path), *flags)
    assert r.exit_code == 2, r.output
    _assert_clean(r)


def test_crashed_run_still_loads_and_fails_the_gate(cli, tmp_path):
    run = make_run(tmp_path)
    (run / "summary.json").unlink()
    (run / "metrics.parquet").unlink()
    (run / "status.json").write_text('{"state": "running", "reason": null}')
    # The workers' own records are what a killed harness leaves behind.
    df_run = make_run(tmp_path / "src")
    import pandas as pd

    df = pd.read_parquet(df_run / "metrics.parquet")
    for (opt, rank), rows in df.groupby(["optimizer", "rank"]):
        folder = run / "workers" / str(opt)
        folder.mkdir(parents=True, exist_ok=True)
        recs = [{"type": "step", **{k: (None if pd.isna(v) else v) for k, v in row.items()}}
                for row in rows.to_dict("records")]
        (folder / f"rank{rank}.jsonl").write_text("\n".join(json.dumps(x, default=str) for x in recs) + "\n")
    r = check(cli, run)
    assert r.exit_code == 1, r.output
    _assert_clean(r)
    text = " ".join(r.output.split())
    assert "did not finish" in text and "rebuilt from the workers' records" in text


def test_ci_and_the_example_workflow_run_the_gate():
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[3]
    steps = yaml.safe_load((root / ".github/workflows/distro-bench.yml").read_text())["jobs"]["gate"]["steps"]
    runs = [s.get("run", "") for s in steps]
    i_run = next(i for i, r in enumerate(runs) if "run scenarios/ci-gate.yaml --backend netns" in r)
    i_check = next(i for i, r in enumerate(runs) if r.startswith("distro-bench check"))
    assert i_run < i_check and "if" not in steps[i_check]  # the check step fails the job
    ci = (root / ".ci/run").read_text()
    assert ci.index("distro-bench run scenarios/ci-gate.yaml") < ci.index("distro-bench check")
    # the gate runs beside the host tier; its exit code fails CI once the host tier has been reported
    assert 'gate_rc=$?' in ci and '[ "$gate_rc" = 0 ] ||' in ci


def test_the_ci_gate_asks_the_equal_time_question_on_shaped_links():
    """The gate's scenario: a time budget (equal wall-clock), >= 3 paired seeds, rate-shaped links a netns
    run can apply with tbf alone, and a margin and target fixed in the file (issue 27)."""
    from pathlib import Path

    from distro_bench.scenario.loading import load_scenario

    s = load_scenario(Path(__file__).resolve().parents[3] / "scenarios" / "ci-gate.yaml")
    assert s.train.time_budget is not None and s.train.steps is None
    assert len(s.train.seeds) >= 3
    links = {n.link_name: n.link for n in s.nodes()}
    assert all(link.shaped and not link.delay and not link.jitter for link in links.values()), links
    assert s.checks.max_loss_gap is not None and s.checks.min_reduction and s.checks.target_val_loss
