"""`validate --json`'s document, built by the API (api.validate_document) and printed by the CLI (issue 50)."""

from __future__ import annotations

import json

import pytest
import yaml

from distro_bench import api
from tests.helpers import tiny_scenario_dict


def test_validate_document_is_what_validate_json_prints(cli, tmp_path):
    path = tmp_path / "s.yaml"
    d = tiny_scenario_dict(links={"dsl": {"up": "10Mbit", "down": "50Mbit", "delay": "15ms", "duplicate": "1%"}},
                           workers=[{"count": 2, "hardware": "host", "link": "dsl"}])
    path.write_text(yaml.safe_dump(d))
    doc = api.validate_document(path)
    assert doc.valid and doc.exit_code == 0
    nodes = doc.document["nodes"]
    assert [n["rank"] for n in nodes] == [0, 1]
    assert nodes[0]["up_bps"] == 10e6 and nodes[0]["down_bps"] == 50e6
    assert nodes[0]["delay_s"] == pytest.approx(0.015) and nodes[0]["duplicate"] == pytest.approx(0.01)
    out = cli("validate", path, "--json")
    assert out.exit_code == 0 and json.loads(out.stdout) == doc.document


def test_validate_document_lists_every_problem_with_the_error_code(cli, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario_dict(baseline="nope", train={"steps": -1})))
    doc = api.validate_document(path)
    assert not doc.valid and doc.exit_code == 2
    fields = {p["field"] for p in doc.document["problems"]}
    assert "baseline" in fields and any(f.startswith("train") for f in fields), fields
    assert next(p for p in doc.document["problems"] if p["field"] == "baseline")["value"] == "nope"
    out = cli("validate", path, "--json")
    assert out.exit_code == 2 and json.loads(out.stdout) == doc.document
    missing = api.validate_document(tmp_path / "absent.yaml")
    assert not missing.valid and missing.exit_code == 2 and missing.document["problems"]
