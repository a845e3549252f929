"""`distro-bench schema`: the committed docs/scenario.schema.json is the generated one, every shipped scenario
validates against it (read as an editor reads YAML), and structurally broken scenarios are rejected."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from distro_bench.scenario.schema import COMMITTED_PATH, scenario_schema, yaml12_load

REPO = Path(__file__).resolve().parents[3]
SCENARIOS = sorted((REPO / "scenarios").glob("*.yaml"))


@pytest.fixture(scope="module")
def validator():
    schema = scenario_schema()
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def test_committed_schema_is_the_generated_one():
    committed = json.loads((REPO / COMMITTED_PATH).read_text())
    assert committed == scenario_schema(), f"regenerate: distro-bench schema --out {COMMITTED_PATH}"


def test_cli_prints_the_schema(cli):
    result = cli("schema")
    assert result.exit_code == 0 and json.loads(result.stdout) == scenario_schema()


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_shipped_scenarios_validate_and_point_at_the_schema(validator, path):
    text = path.read_text()
    assert text.splitlines()[0] == f"# yaml-language-server: $schema=../{COMMITTED_PATH}"
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(yaml12_load(text))]
    assert not errors, errors


def _doc(**overrides) -> dict:
    d = {"name": "t", "workers": [{"count": 2, "link": "x"}], "links": {"x": {"up": "10Mbit", "delay": "15ms"}},
         "optimizers": {"adamw": {"lr": 1e-3}, "distro": {"lr": 1e-3, "topk": 4, "values": "1bit"}}}
    d.update(overrides)
    return d


# The structurally broken scenarios of tests/test_scenario.py (the ones a schema can see; references between
# sections and jitter <= delay are validate's job), and a few per-optimizer cases.
BROKEN = {
    "rate in bytes": _doc(links={"x": {"up": "10MB"}}),
    "duration without unit": _doc(links={"x": {"up": "10Mbit", "delay": "15"}}),
    "loss without %": _doc(links={"x": {"loss": "0.1"}}),
    "count 0": _doc(workers=[{"count": 0}]),
    "unknown model preset": _doc(model={"preset": "huge"}),
    "unknown optimizer name": _doc(optimizers={"adamw": {"lr": 1e-3}, "sgd": {"lr": 1}}),
    "negative lr": _doc(optimizers={"adamw": {"lr": -1}}),
    "option of another optimizer": _doc(optimizers={"adamw": {"lr": 1e-3, "topk": 4}}),
    "unknown option": _doc(optimizers={"adamw": {"lr": 1e-3, "momentum": 0.9}}),
    "bad values codec": _doc(optimizers={"distro": {"lr": 1e-3, "values": "2bit"}}),
    "typed entry with a wrong option": _doc(optimizers={"fast": {"type": "distro", "lr": 1e-3, "weight_decay": 0.1,
                                                                 "beta1": 0.9}}),
    "unknown type": _doc(optimizers={"fast": {"type": "lion", "lr": 1e-3}}),
    "unknown top-level field": _doc(colour="blue"),
    "bad device": _doc(hardware={"slow": {"device": "tpu"}}),
    "bad name": _doc(name="bad name!"),
}


@pytest.mark.parametrize("case", BROKEN)
def test_broken_scenarios_are_rejected(validator, case):
    assert list(validator.iter_errors(BROKEN[case])), f"{case} passed the schema"


def test_options_per_optimizer_type_are_offered():
    schema = scenario_schema()
    distro = schema["$defs"]["DisTrOConfig"]["properties"]
    assert {"topk", "values", "chunk"} <= set(distro)
    assert distro["values"]["enum"] == ["fp32", "bf16", "1bit"]
    assert "topk" not in schema["$defs"]["AdamWConfig"]["properties"]
    rate = schema["$defs"]["LinkSpec"]["properties"]["up"]
    assert "pattern" in json.dumps(rate) and "10Mbit" in json.dumps(rate)


def test_a_typed_entry_under_any_name_validates(validator):
    assert not list(validator.iter_errors(_doc(optimizers={"adamw": {"lr": 1e-3},
                                                          "distro-fp32": {"type": "distro", "lr": 1e-3, "topk": 32}})))
