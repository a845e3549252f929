"""Issue 49, seeds kept apart: a scenario records the seeds its target's pilot and its rates' tuning ran on, and
is refused when they overlap the seeds it reports, unless the overlap is labelled (then the verdict names it)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from distro_bench.errors import ScenarioError
from distro_bench.scenario.loading import load_scenario, with_overrides

REPO = Path(__file__).resolve().parents[3]
BASE = {"name": "kept-apart", "workers": [{"count": 2, "hardware": "host"}], "train": {"steps": 20, "seeds": [1, 2, 3]},
        "optimizers": {"adamw": {"lr": 1e-3}}}


def _load(tmp_path, checks):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({**BASE, "checks": checks}))
    return load_scenario(p)


def test_seeds_kept_apart_are_accepted_and_an_overlap_is_refused_naming_the_fields(tmp_path):
    s = _load(tmp_path, {"target_val_loss": 3.0, "target_pilot_seeds": [0], "tuning_seeds": [0]})
    assert s.seed_overlaps() == [] and s.comparison_target() == (3.0, "checks.target_val_loss in the scenario")
    with pytest.raises(ScenarioError) as e:
        _load(tmp_path, {"target_val_loss": 3.0, "target_pilot_seeds": [0, 1, 2], "tuning_seeds": [3]})
    text = str(e.value) + " ".join(map(str, getattr(e.value, "problems", [])))
    assert "checks.target_pilot_seeds [0, 1, 2] share seed(s) 1, 2" in text and "checks.tuning_seeds [3]" in text
    assert "seed_overlap: label" in text


def test_a_labelled_overlap_runs_and_the_verdict_names_it(tmp_path):
    from distro_bench.report.verdict import verdict_lines

    s = _load(tmp_path, {"target_val_loss": 3.0, "target_pilot_seeds": [0, 1], "seed_overlap": "label"})
    target, how = s.comparison_target()
    assert "seed overlap, labelled" in how and "share seed(s) 1" in how
    summary = {"baseline": "adamw", "run": {}, "target": {"val_loss": target, "how": how, "post_hoc": False},
               "optimizers": {"adamw": {"seeds": 3}, "distro": {"seeds": 3}}}
    text = " ".join(verdict_lines(summary))
    assert "target: checks.target_val_loss in the scenario (seed overlap, labelled" in " ".join(text.split())


def test_a_shipped_scenario_not_re_derived_records_its_provenance_with_the_overlap_labelled():
    s = load_scenario(REPO / "scenarios" / "ci-smoke.yaml")  # rates tuned on its own seeds 0-2 (no target)
    assert s.checks.tuning_seeds is not None
    assert s.checks.seed_overlap == "label" and s.seed_overlaps()


@pytest.mark.parametrize("name", ["home-dsl", "ci-gate", "methods-home-dsl"])
def test_the_re_derived_scenarios_keep_their_pilot_and_tuning_seeds_apart_from_those_they_report(name):
    # home-dsl's, ci-gate's and methods-home-dsl's targets and rates were re-derived on seeds none of them
    # reports (docs/sweeps.md, docs/ci-gate.md): no overlap to label, so each refuses one, e.g. a run
    # reporting a tuning seed (10 for all three).
    s = load_scenario(REPO / "scenarios" / f"{name}.yaml")
    assert s.checks.seed_overlap == "refuse" and not s.seed_overlaps()
    assert s.checks.target_pilot_seeds and s.checks.tuning_seeds
    with pytest.raises(ScenarioError, match=r"checks\.tuning_seeds"):
        with_overrides(s, seed=10, repeat=2)
