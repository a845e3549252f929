"""Replay (issue 34): the scenario section, the collectives a replay issues against its prediction, the codec
measured on this CPU, and the summary and console figures, without starting workers."""

from __future__ import annotations

import math

import pytest

from distro_bench.errors import ScenarioError
from distro_bench.report.replay_section import replay_lines, replay_rows
from distro_bench.results.build import build_summary, memory_and_replay
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.train.model import ModelConfig, parameter_shapes
from distro_bench.train.optim import STRATEGIES, Collective
from distro_bench.train.optim.base import payload_of, scaled
from distro_bench.train.projection import project
from distro_bench.train.replay import codec_sample, compute_seconds_of, measure_codec_s, resolve_codecs
from tests.helpers import tiny_scenario_dict


def _replay(replay: dict | None = None, **over):
    d = tiny_scenario_dict(workers=[{"count": 3, "hardware": "rtx3060"}],
                           optimizers={"adamw": {"lr": 1e-3}, "distro": {"lr": 1e-3, "topk": 8, "values": "1bit"},
                                       "diloco": {"lr": 1e-3, "inner_steps": 3, "pseudo_grad": "int8"}},
                           replay=replay if replay is not None else {}, **over)
    return scenario_from_dict(d)


def _problems(**kw) -> str:
    with pytest.raises(ScenarioError) as e:
        _replay(**kw)
    return str(e.value)


def test_a_replay_scenario_validates_and_says_its_mode():
    s = _replay({"fraction": {"adamw": 0.25}, "codec": {"distro": 0.01}})
    assert s.mode == "replay" and s.replay is not None
    assert s.replay.fraction_of("adamw") == 0.25 and s.replay.fraction_of("distro") == 1.0
    assert s.replay.codec_of("distro") == 0.01 and s.replay.codec_of("adamw") == "measure"
    assert scenario_from_dict(tiny_scenario_dict()).mode == "train"


@pytest.mark.parametrize("replay, words", [
    ({"fraction": {"adamw": 0}}, "replay.fraction: adamw: 0.0 must be in (0, 1]"),
    ({"fraction": {"adamw": 1.5}}, "must be in (0, 1]"),
    ({"codec": {"distro": "fast"}}, "codec"),
    ({"codec": {"distro": -1}}, "must be 'measure' or seconds"),
    ({"fraction": {"sgd": 0.5}}, "replay.fraction.sgd: not one of the optimizers"),
    ({"mfu": 0}, "mfu"),
    ({"wait": True}, "wait"),
])
def test_bad_replay_fields_are_refused_by_name(replay, words):
    assert words in _problems(replay=replay)


def test_a_replay_refuses_what_it_cannot_run():
    assert "a replay runs a number of steps" in _problems(replay={}, train={"time_budget": "10s"})
    d = tiny_scenario_dict(workers=[{"count": 2, "hardware": "host"}], replay={}, optimizers={"adamw": {"lr": 1e-3}})
    with pytest.raises(ScenarioError, match=r"hardware.host: a replay takes each step's compute from the profile's tflops"):
        scenario_from_dict(d)
    d = tiny_scenario_dict(workers=[{"count": 2, "hardware": "rtx3060"}], replay={},
                           optimizers={"noloco": {"lr": 1e-3, "group_size": 2}})
    with pytest.raises(ScenarioError, match="noloco cannot be replayed"):
        scenario_from_dict(d)


def test_scaled_collectives_keep_kind_and_round_alike():
    cs = [Collective("all_reduce", 1001), Collective("all_gather", 3, floor_bits=20.0)]
    assert scaled(cs, 1.0) is cs
    half = scaled(cs, 0.5)
    assert [(c.kind, c.nbytes) for c in half] == [("all_reduce", 500), ("all_gather", 2)]
    assert half[1].floor_bits == 10.0 and half[0].floor_bits is None
    assert scaled([Collective("all_gather", 1)], 1e-6)[0].nbytes == 1  # never an empty buffer


