"""`check RUN --against REF_RUN` (issue 49): a candidate compared with a reference run of the same scenario,
paired by seed, besides the in-run comparison with the baseline. Synthetic run folders (tests/unit/runfolders.py)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.unit.runfolders import make_run

SHAPED = {"backend": "netns", "network_emulated": True,
          "nodes": [{"rank": r, "name": f"node{r}", "address": f"10.0.0.{r + 1}", "applied": None} for r in range(2)],
          "not_emulated": []}
FLAGS = ("--allow-few-seeds", "--max-reduction-drop", "0.1", "--max-loss-regression", "0.25", "--json")


def _run(root, name):
    """make_run's folder on shaped links, with what its builder leaves out: replicas that agree, and an AdamW
    loss at equal time on every seed (its first evaluation comes after DisTrO's whole run there)."""
    run = make_run(root, name, network=SHAPED)

    def fill(s):
        for o in s["optimizers"].values():
            o["replicas_identical"] = True
        for k, v in s["optimizers"]["adamw"]["per_seed"].items():
            v["val_loss_at_equal_time"] = 3.0 + 0.01 * int(k)
    _edit(run, fill)
    return run


def _edit(run, fn):
    p = run / "summary.json"
    s = json.loads(p.read_text())
    fn(s)
    p.write_text(json.dumps(s))


def _bytes_up(factor):
    """The candidate sends `factor` times the bytes on every seed: its reduction is 1/factor of before."""
    def fn(s):
        for v in [s["optimizers"]["distro"], *s["optimizers"]["distro"]["per_seed"].values()]:
            for k in ("payload_tx_bytes_per_step", "payload_rx_bytes_per_step", "wire_tx_bytes_per_step",
                      "wire_rx_bytes_per_step"):
                if v.get(k) is not None:
                    v[k] *= factor
    return fn


def _results(r):
    data = json.loads(r.stdout)
    return data, {(c["check"], c["optimizer"]): c for c in data["results"]}


def test_a_run_whose_reduction_dropped_25_percent_fails_against_the_reference(cli, tmp_path):
    ref = _run(tmp_path, "ref")
    now = _run(tmp_path, "now")
    _edit(now, _bytes_up(1 / 0.75))
    r = cli("check", now, "--against", ref, "--min-reduction", "100", *FLAGS)
    assert r.exit_code == 1, r.output
    _, by = _results(r)
    drop = by[("reduction drop vs reference", "distro")]
    assert drop["status"] == "FAIL" and drop["measured"] == pytest.approx(0.25, abs=1e-6)
    assert drop["seeds"] == 3 and drop["op"] == "<=" and drop["limit"] == 0.1
    assert by[("val loss regression vs reference", "distro")]["status"] == "PASS"
    # the in-run reduction against adamw still passes (about 750x): only the reference sees the regression
    assert by[("reduction vs adamw", "distro")]["status"] == "PASS"


def test_the_same_run_against_itself_passes_and_a_loss_regression_fails(cli, tmp_path):
    ref = _run(tmp_path, "ref")
    r = cli("check", ref, "--against", ref, *FLAGS)
    assert r.exit_code == 0, r.output
    now = _run(tmp_path, "now")

    def worse(s):
        for v in s["optimizers"]["distro"]["per_seed"].values():
            v["val_loss_at_equal_time"] += 0.5
    _edit(now, worse)
    _, by = _results(cli("check", now, "--against", ref, *FLAGS))
    reg = by[("val loss regression vs reference", "distro")]
    assert reg["status"] == "FAIL" and reg["measured"] == pytest.approx(0.5)


def test_unlike_scenarios_are_refused_with_the_differences_named(cli, tmp_path):
    ref = _run(tmp_path, "ref")
    now = _run(tmp_path, "now")
    scen = yaml.safe_load((now / "scenario.yaml").read_text())
    scen["train"]["steps"] = 40
    scen["data"]["batch_size"] = 16
    scen["description"] = "words may differ"
    (now / "scenario.yaml").write_text(yaml.safe_dump(scen))
    r = cli("check", now, "--against", ref, *FLAGS)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    assert "train.steps: 40 vs 20" in r.output and "data.batch_size: 16 vs 8" in r.output
    assert "description" not in r.output


def test_a_regression_tolerance_without_a_reference_is_an_input_error(cli, tmp_path):
    run = _run(tmp_path, "now")
    r = cli("check", run, "--allow-few-seeds", "--max-reduction-drop", "0.1")
    assert r.exit_code == 2 and "--against" in r.output
