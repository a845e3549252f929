"""Published operating points (scenarios/published/points.yaml) against the projection model."""

from __future__ import annotations

import math

import pytest

from distro_bench.errors import InputError
from distro_bench.scenario.presets import MODELS
from distro_bench.studies.published import POINTS_FILE, TOLERANCE, evaluate, evaluate_all, load_points, markdown_table
from distro_bench.train.model import ModelConfig, parameter_shapes
from distro_bench.train.projection import analytic_shapes

POINTS = {p.id: p for p in load_points()}


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


def test_docs_carry_the_current_table():
    doc = (POINTS_FILE.parents[2] / "docs" / "projection.md").read_text()
    assert markdown_table(evaluate_all()) in doc, "run: python benchmarks/published.py --write-docs"


def test_a_bad_points_file_names_the_field(tmp_path):
    bad = tmp_path / "points.yaml"
    bad.write_text("points:\n  - {id: x, figure: f, published: 1, unit: ratio, source: s, measure: nope}\n")
    with pytest.raises(InputError, match=r"points\[0\]\.measure: 'nope' is not one of paper_bytes"):
        load_points(bad)
    bad.write_text("points:\n  - {id: x, figure: f, published: 1, unit: furlongs, source: s}\n")
    with pytest.raises(InputError, match=r"points\[0\]"):
        load_points(bad)


def test_project_published_cli_prints_every_point(cli):
    import json

    result = cli("project", "--published", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in json.loads(result.output)}
    assert set(rows) == set(POINTS)
    assert rows["intellect-1-reduction"]["within_15pct"] is True
    assert rows["intellect-1-utilisation"]["ours"] is None and rows["intellect-1-utilisation"]["why"]
    missing = cli("project")
    assert missing.exit_code == 2 and "SCENARIO" in missing.output
