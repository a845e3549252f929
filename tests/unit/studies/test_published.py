"""Published operating points (distro_bench/data/published/points.yaml) against the projection model."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from distro_bench.errors import InputError
from distro_bench.scenario.presets import MODELS
from distro_bench.studies.published import (
    POINTS_FILE,
    TOLERANCE,
    PointResult,
    counts,
    evaluate,
    evaluate_all,
    excerpt_text,
    load_points,
    load_replay,
    markdown_table,
    sensitivity_table,
    table_rows,
)
from distro_bench.studies.time_model import TIME_MODEL_FILE, load_time_model
from distro_bench.train.model import ModelConfig, parameter_shapes
from distro_bench.train.projection import analytic_shapes
from tests.helpers import make_run

POINTS = {p.id: p for p in load_points()}
REPO = Path(__file__).resolve().parents[3]


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


def test_opendiloco_figure_is_the_pull_requests_own_words_with_its_caveat():
    """The 102 s is prime-diloco PR 23's (not the OpenDiLoCo paper's), and its author doubts the setup."""
    point = POINTS["opendiloco-allreduce"]
    result = evaluate(point)
    assert point.quote_check == "verified" and "pull/23" in point.document
    assert "share the limit" in point.quote and "shared" in point.why
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
    results = evaluate_all(replays=_kept_replays())
    assert markdown_table(results) in doc, "run: python benchmarks/published.py --write-docs"
    assert sensitivity_table(results) in doc, "run: python benchmarks/published.py --write-docs"


def test_kept_replays_fill_the_replayed_column_where_comparable():
    results = {r.point.id: r for r in evaluate_all(replays=_kept_replays())}
    distro = results["distro-distro-step"]
    assert distro.replayed is not None and "8 workers" in distro.replay_note and "model for those links" in distro.replay_note
    adamw = results["distro-adamw-step"]  # 1/64 of AdamW's bytes replayed: no full-size figure, said so
    assert adamw.replayed is None and "0.015625 of adamw's bytes replayed" in adamw.replay_note
    assert results["covenant-comm"].replayed is None and results["covenant-comm"].replay_note == ""
    assert "0.015625 of adamw's bytes" in table_rows([adamw])[0][5]


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
    assert rows["distro-adamw-step"]["basis"] == "calibrated" and rows["distro-adamw-step"]["replayed"] is None
    assert rows["distro-adamw-bytes"]["basis"] == "definitional" and rows["distro-adamw-bytes"]["own"] > 0
    missing = cli("project")
    assert missing.exit_code == 2 and "SCENARIO" in missing.output


def _table3_hours(method: str) -> float:
    """The wall time of Table 3's row for `method`, read from the stored excerpt of the report's own text."""
    text = excerpt_text(POINTS_FILE.parent / "excerpts" / "distro-report-tables.txt")
    row = next(line for line in text.splitlines() if line.strip().startswith(method))
    return float(row.split("Hours")[0].split()[-1])


def test_step_times_are_the_reports_own_assignment():
    """Table 3 as the report prints it: AdamW + all-reduce 17.1 h, DisTrO 19.8 h, over Table 1's 25,000 steps.
    (An earlier table had them swapped, quoting an issue rather than the report.)"""
    assert _table3_hours("All-Reduce + AdamW") == 17.1 and _table3_hours("DisTrO + AdamW") == 19.8
    adamw, distro = POINTS["distro-adamw-step"], POINTS["distro-distro-step"]
    assert adamw.published == pytest.approx(17.1 * 3600 / 25000) == pytest.approx(2.4624)
    assert distro.published == pytest.approx(19.8 * 3600 / 25000) == pytest.approx(2.8512)
    assert POINTS["distro-step-ratio"].published == pytest.approx(17.1 / 19.8, abs=1e-4)  # below 1: AdamW faster
    assert POINTS["distro-adamw-loss"].published == 2.449 and POINTS["distro-distro-loss"].published == 2.373


def test_the_distro_step_includes_measured_optimizer_compute_and_the_gap_is_sized():
    """The report's 0.39 s a step between DisTrO and AdamW on one cluster is DisTrO's own compute. The model has
    it from measured codecs (benchmarks/optimizer_compute.py, committed) carried to the H100: with this harness's
    bucketed codec DisTrO still comes out a little faster (the ratio row fails: wrong side of 1); with DeMo's
    per-tensor reference codec, measured the same way, DisTrO is the slower and the row lands in the band
    (docs/projection.md says so)."""
    adamw, distro = evaluate(POINTS["distro-adamw-step"]), evaluate(POINTS["distro-distro-step"])
    codec = dict(distro.optimizer_compute_s)["distro"]
    update = dict(adamw.optimizer_compute_s)["adamw"]
    assert codec > update > 0
    # compute: 6 x 1.2045B x (2048 / 32 x 2048 tokens) / (989 TFLOPS x 0.4), then the measured optimizer compute
    flops_s = 6 * 1.2045e9 * 64 * 2048 / (989e12 * 0.4)
    assert distro.ours == pytest.approx(flops_s + codec, rel=0.01)
    ratio = evaluate(POINTS["distro-step-ratio"])
    assert ratio.ours == pytest.approx(adamw.ours / distro.ours)
    assert ratio.ours > 1 and ratio.within is False  # ours: DisTrO faster, against the report
    reference = evaluate(POINTS["distro-step-ratio"], overrides={"distro_codec": "demo-reference"})
    assert reference.ours < 1 and reference.within is True  # the per-tensor codec's measured cost closes the gap
    assert dict(reference.optimizer_compute_s)["distro"] > 2 * codec
    # without optimizer compute (a device infinitely fast at it) the model's DisTrO is faster still
    bare = evaluate(POINTS["distro-step-ratio"], overrides={"device_bandwidth_Bps": 1e30})
    assert bare.ours > ratio.ours > 1


def test_a_ratio_on_the_wrong_side_of_one_is_outside_the_band_however_close():
    point = POINTS["distro-step-ratio"].model_copy(update={"published": 0.95})  # a published ratio near 1
    wrong = PointResult(point, 1.02)  # within 15% of 0.95, but says the other method is faster
    assert point.band[0] <= wrong.ratio <= point.band[1] and wrong.within is False
    assert PointResult(point, 0.9).within is True


def test_no_time_row_is_independent_whose_setting_came_after_its_figure():
    model = load_time_model()
    results = {r.point.id: r for r in evaluate_all()}
    seen = {row for s in model.settings.values() for row in s.chosen_after}
    assert {"distro-adamw-step", "distro-distro-step", "distro-step-ratio"} <= seen
    for row in seen:
        assert results[row].basis == "calibrated", row
    assert "round_overhead_s" in results["distro-adamw-step"].calibrated_by
    # rows whose settings were fixed beforehand stay independent
    assert results["covenant-comm"].basis == "independent" and not results["covenant-comm"].calibrated_by
    c = counts(list(results.values()))
    assert c["calibrated_rows"] == 3 and c["independent_rows"] == sum(
        r.basis == "independent" and r.within is not None for r in results.values())


def test_every_time_row_shows_each_settings_sensitivity():
    model = load_time_model()
    for r in evaluate_all():
        used = model.for_row(r.point.id)
        if r.ours is None or not used:
            continue
        seen = {(s["setting"], s["at"]) for s in r.sensitivity}
        for name, setting in used.items():
            if isinstance(setting.value, bool | str):
                assert (name, "alternative") in seen, (r.point.id, name)
            else:
                assert {(name, "-25%"), (name, "+25%")} <= seen, (r.point.id, name)
    # MFU is the setting that matters most for the AdamW step: -25% puts it out of the band
    adamw = next(r for r in evaluate_all() if r.point.id == "distro-adamw-step")
    low = next(s for s in adamw.sensitivity if s["setting"] == "mfu" and s["at"] == "-25%")
    assert low["value"] == pytest.approx(0.3) and low["within_band"] is False


def test_the_per_round_cost_is_a_calibrated_setting_and_what_it_moves():
    """gloo's 0.2 ms a round in place of NCCL's 6.6 us puts the ~5,100 rounds of AdamW's bucketed ring into each
    step: about 1 s more, the difference the setting was chosen to remove (commit 1b82d4c)."""
    point = POINTS["distro-adamw-step"]
    nccl = evaluate(point)
    gloo = evaluate(point, overrides={"round_overhead_s": 0.2e-3})
    rounds = (nccl.ours - gloo.ours) / (6.6e-6 - 0.2e-3)
    assert 5000 < rounds < 5200
    assert load_time_model().settings["round_overhead_s"].chosen_after


def test_optimizer_compute_is_carried_by_the_ratio_of_memory_bandwidths():
    from distro_bench.studies.time_model import OptimizerCompute

    measured = OptimizerCompute(device="cpu", host_bandwidth_Bps=20e9, source="x",
                                fits={"distro": {"step": {"a": 10e-9, "b": 1e-9}}, "diloco": {"step": {"a": 2e-9, "b": 0},
                                                                                             "sync": {"a": 40e-9, "b": 0}}})
    # (10 + 31 x 1) ns a parameter x 1e9 parameters x 20 GB/s / 2 TB/s
    assert measured.seconds_per_step("distro", 10**9, 32, 1, 2e12) == pytest.approx(41e-9 * 1e9 / 100)
    assert measured.seconds_per_step("distro", 10**9, 32, 1, 4e12) == pytest.approx(41e-9 * 1e9 / 200)
    # a sync's cost is spread over its period
    assert measured.seconds_per_step("diloco", 10**9, 8, 20, 20e9) == pytest.approx((2e-9 + 2e-9) * 1e9)
    assert measured.seconds_per_step("adamw", 10**9, 8, 1, 2e12) is None


def test_every_quote_is_in_its_stored_excerpt_and_unverified_points_are_counted_apart():
    points = load_points()
    for p in points:
        assert p.quote_check == ("verified" if p.excerpts else "unverified"), p.id
        if p.excerpts:
            assert p.document and p.place, p.id
            text = " ".join(" ".join(excerpt_text(POINTS_FILE.parent / "excerpts" / e).split()) for e in p.excerpts)
            for q in p.quotes:
                assert " ".join(q.split()) in text, (p.id, q)
    c = counts(evaluate_all())
    assert c["quotes_unverified"] == sum(not p.excerpts for p in points) >= 1
    assert c["quotes_verified"] + c["quotes_unverified"] == len(points)
    for f in (POINTS_FILE.parent / "excerpts").glob("*.txt"):  # short excerpts, never whole documents
        assert len(f.read_text()) < 2000, f.name


def test_a_quote_not_in_its_excerpt_is_refused_naming_the_point(tmp_path):
    (tmp_path / "excerpts").mkdir()
    (tmp_path / "excerpts" / "doc.txt").write_text("# header\nThe run took 17.1 Hours\nin all.\n")
    good = tmp_path / "points.yaml"
    good.write_text("points:\n  - {id: x, figure: f, published: 1, unit: seconds, source: s, basis: input,"
                    " quote: 'took 17.1   Hours in all', excerpt: doc.txt}\n")
    assert load_points(good)[0].quote_check == "verified"
    good.write_text("points:\n  - {id: x, figure: f, published: 1, unit: seconds, source: s, basis: input,"
                    " quote: 'took 19.8 Hours', excerpt: doc.txt}\n")
    with pytest.raises(InputError, match=r"points\[0\] \(x\)\.quote: 'took 19.8 Hours' is not in excerpts/doc.txt"):
        load_points(good)
    good.write_text("points:\n  - {id: x, figure: f, published: 1, unit: seconds, source: s, basis: input,"
                    " quote: 'q', excerpt: absent.txt}\n")
    with pytest.raises(InputError, match="cannot read"):
        load_points(good)


def test_a_bad_time_model_names_the_field(tmp_path):
    bad = tmp_path / "tm.yaml"
    bad.write_text("date: x\nfrozen: y\noptimizer_compute: z.json\nsettings:\n"
                   "  link: {value: 400.0e9, kind: link, source: s, assumed: true, rows: [r]}\n")
    with pytest.raises(InputError, match=r"(?s)settings\.link.*not a number"):
        load_time_model(bad)


def test_project_published_json_gives_the_reports_step_times_with_verified_quotes(cli):
    import json

    rows = {r["id"]: r for r in json.loads(cli("project", "--published", "--json").output)}
    adamw, distro = rows["distro-adamw-step"], rows["distro-distro-step"]
    assert round(adamw["published"], 2) == 2.46 and round(distro["published"], 2) == 2.85
    assert adamw["quote_check"] == distro["quote_check"] == "verified"
    assert "All-Reduce + AdamW 32xH100 17.1 Hours" in " ".join(adamw["quote"])
    assert distro["optimizer_compute_s"]["distro"] > 0 and distro["basis"] == "calibrated"
    assert {s["setting"] for s in distro["sensitivity"]} >= {"mfu", "interconnect_bps", "device_bandwidth_Bps"}


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
        for e in p.excerpts:
            assert (POINTS_FILE.parent / "excerpts" / e).resolve() in shipped, e
    model = load_time_model()
    assert (POINTS_FILE.parent / "time-model-2026-12-06.yaml").resolve() in shipped
    assert (POINTS_FILE.parent / model.optimizer_compute).resolve() in shipped


# The time model and the measurement it names, as frozen on 2026-12-06: a changed value is a new dated file (and a
# new line here), never an edit of one the rows were judged with.
FROZEN = {"time-model-2026-12-06.yaml": "b5d2a86b0d9eed28ed48077a431a9f2a3140cb52a66ed2657fcd520832abd466",
          "optimizer-compute-cpu-2026-12-06.json": "31f0596c4eaf8077a0c7cb724c266b0012b97028fbaeab72e23c57c6b4b63969"}


def test_a_dated_time_model_is_not_edited_after_it_is_judged():
    import hashlib

    model = load_time_model()
    assert TIME_MODEL_FILE.name == f"time-model-{model.date}.yaml" and model.optimizer_compute in FROZEN
    for name, digest in FROZEN.items():
        assert hashlib.sha256((POINTS_FILE.parent / name).read_bytes()).hexdigest() == digest, (
            f"{name} changed after its rows were judged: write a new dated file and point the time model at it")
