"""Issue 26, scenario input: hostile or absurd scenarios are refused at validation with one located line and
exit 2, never a traceback, a hang, a write outside the run folder or a file's contents echoed."""

from __future__ import annotations

import math
import os
import threading
import time
from pathlib import Path

import pytest
import yaml

from distro_bench.errors import ScenarioError
from distro_bench.scenario import trace as trace_mod
from distro_bench.scenario.loading import load_scenario, scenario_from_dict
from distro_bench.scenario.trace import TraceError, load_trace
from tests.helpers import tiny_scenario_dict

SECRET = "rootpw-s3cr3t-line"


@pytest.fixture(autouse=True)
def _no_opt_in(monkeypatch):
    """The confinement tests mean the default: an opt-in exported in the developer's shell would void them."""
    monkeypatch.delenv("DISTRO_BENCH_ALLOW_TRACE_OUTSIDE", raising=False)


def _validate(cli, path: Path) -> str:
    result = cli("validate", path)
    out = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return out


def _trace_scenario(folder: Path, trace: str, name: str = "scenario.yaml", **link) -> Path:
    d = tiny_scenario_dict(links={"l": {"down": "50Mbit", "up_trace": trace, **link}},
                           workers=[{"count": 2, "link": "l"}])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(yaml.safe_dump(d))
    return folder / name


# ---- 1. optimizer names are folder names --------------------------------------------------------------

@pytest.mark.parametrize("name", ["../../x", "/abs", ".hidden", "a/b", "..", ""])
def test_optimizer_name_that_is_not_one_folder_name_is_refused(cli, write_scenario, name):
    doc = tiny_scenario_dict(optimizers={"adamw": {"lr": 1e-3}, name: {"type": "adamw", "lr": 1e-3}})
    out = _validate(cli, write_scenario(doc))
    assert f"optimizers: invalid optimizer name {name!r}" in out


def test_optimizer_names_with_dots_and_dashes_stay_valid():
    doc = tiny_scenario_dict(optimizers={"adamw": {"lr": 1e-3}, "distro-overlap-lr1.5e-3": {"type": "adamw", "lr": 1e-3}})
    assert "distro-overlap-lr1.5e-3" in scenario_from_dict(doc).optimizers


def test_cli_optimizer_flag_with_a_path_is_refused(cli, write_scenario, tmp_path):
    out_dir = tmp_path / "runs"
    result = cli("run", write_scenario(tiny_scenario_dict()), "--optimizer", "../../x", "--out", out_dir)
    assert result.exit_code == 2, result.output
    assert "invalid optimizer name '../../x'" in " ".join(result.output.split())
    assert not out_dir.exists()  # refused before a run folder was made


# ---- 2. trace paths stay in the scenario's folder, and errors never quote the file -----------------------

def test_trace_outside_the_scenario_folder_is_refused_without_reading_it(cli, tmp_path):
    (tmp_path / "secret").write_text(SECRET + "\n")
    out = _validate(cli, _trace_scenario(tmp_path / "sc", "../secret"))
    assert "links.l.up_trace: '../secret' is outside the scenario's folder" in out
    assert "--allow-trace-outside" in out and SECRET not in out


def test_a_symlink_out_of_the_folder_counts_as_outside(cli, tmp_path):
    (tmp_path / "secret").write_text(SECRET + "\n")
    (tmp_path / "sc").mkdir()
    (tmp_path / "sc" / "t.mahi").symlink_to(tmp_path / "secret")
    out = _validate(cli, _trace_scenario(tmp_path / "sc", "t.mahi"))
    assert "is outside the scenario's folder" in out and SECRET not in out


