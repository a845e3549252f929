"""A gate added to a figure row of results/figures.py reaches `check` (its flag, its help, its threshold, its
judgement) and the verdict's rows with no edit of the CLI, the API or the report (issue 50 item 1).

The row is added at runtime: a figure `steps_per_s` (higher is better, compared as a ratio) carrying a new gate
`min_steps_ratio`, its values written into a synthetic run folder's summary."""

from __future__ import annotations

import inspect
import json

import pytest
from typer.testing import CliRunner

from distro_bench.results import figures
from distro_bench.results.figures import Figure, VerdictRow
from distro_bench.scenario.gates import GATES, Gate
from tests.unit.runfolders import OPTS, make_run

GATE = Gate("min_steps_ratio", "--min-steps-ratio", "steps/s ratio", "candidate steps/s / baseline's, per seed",
            ">=", "per seed, the candidate against the baseline's seed", "{:,.2f}x",
            "candidate must take at least X times the baseline's steps per second (test gate)", bound=("gt", 0))
FIGURE = Figure("steps_per_s", "steps per second", "1/s", "{:.3g}", "test", compare="ratio", better="higher",
                gates=(GATE,), verdict=VerdictRow(9, "steps/s"))


@pytest.fixture
def added(monkeypatch):
    """The figure row and its gate, in the tables the harness reads."""
    monkeypatch.setattr(figures, "FIGURES", (*figures.FIGURES, FIGURE))
    monkeypatch.setitem(GATES, GATE.key, GATE)


@pytest.fixture
def run(tmp_path):
    """A 3-seed run (adamw 0.30 s a step, distro 0.05 s) whose summary has steps_per_s per seed: distro takes 6x
    (seed 1: 6.6x) the baseline's steps per second."""
    path = make_run(tmp_path)
    doc = json.loads((path / "summary.json").read_text())
    for name, s in doc["optimizers"].items():
        step_s = OPTS[name][3]
        values = {seed: 1 / step_s * (1.1 if name == "distro" and i == 1 else 1.0)
                  for i, seed in enumerate(s["per_seed"])}
        for seed, v in values.items():
            s["per_seed"][seed]["steps_per_s"] = v
        s["steps_per_s"] = sum(values.values()) / len(values)
    (path / "summary.json").write_text(json.dumps(doc))
    return path


RATIOS = [6.0, 6.6, 6.0]  # distro / adamw steps per second, seed by seed


def test_the_gate_is_a_flag_of_check_with_its_help(added):
    import typer

    from distro_bench.cli.report import check_command

    app = typer.Typer()
    app.command(name="check")(check_command())
    app.command(name="other")(lambda: None)  # two commands: `check` is a sub-command, as in the real app
    out = CliRunner().invoke(app, ["check", "--help"], env={"COLUMNS": "200"}).output
    assert "--min-steps-ratio" in out and "times the baseline's steps per second (test gate)" in out
    assert "--min-reduction" in out and "--max-loss-regression" in out  # the table's own gates stay


def test_the_flag_sets_the_threshold_and_the_gate_judges_the_figure(added, run):
    import typer

    from distro_bench.cli.report import check_command

    app = typer.Typer()
    app.command(name="check")(check_command())
    app.command(name="other")(lambda: None)
    res = CliRunner().invoke(app, ["check", str(run), "--min-steps-ratio", "5", "--json"])
    doc = json.loads(res.stdout)
    assert doc["thresholds"]["min_steps_ratio"] == 5
    [r] = [r for r in doc["results"] if r["gate"] == "min_steps_ratio"]
    assert r["optimizer"] == "distro" and r["status"] == "PASS" and r["op"] == ">=" and r["limit"] == 5
    assert r["measured"] == pytest.approx(sum(RATIOS) / 3)  # the mean of the paired ratios
    assert r["seeds"] == 3 and r["interval"][0] < 6.2 < r["interval"][1]
    assert r["margin"] == pytest.approx(r["interval"][0] - 5)  # the lower end against the limit

    res = CliRunner().invoke(app, ["check", str(run), "--min-steps-ratio", "7", "--json"])
    assert res.exit_code == 1
    [r] = [r for r in json.loads(res.stdout)["results"] if r["gate"] == "min_steps_ratio"]
    assert r["status"] == "FAIL" and r["margin"] < 0


def test_the_api_takes_the_gate_as_a_keyword(added, run):
    from distro_bench import api

    report = api.check(run, min_steps_ratio=5.0)
    assert report.thresholds["min_steps_ratio"] == 5.0
    assert [r.status for r in report.results if r.gate == "min_steps_ratio"] == ["PASS"]
    with pytest.raises(Exception, match="--min-steps-ratio: must be a number > 0"):
        api.check(run, min_steps_ratio=0.0)


def test_the_figure_is_a_row_of_the_verdict(added, run):
    from distro_bench.report.verdict import rows, verdicts

    summary = json.loads((run / "summary.json").read_text())
    [v] = verdicts(summary)
    [row] = [r for r in rows(v) if r[0] == "steps/s"]
    assert rows(v)[-1] == row  # in its place, after the table's own rows
    assert float(row[1].split()[0]) == pytest.approx(20 * (1 + 0.1 / 3), rel=1e-2)  # mean of 20, 22, 20
    assert float(row[2].split()[0]) == pytest.approx(1 / 0.3, rel=1e-2)
    assert row[3].startswith("6.2x more [")  # the means' ratio, (62/3) / (10/3), with the paired interval


def test_without_the_row_neither_check_nor_the_verdict_has_it(run):
    from distro_bench import api
    from distro_bench.cli.report import check_command
    from distro_bench.report.verdict import rows, verdicts

    assert "min_steps_ratio" not in inspect.signature(check_command()).parameters
    with pytest.raises(TypeError, match="no gate min_steps_ratio"):
        api.check(run, min_steps_ratio=5.0)
    [v] = verdicts(json.loads((run / "summary.json").read_text()))
    assert all(r[0] != "steps/s" for r in rows(v))
