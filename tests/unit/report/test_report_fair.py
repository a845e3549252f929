"""The report's verdict, plots with interval bands, the linear bytes plot and the per-link emulation table,
from synthetic run folders with and without issue 16's keys."""

from __future__ import annotations

import math
import re

import pytest

from distro_bench.report import write_run_report
from distro_bench.report.describe import compute_rows, link_rows
from distro_bench.report.load import load_for_report
from distro_bench.report.plots import curves
from tests.unit.runfolders import make_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PLOTS = ["loss_vs_step", "loss_vs_time", "bytes_per_step", "step_time_breakdown", "per_rank", "time_to_target"]


@pytest.mark.parametrize("seeds,new_keys", [(3, True), (1, True), (1, False)])
def test_report_renders_every_plot(tmp_path, seeds, new_keys):
    run = make_run(tmp_path, seeds=seeds, new_keys=new_keys)
    paths = write_run_report(run)
    for name in PLOTS:
        png = run / "plots" / f"{name}.png"
        assert png in paths and png.stat().st_size > 1000 and png.read_bytes().startswith(PNG_MAGIC), name
    md = (run / "report.md").read_text()
    # the verdict leads the report
    assert re.search(r"^## (Verdict|Comparison \(no verdict\))$", md, re.M).start() < md.index("## Scenario")
    assert ("±" in md.split("## Scenario")[0]) == (seeds > 1)
    if not new_keys:
        assert "time to target | not recorded" in md
    assert "Everything the scenario asked for was emulated" not in md


def test_curves_have_bands_only_with_several_seeds(tmp_path):
    df = load_for_report(make_run(tmp_path / "a", seeds=3)).data.metrics
    c = curves(df[df["optimizer"] == "adamw"])
    assert (c["seeds"] == 3).all()
    assert (c["loss_lo"] < c["loss"]).all() and (c["loss_hi"] > c["loss"]).all()
    # the seeds' losses are final + 0.03 * seed: their mean is final + 0.03
    assert math.isclose(c["loss"].iloc[-1], 2.40 + 3.0 * math.exp(-19 / 4) + 0.03 + 0.005, rel_tol=1e-9)
    # each seed's clock starts at its own first step: the mean elapsed time is the single seed's
    assert math.isclose(c["elapsed_s"].iloc[-1], 20 * 0.30, rel_tol=1e-6)
    one = load_for_report(make_run(tmp_path / "b", seeds=1, new_keys=False)).data.metrics
    c1 = curves(one[one["optimizer"] == "adamw"])
    assert c1["loss_lo"].isna().all() and (c1["seeds"] == 1).all()


def test_bytes_plot_is_linear_and_labels_the_share(tmp_path):
    run = make_run(tmp_path)
    write_run_report(run)
    md = (run / "report.md").read_text()
    assert "linear" in md and "log scale" not in md


NETNS = {
    "backend": "netns", "network_emulated": True, "link_engine": "userspace", "link_engine_reason": "no netem",
    "nodes": [{"rank": r, "name": f"node{r}", "address": f"10.0.0.{r + 2}", "link": "dsl",
               "applied": {"up": {"plan": {"rate_bps": 10_000_000, "delay_s": 0.0, "jitter_s": 0.0, "loss": 0.0}},
                           "down": {"plan": {"rate_bps": 50_000_000, "delay_s": 0.0, "jitter_s": 0.0, "loss": 0.0}},
                           "delay_line": {"up": {"delay_s": 0.015, "jitter_s": 0.003, "loss": 0.001},
                                          "down": {"delay_s": 0.015, "jitter_s": 0.003, "loss": 0.001}}},
               **({"measured": {"up": {"rate_bps": 9_600_000, "delay_s": 0.0151}}} if r == 0 else {})}
              for r in range(2)],
    "not_emulated": []}


def test_link_table_configured_applied_measured(tmp_path):
    run = load_for_report(make_run(tmp_path, network=NETNS))
    rows = link_rows(run)
    by = {(r[0], r[2]): r for r in rows}
    up0 = by[("node0", "up")]
    assert up0[3] == "10Mbit / 10Mbit / 9.6Mbit" and up0[4].startswith("15ms / 15ms / 15.1ms")
    assert up0[7] == "tc tbf + userspace delay line"
    assert by[("node0 .. node1 (2 nodes)", "down")][3] == "50Mbit / 50Mbit / not measured"
    blocks = write_run_report(run.data.path) and (run.data.path / "report.md").read_text()
    assert "Every link figure the scenario configured was applied" in blocks


def test_local_run_says_links_and_gpu_were_not_there(tmp_path):
    run = load_for_report(make_run(tmp_path))
    rows = link_rows(run)
    assert rows and all("not applied" in r[3] for r in rows) and all(r[7] == "none" for r in rows)
    (row,) = compute_rows(run)
    assert row[2] == "cpu on vm" and "GPU was NOT present" in row[3]


def test_compute_stretch_is_named(tmp_path):
    run = load_for_report(make_run(tmp_path, starts={r: {"compute_scale": 0.25} for r in range(2)}))
    (row,) = compute_rows(run)
    assert "4.00x this host's time" in row[3]