def test_the_prediction_counts_what_the_replay_issues():
    """Per-step payload in the prediction = the replay's own collectives over a whole number of periods."""
    s = _replay({"fraction": {"adamw": 0.25, "diloco": 0.5}})
    shapes = parameter_shapes(ModelConfig(**s.resolved_model()))
    proj = {p.optimizer: p for p in project(s)}
    for name, cfg in s.optimizers.items():
        strategy = STRATEGIES[cfg.type]
        steps = 6  # two DiLoCo periods
        issued = [c for step in range(steps)
                  for c in scaled(strategy.predict_step(cfg, shapes, 3, step, steps), s.replay.fraction_of(name))]
        tx, rx = payload_of(issued, 3)
        assert proj[name].payload_tx_bytes == pytest.approx(tx / steps)
        assert proj[name].payload_rx_bytes == pytest.approx(rx / steps)
    full = STRATEGIES["adamw"].predict_payload_bytes(s.optimizers["adamw"], shapes, 3)[0]
    assert proj["adamw"].payload_tx_bytes == pytest.approx(full / 4, abs=1)


def test_compute_comes_from_the_profile():
    s = _replay()
    node = s.nodes()[0]
    assert compute_seconds_of(node, 1_000_000, 1000, 0.5) == pytest.approx(6e9 / (51e12 * 0.5))


def test_the_codec_sample_is_whole_tensors_of_the_model():
    shapes = {"emb": (1000, 100), "a": (100, 100), "b": (100, 100), "c": (50,)}
    assert codec_sample(shapes, budget=20_000) == {"a": (100, 100), "b": (100, 100)}
    assert codec_sample(shapes, budget=20_050) == {"a": (100, 100), "b": (100, 100), "c": (50,)}
    assert codec_sample({"big": (1000, 1000), "small": (10, 10)}, budget=1) == {"small": (10, 10)}


def test_the_codec_is_measured_and_written_as_seconds():
    s = _replay({"codec": {"adamw": 0.0}})
    shapes = parameter_shapes(ModelConfig(**s.resolved_model()))
    seconds, sampled = measure_codec_s(s.optimizers["distro"], shapes, 3)
    assert seconds > 0 and 0 < sampled <= sum(math.prod(v) for v in shapes.values())
    notes: list[str] = []
    resolved = resolve_codecs(s, notes.append)
    assert resolved.replay.codec["adamw"] == 0.0  # a stated figure is kept
    assert all(isinstance(resolved.replay.codec[n], float) for n in ("distro", "diloco"))
    assert len(notes) == 2 and all("on this CPU" in n and "rtx3060" in n for n in notes)
    train = scenario_from_dict(tiny_scenario_dict())
    assert resolve_codecs(train) is train


def _events(world: int = 2) -> list[dict]:
    replay = {"compute_s": 0.5, "mfu": 0.4, "codec_s": 0.1, "fraction": 0.5, "compute_waited": True,
              "tokens_per_step": 128}
    out = []
    for r in range(world):
        out.append({"type": "start", "mode": "replay", "optimizer": "adamw", "rank": r, "world_size": world,
                    "params": 1000, "device": "cpu", "seed": 0, "replay": replay})
        out.append({"type": "end", "optimizer": "adamw", "rank": r, "seed": 0, "max_rss_bytes": 1000 + r,
                    "param_checksum": None, "steps": 2})
    return out


def test_the_summary_marks_a_replay_and_its_figures():
    figures = memory_and_replay("adamw", _events(), step_time_s=2.0)
    assert figures["max_rss_bytes"] == 1001
    assert figures["replay"]["utilisation"] == pytest.approx(0.25) and figures["replay"]["fraction"] == 0.5
    assert figures["replay_fraction"] == 0.5  # issue 48: a top-level key, so summary.csv has its column
    assert memory_and_replay("adamw", [], step_time_s=2.0)["replay_fraction"] is None  # a training run
    import pandas as pd

    summary = build_summary(pd.DataFrame(), _events(), schema_version=1, run={"scenario": "x"}, baseline="adamw")
    assert summary["run"]["mode"] == "replay"
    assert build_summary(pd.DataFrame(), [], schema_version=1, run={}, baseline="adamw")["run"]["mode"] == "train"


