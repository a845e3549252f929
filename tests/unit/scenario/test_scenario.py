"""Scenario validation: every broken file gives located problems and exit 2; good files resolve."""

from __future__ import annotations

import pytest
import yaml

from distro_bench.errors import ScenarioError
from distro_bench.scenario.loading import load_scenario, scenario_from_dict, with_overrides
from tests.helpers import REPO, tiny_scenario_dict

SCENARIOS = sorted((REPO / "scenarios").glob("*.yaml"))


def _broken(**overrides):
    return tiny_scenario_dict(**overrides)


BROKEN = [
    # (document, expected fragment of the located message)
    (_broken(workers=[{"count": 2, "link": "dsl"}, {"count": 1, "link": "dls"}]), "workers[1].link: unknown link 'dls'; known:"),
    (_broken(workers=[{"count": 2, "hardware": "rtx9090"}]), "workers[0].hardware: unknown hardware 'rtx9090'"),
    (_broken(links={"x": {"up": "10MB"}}, workers=[{"count": 2, "link": "x"}]), "links.x.up: invalid rate '10MB'"),
    (_broken(links={"x": {"up": "10Mbit", "delay": "15"}}, workers=[{"count": 2, "link": "x"}]), "links.x.delay: duration '15' has no unit"),
    (_broken(links={"x": {"loss": "0.1"}}, workers=[{"count": 2, "link": "x"}]), "links.x.loss: invalid percentage"),
    (_broken(links={"x": {"delay": "5ms", "jitter": "10ms"}}, workers=[{"count": 2, "link": "x"}]), "links.x: jitter 10ms exceeds delay 5ms"),
    (_broken(workers=[{"count": 0}]), "workers[0].count: Input should be greater than or equal to 1"),
    (_broken(model={"preset": "huge"}), "model.preset: unknown model 'huge'"),
    (_broken(optimizers={"adamw": {"lr": 1e-3}, "sgd": {"lr": 1}}), "optimizers.sgd.(name): unknown optimizer 'sgd'"),
    (_broken(optimizers={"adamw": {"lr": -1}}), "optimizers.adamw.lr: Input should be greater than 0"),
    (_broken(optimizers={"adamw": {"lr": 1e-3, "momentum": 0.9}}), "optimizers.adamw.momentum: unknown field 'momentum'"),
    (_broken(baseline="sgd"), "baseline: 'sgd' is not one of the optimizers"),
    (_broken(data={"corpus": "no/such/file.txt"}), "data.corpus: no such file or folder"),
    (_broken(data={"seq_len": 4096}), "data.seq_len: 4096 exceeds the model's max_seq_len 512"),
    (_broken(train={"steps": 5, "eval_every": 10}), "train.eval_every: 10 is more than train.steps"),
    (_broken(colour="blue"), "colour: unknown field 'colour'"),
    (_broken(hardware={"slow": {"device": "tpu"}}, workers=[{"count": 2, "hardware": "slow"}]), "hardware.slow.device: invalid device 'tpu'"),
    (_broken(name="bad name!"), "name: invalid name 'bad name!'"),
]


@pytest.mark.parametrize("doc,fragment", BROKEN, ids=[f[1].split(":")[0] for f in BROKEN])
def test_broken_scenario_gives_located_error_and_exit_2(cli, write_scenario, doc, fragment):
    path = write_scenario(doc)
    result = cli("validate", path)
    assert result.exit_code == 2, result.output
    assert fragment in " ".join(result.output.split()), result.output
    assert "Traceback" not in result.output


def test_several_problems_are_all_reported(write_scenario):
    doc = _broken(workers=[{"count": 2, "link": "dls", "hardware": "nope"}], baseline="sgd")
    with pytest.raises(ScenarioError) as e:
        load_scenario(write_scenario(doc))
    assert len(e.value.problems) == 3


@pytest.mark.parametrize("text,fragment", [
    ("name: [unclosed", "not valid YAML"),
    ("- just\n- a list\n", "expected a mapping"),
    ("", "expected a mapping"),
])
def test_unparseable_files_exit_2(cli, write_scenario, text, fragment):
    result = cli("validate", write_scenario(text))
    assert result.exit_code == 2
    assert fragment in result.output


def test_missing_file_exit_2(cli, tmp_path):
    result = cli("validate", tmp_path / "nope.yaml")
    assert result.exit_code == 2 and "no such scenario file" in result.output


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_shipped_scenarios_validate(cli, path):
    result = cli("validate", path)
    assert result.exit_code == 0, result.output


def test_presets_expand_and_nodes_are_numbered():
    s = scenario_from_dict(tiny_scenario_dict(
        workers=[{"count": 2, "link": "dsl", "name": "home"}, {"name": "dc", "link": {"preset": "dsl", "loss": "1%"}}]))
    nodes = s.nodes()
    assert [n.name for n in nodes] == ["home-0", "home-1", "dc"]
    assert nodes[0].link.up == 10_000_000 and nodes[0].link.down == 50_000_000
    assert nodes[2].link.loss == pytest.approx(0.01) and nodes[2].link.up == 10_000_000


def test_compute_scale_derives_from_tflops():
    s = scenario_from_dict(tiny_scenario_dict(workers=[{"count": 1, "hardware": "rtx4090"}, {"count": 1, "hardware": "rtx3060"}]))
    scales = [n.compute_scale for n in s.nodes()]
    assert scales[0] == 1.0 and scales[1] == pytest.approx(51 / 165)


def test_resolved_scenario_round_trips(tmp_path):
    s = load_scenario(REPO / "scenarios" / "home-dsl.yaml")
    from distro_bench.scenario.loading import dump_scenario

    p = tmp_path / "resolved.yaml"
    p.write_text(dump_scenario(s))
    again = load_scenario(p)
    assert again.nodes() == s.nodes()
    assert again.optimizer_configs() == s.optimizer_configs()
    assert again.resolved_model() == s.resolved_model()
    assert yaml.safe_load(p.read_text())["links"]["dsl"]["up"] == "10Mbit"


def test_overrides_select_optimizers_and_steps():
    s = scenario_from_dict(tiny_scenario_dict())
    t = with_overrides(s, steps=3, optimizers=["adamw"])
    assert t.train.steps == 3 and list(t.optimizers) == ["adamw"]
    with pytest.raises(ScenarioError, match="unknown optimizer 'nope'"):
        with_overrides(s, optimizers=["nope"])
