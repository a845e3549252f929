"""Published operating points (distro_bench/data/published/points.yaml) against the projection model."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from distro_bench.errors import InputError
from distro_bench.scenario.presets import MODELS
from distro_bench.studies.published import (
    POINTS_FILE,
    TIME_BAND,
    TOLERANCE,
    evaluate,
    evaluate_all,
    load_points,
    load_replay,
    markdown_table,
    table_rows,
)
from distro_bench.train.model import ModelConfig, parameter_shapes
from distro_bench.train.projection import analytic_shapes
from tests.helpers import make_run

POINTS = {p.id: p for p in load_points()}
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("preset", ["tiny", "base", "llama-1.2b"])
def test_analytic_shapes_are_the_models(preset):
    cfg = ModelConfig(**MODELS[preset])
    assert analytic_shapes(cfg) == parameter_shapes(cfg)


def test_grouped_query_attention_gives_intellect_1s_10b():
    cfg = {"dim": 4096, "n_layers": 42, "n_heads": 32, "ffn_dim": 14336, "vocab_size": 128256}
    with_gqa = sum(math.prod(s) for s in analytic_shapes(cfg, n_kv_heads=8).values())
    without = sum(math.prod(s) for s in analytic_shapes(cfg).values())
    assert 10.0e9 < with_gqa < 10.4e9  # the published "10B"
    assert without - with_gqa == 42 * 2 * 4096 * (4096 - 1024)  # k and v shrink to 8 of 32 heads



@pytest.mark.parametrize("point_id", ["distro-adamw-bytes", "distro-distro-bytes", "distro-reduction",
                                      "intellect-1-reduction"])
def test_projection_lands_within_15_percent_of_the_published_figure(point_id):
    point = POINTS[point_id]
    result = evaluate(point)
    assert point.confirmed and point.published
    assert abs(result.ours / point.published - 1) <= TOLERANCE, (result.ours, point.published)
    assert result.within is True


def test_covenant_gap_is_the_index_width():
    """Ours misses 146x by exactly the bits per entry: 2-bit value + u16 index (18) against a 12-bit index (14)."""
    result = evaluate(POINTS["covenant-compression"])
    assert result.within is False and POINTS["covenant-compression"].why
    assert result.ours * 18 / 14 == pytest.approx(146, rel=0.01)


def test_opendiloco_gap_is_explained_and_the_figure_marked_unconfirmed():
    point = POINTS["opendiloco-allreduce"]
    result = evaluate(point)
    assert point.confirmed is False and "not found" in point.why
    # FP16: 2(N-1)/N x 2.2 GB through 500 Mbit/s, framed; fp32 doubles it to within 15% of the quoted 102 s
    assert result.ours == pytest.approx(1.5 * 1.1e9 * 2 * 8 / 500e6 * 1514 / 1448, rel=0.01)
    assert abs(2 * result.ours / point.published - 1) <= TOLERANCE


def test_every_point_without_a_number_or_outside_15_percent_says_why():
    for r in evaluate_all():
        if r.within is not True:
            assert r.point.why, r.point.id
        if r.point.measure:
            assert (POINTS_FILE.parent / r.point.scenario).is_file()


def _kept_replays():
    return [load_replay(d) for d in sorted((REPO / "benchmarks" / "replays").iterdir()) if d.is_dir()]


def test_docs_carry_the_current_table():
    doc = (REPO / "docs" / "projection.md").read_text()
    assert markdown_table(evaluate_all(replays=_kept_replays())) in doc, "run: python benchmarks/published.py --write-docs"


def test_kept_replays_fill_the_replayed_column_where_comparable():
    results = {r.point.id: r for r in evaluate_all(replays=_kept_replays())}
    distro = results["distro-distro-step"]
    assert distro.replayed is not None and "8 workers" in distro.replay_note and "model for those links" in distro.replay_note
    adamw = results["distro-adamw-step"]  # 1/64 of AdamW's bytes replayed: no full-size figure, said so
    assert adamw.replayed is None and "0.015625 of adamw's bytes replayed" in adamw.replay_note
    assert results["covenant-comm"].replayed is None and results["covenant-comm"].replay_note == ""
    assert "0.015625 of adamw's bytes" in table_rows([adamw])[0][4]


def test_a_training_run_is_not_taken_for_a_replay(tmp_path):
    make_run(tmp_path, "trained")
    with pytest.raises(InputError, match="a training run, not a replay"):
        load_replay(tmp_path / "trained")
    with pytest.raises(InputError, match="no such directory"):
        load_replay(tmp_path / "absent")


def test_a_bad_points_file_names_the_field(tmp_path):
    bad = tmp_path / "points.yaml"
    bad.write_text("points:\n  - {id: x, figure: f, published: 1, unit: ratio, source: s, basis: input, measure: nope}\n")
    with pytest.raises(InputError, match=r"points\[0\]\.measure: 'nope' is not one of paper_bytes"):
        load_points(bad)
    bad.write_text("points:\n  - {id: x, figure: f, published: 1, unit: furlongs, source: s, basis: input}\n")
    with pytest.raises(InputError, match=r"points\[0\]"):
        load_points(bad)
    bad.write_text("points:\n  - {id: x, figure: f, published: 1, unit: ratio, source: s, basis: guessed}\n")
    with pytest.raises(InputError, match=r"(?s)points\[0\].*basis"):
        load_points(bad)


def test_project_published_cli_prints_every_point(cli):
    import json

    result = cli("project", "--published", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in json.loads(result.output)}
    assert set(rows) == set(POINTS)
    assert rows["intellect-1-reduction"]["within_15pct"] is True
    assert rows["intellect-1-utilisation"]["ours"] is None and rows["intellect-1-utilisation"]["why"]
    for row in rows.values():  # issue 34: every row says how far it is evidence, and the replay column is there
        assert {"basis", "projected", "replayed", "ratio", "own", "quote", "band", "within_band"} <= set(row)
    assert rows["distro-adamw-step"]["basis"] == "independent" and rows["distro-adamw-step"]["replayed"] is None
    assert rows["distro-adamw-bytes"]["basis"] == "definitional" and rows["distro-adamw-bytes"]["own"] > 0
    missing = cli("project")
    assert missing.exit_code == 2 and "SCENARIO" in missing.output


def test_time_rows_land_in_the_band_with_the_faster_method_faster():
    """Issue 34: the DisTrO report's Table 3 (19.8 h AdamW, 17.1 h DisTrO over 25,000 steps) projected from the
    H100 datasheet x MFU 0.4, the ring over 400 Gbit/s NICs and NCCL's per-round cost."""
    adamw, distro = evaluate(POINTS["distro-adamw-step"]), evaluate(POINTS["distro-distro-step"])
    lo, hi = TIME_BAND
    assert lo <= adamw.ratio <= hi and lo <= distro.ratio <= hi, (adamw.ours, distro.ours)
    assert adamw.ours > distro.ours  # AdamW + all-reduce is the slower one, as published
    ratio = evaluate(POINTS["distro-step-ratio"])
    assert ratio.ours == pytest.approx(adamw.ours / distro.ours) and ratio.ours > 1
    # compute alone: 6 x 1.2045B x (2048 / 32 x 2048 tokens) / (989 TFLOPS x 0.4)
    assert distro.ours == pytest.approx(6 * 1.2045e9 * 64 * 2048 / (989e12 * 0.4), rel=0.01)