def test_opt_in_reads_outside_but_still_never_echoes_the_contents(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DISTRO_BENCH_ALLOW_TRACE_OUTSIDE", "0")  # undone after the test, with what the flag sets
    (tmp_path / "secret").write_text(SECRET + "\n")
    path = _trace_scenario(tmp_path / "sc", "../secret")
    result = cli("validate", path, "--allow-trace-outside")
    out = " ".join(result.output.split())
    assert result.exit_code == 2 and "outside the scenario's folder" not in out, out
    assert "line 1: not a whole number of milliseconds" in out and SECRET not in out


@pytest.mark.parametrize("text", [f"0\n5\n{SECRET}\n", f"t_s,rate_bit_s\n0,1\n{SECRET},2\n", f"{SECRET},x\n0,1\n"])
def test_trace_errors_name_the_line_not_its_contents(tmp_path, text):
    p = tmp_path / ("t.csv" if "," in text else "t.mahi")
    p.write_text(text)
    with pytest.raises(TraceError) as e:
        load_trace(p)
    assert "line " in str(e.value) and SECRET not in str(e.value)


# ---- 3. trace reads are bounded ---------------------------------------------------------------------------

def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "t.mahi"
    os.mkfifo(fifo)
    outcome = {}

    def read():
        try:
            load_trace(fifo)
        except TraceError as e:
            outcome["error"] = str(e)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(5)
    if t.is_alive():  # the old reader blocks in open(): give it a writer so the thread ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert not t.is_alive() and "a FIFO, not a regular file" in outcome.get("error", ""), outcome


def test_a_device_is_refused(tmp_path):
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero on this host")
    (tmp_path / "t.mahi").symlink_to("/dev/zero")
    with pytest.raises(TraceError, match="a device, not a regular file"):
        load_trace(tmp_path / "t.mahi")


def test_size_and_entry_caps_are_named(tmp_path, monkeypatch):
    p = tmp_path / "t.mahi"
    p.write_text("".join(f"{i}\n" for i in range(1, 400)))
    monkeypatch.setattr(trace_mod, "MAX_TRACE_BYTES", 1000)
    with pytest.raises(TraceError, match=r"above the cap of 1000 bytes"):
        load_trace(p)
    monkeypatch.setattr(trace_mod, "MAX_TRACE_BYTES", 10**6)
    monkeypatch.setattr(trace_mod, "MAX_TRACE_ENTRIES", 100)
    with pytest.raises(TraceError, match=r"399 entries, above the cap of 100"):
        load_trace(p)


def test_a_huge_period_or_window_count_is_refused_quickly(tmp_path):
    (tmp_path / "a.mahi").write_text("0\n99999999999999\n")
    (tmp_path / "b.csv").write_text("0,1000000\n20000,2000000\n")  # 40000 s period
    t0 = time.monotonic()
    with pytest.raises(TraceError, match="at most 86400 s"):
        load_trace(tmp_path / "a.mahi")
    with pytest.raises(TraceError, match=r"at most 1000000"):
        load_trace(tmp_path / "b.csv").windows(0.01)  # 4e6 windows
    assert time.monotonic() - t0 < 5


def test_csv_windows_are_one_sweep(tmp_path):
    # 2e4 rows and 2e4 windows: the old per-window scan of every row was 4e8 steps (minutes)
    rows = "".join(f"{i * 0.1:.1f},{1_000_000 + (i % 7) * 100_000}\n" for i in range(20_000))
    (tmp_path / "t.csv").write_text("t_s,rate_bit_s\n" + rows)
    t = load_trace(tmp_path / "t.csv")
    t0 = time.monotonic()
    w = t.windows(0.1)
    assert time.monotonic() - t0 < 5
    assert len(w) == 20_000 and w[:8] == [1_000_000 + (i % 7) * 100_000 for i in range(8)]


def test_a_million_entry_schedule_is_refused_by_length(cli, write_scenario):
    entries = [{"at_step": i, "up": "1Mbit" if i % 2 else "2Mbit"} for i in range(10_001)]
    doc = tiny_scenario_dict(links={"l": {"up": "5Mbit", "schedule": entries}}, workers=[{"count": 2, "link": "l"}])
    t0 = time.monotonic()
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(doc)
    assert time.monotonic() - t0 < 10
    assert "links.l.schedule: List should have at most 10000 items" in str(e.value)


# ---- 5. numbers past any sane bound -------------------------------------------------------------------

@pytest.mark.parametrize("doc,fragment", [
    (tiny_scenario_dict(links={"x": {"up": "1e400bit"}}, workers=[{"count": 2, "link": "x"}]),
     "links.x.up: rate '1e400bit' is above the largest accepted, 1Tbit"),
    (tiny_scenario_dict(links={"x": {"delay": "1e400ms"}}, workers=[{"count": 2, "link": "x"}]),
     "links.x.delay: duration '1e400ms' is above the largest accepted"),
    (tiny_scenario_dict(train={"tokens": "1e400"}), "train.tokens: count '1e400' is above the largest accepted"),
    (tiny_scenario_dict(train={"tokens": 1e300}), "train.tokens: count 1e+300 is above the largest accepted"),
    (tiny_scenario_dict(train={"time_budget": "1e400s"}), "train.time_budget: duration '1e400s' is above"),
    (tiny_scenario_dict(train={"steps": 10, "target_val_loss": "1e400"}), "train.target_val_loss: Input should be a finite number"),
    (tiny_scenario_dict(train={"seed": 2**64}), "train.seed: Input should be less than or equal to 4294967295"),
    (tiny_scenario_dict(hardware={"h": {"memory": "1e400GiB"}}, workers=[{"count": 2, "hardware": "h"}]),
     "hardware.h.memory: size '1e400GiB' is above the largest accepted, 1PiB"),
    (tiny_scenario_dict(hardware={"h": {"tflops": "1e400"}}, workers=[{"count": 2, "hardware": "h"}]),
     "hardware.h.tflops: Input should be a finite number"),
    (tiny_scenario_dict(optimizers={"adamw": {"lr": 1e-3, "weight_decay": "1e400"}}),
     "optimizers.adamw.weight_decay: Input should be a finite number"),
])
def test_huge_numbers_are_refused_at_validation(cli, write_scenario, doc, fragment):
    assert fragment in _validate(cli, write_scenario(doc))


# ---- 6. model sizes: bounded, and counted without building ----------------------------------------------

@pytest.mark.parametrize("field,value", [("n_layers", 10**9), ("dim", 10**6), ("ffn_dim", 10**7),
                                         ("vocab_size", 10**8), ("n_heads", 10**4), ("max_seq_len", 10**7)])
def test_model_fields_are_bounded(cli, write_scenario, field, value):
    model = {"dim": 128, "n_layers": 2, "n_heads": 4, "ffn_dim": 384, field: value}
    t0 = time.monotonic()
    out = _validate(cli, write_scenario(tiny_scenario_dict(model=model)))
    assert f"model.{field}: Input should be less than or equal to" in out
    assert time.monotonic() - t0 < 10


def test_published_shapes_still_validate():
    assert scenario_from_dict(tiny_scenario_dict(model={"preset": "llama-1.2b"})).resolved_model()["dim"] == 2048
    llama70b = {"dim": 8192, "n_layers": 80, "n_heads": 64, "ffn_dim": 28672, "vocab_size": 128256}
    assert scenario_from_dict(tiny_scenario_dict(model=llama70b)).resolved_model()["n_layers"] == 80


@pytest.mark.parametrize("cfg", [
    {"dim": 128, "n_layers": 2, "n_heads": 4, "ffn_dim": 384},  # tiny
    {"dim": 512, "n_layers": 8, "n_heads": 8, "ffn_dim": 1536, "max_seq_len": 1024},  # base
    {"dim": 96, "n_layers": 3, "n_heads": 3, "ffn_dim": 250, "vocab_size": 257},  # odd sizes
    {"dim": 2048, "n_layers": 16, "n_heads": 8, "ffn_dim": 8192, "vocab_size": 32000, "max_seq_len": 2048},
])
def test_parameter_count_on_meta_equals_the_built_models(cfg):
    """The count read from the model on the meta device (no weights) is the real model's, whatever the size."""
    from distro_bench.train.models import build, parameter_count

    model = {**cfg, "vocab_size": cfg.get("vocab_size", 256)}
    if cfg["dim"] > 1024:  # 1.2B: the closed form of Llama's blocks, untied embedding and output, final norm
        d, f, v = cfg["dim"], cfg["ffn_dim"], model["vocab_size"]
        assert parameter_count(model) == 2 * v * d + cfg["n_layers"] * (2 * d + 4 * d * d + 3 * d * f) + d
        return
    assert parameter_count(model) == sum(p.numel() for p in build(model, seed=0).parameters())


def test_collective_timeout_allocates_no_weights(monkeypatch):
    import distro_bench.train.models
    from distro_bench.run.runner import collective_timeout_s

    def refuse(*a, **k):
        raise AssertionError("built the model's weights to size a timeout")

    monkeypatch.setattr(distro_bench.train.models, "build", refuse)
    d = tiny_scenario_dict(links={"x": {"up": "1Mbit"}}, workers=[{"count": 2, "link": "x"}],
                           model={"preset": "llama-1.2b"})
    s = scenario_from_dict(d)
    params = 2 * 2048 * 32000 + 16 * (2 * 2048 + 4 * 2048**2 + 3 * 2048 * 8192) + 2048
    assert collective_timeout_s(s) == pytest.approx(120.0 + 4 * 2 * params * 4 * 8 / 1e6)


# ---- 7. traces on the local backend ------------------------------------------------------------------------

def test_local_backend_refuses_a_trace_unless_unemulated_is_allowed(tmp_path):
    from distro_bench.run.preflight import Needs, problems
    from tests.unit.run.test_preflight import HOST

    (tmp_path / "t.csv").write_text("0,1000000\n1,2000000\n")
    s = load_scenario(_trace_scenario(tmp_path, "t.csv"))
    found = problems(HOST, "local", Needs.of(s))
    assert [p.what for p in found] == ["shaped links (the netns or docker backend)"]
    assert "link 'l'" in found[0].needed_for and "--backend netns" in found[0].fix
    assert problems(HOST, "local", Needs.of(s), allow_unemulated=True) == []
    assert problems(HOST, "netns", Needs.of(s)) == []


def test_scheduler_without_emulation_ignores_traces_instead_of_crashing(tmp_path):
    from distro_bench.net.netchange import ChangeScheduler
    from distro_bench.scenario.timeline import compile_timeline

    (tmp_path / "t.csv").write_text("0,1000000\n0.05,2000000\n")
    s = load_scenario(_trace_scenario(tmp_path, "t.csv", trace_resolution="10ms"))
    (tmp_path / "rank0.hb").write_text(f"0 compute {time.time()}")
    sched = ChangeScheduler(compile_timeline(s), None, tmp_path, "adamw", 0)
    sched.start()
    time.sleep(0.3)  # several polls and trace windows
    sched.stop()
    assert sched.failure is None


# ---- 8. two traces of one name --------------------------------------------------------------------------

def test_traces_with_one_basename_get_a_copy_each_and_the_run_follows_the_copies(tmp_path):
    from distro_bench.scenario.loading import dump_for_run
    from distro_bench.scenario.timeline import compile_timeline

    for sub, rate in (("a", 1_000_000), ("b", 9_000_000)):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "x.csv").write_text(f"0,{rate}\n1,{rate}\n")
    d = tiny_scenario_dict(links={"one": {"up_trace": "a/x.csv"}, "two": {"down_trace": "b/x.csv"}},
                           workers=[{"count": 1, "link": "one"}, {"count": 1, "link": "two"}])
    s = scenario_from_dict(d, base_dir=tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    text, follows = dump_for_run(s, run_dir)
    assert follows and len(list((run_dir / "traces").iterdir())) == 2
    again = scenario_from_dict(yaml.safe_load(text), base_dir=run_dir)
    rates = {(t.node, t.direction): load_trace(t.path).windows(1.0)[0] for t in compile_timeline(again).traces}
    assert rates == {("node0", "up"): 1_000_000, ("node1", "down"): 9_000_000}
    assert all(t.path.is_relative_to(run_dir.resolve()) for t in compile_timeline(again).traces)


# ---- 15. duplicate YAML keys ----------------------------------------------------------------------------

@pytest.mark.parametrize("text,fragment", [
    ("name: t\nworkers: [{count: 1}]\noptimizers:\n  adamw: {lr: 1e-3}\noptimizers:\n  distro: {}\n",
     "line 5, column 1: not valid YAML (duplicate key 'optimizers' (first given on line 3))"),
    ("name: t\nworkers: [{count: 1}]\nlinks:\n  x: {up: 1Mbit, up: 2Mbit}\noptimizers: {adamw: {}}\n",
     "line 4, column 18: not valid YAML (duplicate key 'up' (first given on line 4))"),
])
def test_duplicate_keys_are_refused_with_their_location(cli, write_scenario, text, fragment):
    assert fragment in _validate(cli, write_scenario(text))


def test_yaml_merge_keys_still_override():
    from distro_bench.scenario.loading import UniqueKeyLoader

    doc = yaml.load("base: &b {lr: 1, wd: 2}\nx: {<<: *b, lr: 3}\n", Loader=UniqueKeyLoader)
    assert doc["x"] == {"lr": 3, "wd": 2}
    assert not math.isnan(doc["x"]["lr"])
