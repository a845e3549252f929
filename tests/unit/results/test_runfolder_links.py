"""Issue 39, items 1 and 3: `report`, `check` and `export` neither write nor read through a link they did not
make, read regular files only (capped), validate what they read with the run's own models, and refuse a
forged run folder with exit 2 naming the file, never echoing its contents, never hanging."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
import yaml

from distro_bench import api
from distro_bench.results import runfiles
from tests.unit.runfolders import make_run

SECRET = "rootpw-s3cr3t-line"


@pytest.fixture
def run(tmp_path) -> Path:
    return make_run(tmp_path, "run", seeds=1, steps=6)


@pytest.fixture
def secret(tmp_path) -> Path:
    p = tmp_path / "secret.txt"
    p.write_text(f"{SECRET}: not yaml [\n{SECRET}\n")
    return p


def _refused(result, *names: str) -> str:
    """The CLI refused the folder: exit 2, one line naming each of `names`, no traceback."""
    out = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "internal error" not in out, result.output
    for n in names:
        assert n in out, out
    return out


def _within(seconds: float, fn):
    """fn() in a thread; fails if it is still running after `seconds` (a FIFO or /dev/zero read hangs)."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # handed back to the test
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


# ---- item 1: writes ---------------------------------------------------------------------------------------

def test_report_does_not_overwrite_the_target_of_a_linked_plot(cli, run, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (run / "plots").mkdir()
    (run / "plots" / "loss_vs_step.png").symlink_to(victim)
    _refused(cli("report", run), "plots/loss_vs_step.png", "symbolic link")
    assert victim.read_text() == "keep me\n"
    assert not (run / "report.md").exists()


def test_report_does_not_write_into_a_linked_plots_folder(cli, run, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "plots").symlink_to(elsewhere, target_is_directory=True)
    _refused(cli("report", run), f"{run / 'plots'}", "symbolic link")
    assert list(elsewhere.iterdir()) == []


def test_report_out_folder_with_a_linked_report_md_is_refused_before_writing(cli, run, tmp_path):
    out, victim = tmp_path / "out", tmp_path / "victim.md"
    out.mkdir()
    victim.write_text("keep me\n")
    (out / "report.md").symlink_to(victim)
    _refused(cli("report", run, "--out", out), "report.md", "symbolic link")
    assert victim.read_text() == "keep me\n"
    assert not (out / "plots").exists()


def test_a_linked_target_is_replaced_never_written_through(tmp_path):
    """The helper itself: a link at the target or on the way is refused; a plain write lands."""
    from distro_bench.results.rundir import atomic_write_text

    victim = tmp_path / "victim"
    victim.write_text("keep")
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f").symlink_to(victim)
    with pytest.raises(runfiles.RunFileError, match="symbolic link"):
        atomic_write_text(root / "sub" / "f", "x", root=root)
    (root / "dir").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(runfiles.RunFileError, match="symbolic link"):
        atomic_write_text(root / "dir" / "victim", "x", root=root)
    assert victim.read_text() == "keep"
    atomic_write_text(root / "new" / "g", "ok", root=root)
    assert (root / "new" / "g").read_text() == "ok"
    assert sorted(p.name for p in (root / "new").iterdir()) == ["g"]  # no temp file left


# ---- item 3: reads ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["report", "check"])
def test_linked_scenario_is_refused_without_echoing_the_secret(cli, run, secret, command):
    (run / "scenario.yaml").unlink()
    (run / "scenario.yaml").symlink_to(secret)
    out = _refused(cli(command, run), "scenario.yaml", "symbolic link")
    assert SECRET not in out


def test_scenario_yaml_error_names_the_line_not_its_text(cli, run):
    (run / "scenario.yaml").write_text(f"name: x\n{SECRET}: a: b\n")  # PyYAML's message quotes this line
    out = _refused(cli("check", run), "scenario.yaml", "line")
    assert SECRET not in out


def test_export_does_not_copy_a_linked_report(cli, run, secret, tmp_path):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    (run / "report.md").symlink_to(secret)
    dest = tmp_path / "tb"
    _refused(cli("export", run, "--to", "tensorboard", "--dest", dest), "report.md", "symbolic link")
    for f in dest.rglob("*") if dest.exists() else []:
        assert not f.is_file() or SECRET.encode() not in f.read_bytes()


def test_summary_linked_to_dev_zero_is_refused_at_once(cli, run):
    (run / "summary.json").unlink()
    (run / "summary.json").symlink_to("/dev/zero")
    _refused(_within(60, lambda: cli("check", run)), "summary.json")


def test_rank_records_linked_to_dev_zero_are_refused(cli, run):
    """The report of a folder without summary.json rebuilds from workers/*/rank*.jsonl: not from /dev/zero."""
    (run / "summary.json").unlink()
    rank = run / "workers" / "adamw" / "rank0.jsonl"
    rank.unlink()
    rank.symlink_to("/dev/zero")
    _refused(_within(60, lambda: cli("check", run)), "rank0.jsonl")


@pytest.mark.parametrize("command", ["report", "check"])
def test_summary_as_a_fifo_does_not_hang(cli, run, command):
    (run / "summary.json").unlink()
    os.mkfifo(run / "summary.json")
    _refused(_within(60, lambda: cli(command, run)), "summary.json", "FIFO")


def test_a_summary_above_its_cap_is_refused_unread(cli, run):
    with open(run / "summary.json", "r+b") as f:  # sparse: 8 GiB on paper, nothing on disk
        f.truncate(8 * 2**30)
    _refused(_within(60, lambda: cli("check", run)), "summary.json", "cap")


def _edit_scenario(run: Path, **changes) -> None:
    s = yaml.safe_load((run / "scenario.yaml").read_text())
    s["workers"][0].update(changes)
    (run / "scenario.yaml").write_text(yaml.safe_dump(s))


@pytest.mark.parametrize("count", [1_000_000_000_000, "many"])
def test_absurd_worker_count_in_a_stored_scenario_is_refused(cli, run, count):
    _edit_scenario(run, count=count)
    _refused(_within(60, lambda: cli("report", run)), "scenario.yaml", "workers.0.count")


@pytest.mark.parametrize("value", ['"abc"', "NaN", "Infinity", "-Infinity", "1e999"])
def test_bad_summary_values_are_refused(cli, run, value):
    text = (run / "summary.json").read_text()
    key = '"schema_version": 1' if value == '"abc"' else '"final_loss": '
    assert key in text
    if value == '"abc"':
        text = text.replace(key, '"schema_version": "abc"')
    else:  # every optimizer's final loss
        text = "\n".join(ln.split(key)[0] + key + value + ("," if ln.rstrip().endswith(",") else "")
                         if key in ln else ln for ln in text.splitlines())
    (run / "summary.json").write_text(text)
    out = _refused(cli("check", run), "summary.json")
    assert "schema_version" in out if value == '"abc"' else True


def test_the_readers_refuse_what_is_not_a_regular_file(tmp_path):
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "summary.json")
    with pytest.raises(runfiles.RunFileError, match="FIFO"):
        _within(10, lambda: runfiles.read_bytes(tmp_path / "fifo", "summary.json"))
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "summary.json").mkdir()
    with pytest.raises(runfiles.RunFileError, match="folder"):
        runfiles.read_bytes(tmp_path / "d", "summary.json")
    (tmp_path / "n").mkdir()
    (tmp_path / "n" / "summary.json").write_text('{"a": ' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(runfiles.RunFileError, match="nested too deeply"):
        runfiles.read_json(tmp_path / "n", "summary.json")
    (tmp_path / "n" / "summary.json").write_text(json.dumps({"a": 1}).replace("1", "9" * 5000))
    with pytest.raises(runfiles.RunFileError, match=r"summary\.json"):
        runfiles.read_json(tmp_path / "n", "summary.json")


def test_a_clean_folder_still_reports_checks_and_exports(cli, run, tmp_path):
    """The refusals above refuse forged folders only: the same folder untouched goes through."""
    assert cli("report", run).exit_code == 0
    assert cli("check", run).exit_code in (0, 1)
    assert api.load_run(run).scenario["workers"][0]["count"] == 2


def test_compare_does_not_write_into_a_linked_plots_folder(cli, tmp_path):
    a, b = make_run(tmp_path, "a", seeds=1, steps=6), make_run(tmp_path, "b", seeds=1, steps=6)
    out, elsewhere = tmp_path / "cmp", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "plots").symlink_to(elsewhere, target_is_directory=True)
    _refused(cli("report", a, b, "--out", out), f"{out / 'plots'}", "symbolic link")
    assert list(elsewhere.iterdir()) == []
    assert not (out / "report.md").exists()