def test_the_replay_table_says_a_fraction_and_compares_with_the_prediction():
    summary = {"run": {"mode": "replay"}, "optimizers": {"adamw": {
        "step_time_s_mean": 2.0, "comm_s_mean": 1.4, "payload_tx_bytes_per_step": 1e6, "payload_rx_bytes_per_step": 1e6,
        "wire_tx_bytes_per_step": 1.05e6, "max_rss_bytes": 2e9,
        "replay": {"compute_s": 0.5, "codec_s": 0.1, "fraction": 0.5, "utilisation": 0.25}}}}
    row = replay_rows(summary, {"adamw": {"wire_tx_bytes": 1.0e6, "comm_s": 0.7}})[0]
    assert row[6] == "1.05 MB" and row[7] == "1 MB" and row[8] == "1.1x" and row[9] == "25%"
    assert row[10] == "0.5 of the bytes" and row[11] == "2 GB"
    assert row[12] == "700 ms" and row[13] == "2.0x"  # replayed communication beside the predicted, and their ratio
    lines = replay_lines(summary, {})
    assert lines[0].startswith("byte replay (predicted messages, synthetic contents, codec timed apart")
    assert "fraction of predicted bytes replayed: adamw 0.5 of the bytes" in lines[0]
    assert any("adamw replayed 0.5 of the bytes" in line for line in lines)


def test_a_replay_runs_over_gloo_whatever_the_profiles_ask():
    from distro_bench.run.lifecycle import choose_dist_backend

    assert choose_dist_backend(_replay()) == "gloo"  # its buffers live in host memory, even beside GPUs


def test_running_some_optimizers_drops_the_replay_settings_of_the_others():
    from distro_bench.scenario.loading import with_overrides

    s = with_overrides(_replay({"fraction": {"adamw": 0.25}, "codec": {"adamw": 0.0, "distro": 0.01}}),
                       optimizers=["distro"])
    assert list(s.optimizers) == ["distro"] and s.replay.fraction == {} and s.replay.codec == {"distro": 0.01}


def test_buffers_that_do_not_fit_are_refused_with_a_fraction_that_does():
    from distro_bench.train.replay import buffer_bytes, memory_problem

    assert buffer_bytes([Collective("all_reduce", 10), Collective("all_gather", 3)], 4) == 20
    assert buffer_bytes([Collective("all_gather", 10)], 4) == 50
    s = _replay()
    assert memory_problem(s, available=10**12) is None
    why = memory_problem(s, available=10**6)
    assert why is not None and "replay.fraction." in why and "more than half" in why
    name = why.split("replay: ")[1].split("'s")[0]
    fraction = float(why.rsplit(": ", 1)[1].split()[0])
    d = tiny_scenario_dict(workers=[{"count": 3, "hardware": "rtx3060"}], replay={"fraction": {name: fraction}},
                           optimizers={name: _replay().optimizers[name].model_dump()})
    assert memory_problem(scenario_from_dict(d), available=10**6) is None  # the fraction it names fits
    assert memory_problem(scenario_from_dict(tiny_scenario_dict()), available=1) is None  # training: not asked


def test_the_line_a_replay_opens_with_says_what_it_is_and_how_much_ran():
    from distro_bench.scenario.replay import banner

    line = banner({"adamw": 0.015625, "distro": 1.0})
    assert line.startswith("byte replay (predicted messages, synthetic contents, the codec timed apart)")
    assert "fraction of predicted bytes replayed: adamw 0.0156, distro 1" in line and "full-size" not in line