def test_the_per_round_cost_is_the_systems_not_ours():
    """With gloo's per-round cost on a quiet host (0.2 ms) instead of NCCL's 6.6 us, the ~5,100 rounds of AdamW's
    bucketed ring put 1 s of software cost into each step: the 3.52 s the old projection gave, and AdamW 1.47x
    slower than DisTrO where the report has 1.16x."""
    point, ratio = POINTS["distro-adamw-step"], POINTS["distro-step-ratio"]
    assert point.round_overhead_s == pytest.approx(6.6e-6) == ratio.round_overhead_s
    assert evaluate(point.model_copy(update={"round_overhead_s": 0.2e-3})).ours == pytest.approx(3.52, abs=0.01)
    gloo = evaluate(ratio.model_copy(update={"round_overhead_s": 0.2e-3}))
    assert gloo.ours == pytest.approx(1.47, abs=0.01) and gloo.within is False
    assert evaluate(ratio).within is True


def test_every_point_has_a_basis_and_definitional_rows_show_our_own_accounting():
    results = {r.point.id: r for r in evaluate_all()}
    assert {r.point.basis for r in results.values()} <= {"definitional", "input", "independent"}
    for r in results.values():
        if r.point.basis == "input":
            assert r.ours is None and r.point.why, r.point.id
        if r.point.own:
            assert r.own is not None and r.own > 0, r.point.id
    # 74.4 GB is params x bf16 x 31 peers by construction; what this harness counts (sent + received) is 4.8 GB
    assert results["distro-adamw-bytes"].own == pytest.approx(2 * 2 * 1.2045e9, rel=0.01)
    # INTELLECT-1's 400x is H x 32/8 bits; ours, with the int8 packets all-gathered, moves 57x less than AdamW
    assert results["intellect-1-reduction"].own == pytest.approx(800 / 14, rel=0.02)
    row = next(line for line in markdown_table(list(results.values())).splitlines() if "74.4 GB" in line)
    assert "definitional" in row and "sent + received: 4.8 GB" in row and "not run" in row


def test_covenant_round_is_projected_through_object_storage_and_its_gap_explained():
    r = evaluate(POINTS["covenant-comm"])
    # one 2.42 GB packet (69B stand-in, u16 + 2-bit) up at 110 Mbit/s, 19 down at 500 Mbit/s, framed
    packet = 2.42497e9
    assert r.ours == pytest.approx(packet * 1514 / 1448 * 8 * (1 / 110e6 + 19 / 500e6), rel=0.01)
    assert r.within is False and "overlap" in r.point.why and "not published" in r.point.why


def test_points_ship_inside_the_package():
    """A non-editable install has no repository around it: the points and their scenarios are package data."""
    import tomllib

    import distro_bench

    pkg = Path(distro_bench.__file__).resolve().parent
    assert POINTS_FILE.resolve().is_relative_to(pkg)
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = {f for pattern in patterns["distro_bench"] for f in pkg.glob(pattern)}
    assert POINTS_FILE.resolve() in shipped
    for p in load_points():
        if p.scenario:
            assert (POINTS_FILE.parent / p.scenario).resolve() in shipped, p.scenario
