"""Runtime faults of the run folder (issue 26): a full disk, file modes, a bad --out."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from distro_bench.errors import RunFolderWriteError
from distro_bench.results.rundir import atomic_write_json, atomic_write_parquet, atomic_write_text, write_status
from distro_bench.run.lifecycle import finalize
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import tiny_scenario_dict

WORKER_FAILURE = "adamw: worker rank 1 (node-1) exited with code -9"


@pytest.fixture
def umask():
    def set_(mask: int) -> None:
        os.umask(mask)

    old = os.umask(0o022)
    yield set_
    os.umask(old)


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_run_folder_files_get_the_mode_of_a_plainly_created_file(tmp_path, umask, mask, mode):
    # After `sudo distro-bench run` the user must be able to read report.md: 0600 (mkstemp's) hid it.
    umask(mask)
    atomic_write_text(tmp_path / "report.md", "# r\n")
    atomic_write_json(tmp_path / "summary.json", {"a": 1})
    atomic_write_parquet(tmp_path / "metrics.parquet", pd.DataFrame({"x": [1, 2]}))
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert plain.stat().st_mode & 0o777 == mode
    for name in ("report.md", "summary.json", "metrics.parquet"):
        assert (tmp_path / name).stat().st_mode & 0o777 == mode, name


def _run_dir(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    (d / "workers").mkdir(parents=True)
    write_status(d, "running", None)
    return d


def test_disk_full_at_the_parquet_keeps_the_worker_failure_and_ends_the_status(tmp_path, monkeypatch):
    d = _run_dir(tmp_path)

    def full(self, path, *a, **k):
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", full)
    with pytest.raises(RunFolderWriteError) as e:
        finalize(d, scenario_from_dict(tiny_scenario_dict()), "local", "failed", WORKER_FAILURE, "t0")
    msg = str(e.value)
    assert msg.startswith(f"no space left on device writing {d / 'metrics.parquet'}"), msg
    assert WORKER_FAILURE in msg
    status = json.loads((d / "status.json").read_text())
    assert status == {"state": "failed", "reason": msg}
    assert not [p for p in d.iterdir() if p.name.startswith(".")], "a temporary file was left behind"


def test_disk_full_after_a_complete_run_says_the_results_were_not_stored(tmp_path, monkeypatch):
    d = _run_dir(tmp_path)
    from distro_bench.results import runfiles

    real = runfiles.os.open

    def refuse_summary(name, flags, *a, **k):  # the temporary file summary.json is written to, beside it
        if str(name).startswith(".summary.json.") and flags & os.O_CREAT:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(name, flags, *a, **k)

    monkeypatch.setattr(runfiles.os, "open", refuse_summary)
    with pytest.raises(RunFolderWriteError, match=r"no space left on device writing .*summary\.json.*training completed"):
        finalize(d, scenario_from_dict(tiny_scenario_dict()), "local", "complete", None, "t0")
    assert json.loads((d / "status.json").read_text())["state"] == "failed"


def _can_mount_tmpfs() -> str | None:
    if os.geteuid() != 0:
        return "mounting a small tmpfs needs root"
    if not shutil.which("mount"):
        return "no mount binary"
    return None


def test_a_really_full_tmpfs_still_gets_its_status_written(tmp_path):
    if why := _can_mount_tmpfs():
        pytest.skip(why)
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        d = _run_dir(mnt)
        with open(mnt / "filler", "wb", buffering=0) as f:  # every block taken: a new status.json could not be created
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError as e:
                assert e.errno == errno.ENOSPC
        with pytest.raises(RunFolderWriteError, match="no space left on device writing") as e:
            finalize(d, scenario_from_dict(tiny_scenario_dict()), "local", "failed", WORKER_FAILURE, "t0")
        status = json.loads((d / "status.json").read_text())
        assert status["state"] == "failed" and WORKER_FAILURE in status["reason"], status
        assert str(e.value) == status["reason"]
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def _cli_run_into(tmp_path, out: str):
    import yaml
    from typer.testing import CliRunner

    from distro_bench.cli import app

    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(tiny_scenario_dict()))
    return CliRunner().invoke(app, ["run", str(scenario), "--backend", "local", "--out", out])


def test_out_that_is_a_regular_file_is_an_input_error(tmp_path):
    f = tmp_path / "results"
    f.write_text("not a folder")
    r = _cli_run_into(tmp_path, str(f))
    assert r.exit_code == 2, r.output
    assert f"--out {f}" in r.output and "is a file, not a folder" in r.output
    assert "internal error" not in r.output and "Traceback" not in r.output


def test_out_below_a_regular_file_names_the_file(tmp_path):
    f = tmp_path / "results"
    f.write_text("x")
    r = _cli_run_into(tmp_path, str(f / "sub"))
    assert r.exit_code == 2, r.output
    assert f"{f} is a file, not a folder" in r.output


def test_out_in_proc_is_an_input_error(tmp_path):
    r = _cli_run_into(tmp_path, "/proc")
    assert r.exit_code == 2, r.output
    assert "--out /proc: cannot create a run folder there (" in r.output
    assert "internal error" not in r.output


def test_out_on_a_read_only_mount_is_an_input_error(tmp_path):
    if why := _can_mount_tmpfs():
        pytest.skip(why)
    mnt = tmp_path / "ro"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {r.stderr.strip()}")
    try:
        res = _cli_run_into(tmp_path, str(mnt))
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
    assert res.exit_code == 2, res.output
    assert f"--out {mnt}: cannot create a run folder there (read-only file system)" in res.output


def test_clean_marks_a_killed_runs_running_status(tmp_path, monkeypatch):
    # A SIGKILLed CLI has no teardown: its folder said "running" forever. Its claim names the folder.
    from typer.testing import CliRunner

    from distro_bench.backends.netns import NetnsBackend
    from distro_bench.cli import app

    claims = tmp_path / "claims"
    claims.mkdir()
    monkeypatch.setattr("distro_bench.net.owner.runtime_dir", lambda: claims)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    monkeypatch.setattr(NetnsBackend, "clean_leftovers", classmethod(lambda cls, include_live=False: ([], [])))
    dead, live = _run_dir(tmp_path / "a"), _run_dir(tmp_path / "b")
    gone = subprocess.Popen(["true"])
    gone.wait()
    (claims / "aaa111.owner").write_text(f"{gone.pid} 1\n{dead}\n")
    from distro_bench.net import owner

    owner.claim("bbb222", live)  # this process: alive
    r = CliRunner().invoke(app, ["clean"])
    assert r.exit_code == 0, r.output
    assert f"stale 'running' status of {dead}" in r.output.replace("\n", "")
    status = json.loads((dead / "status.json").read_text())
    assert status["state"] == "failed" and f"(pid {gone.pid})" in status["reason"]
    assert json.loads((live / "status.json").read_text())["state"] == "running"
    assert not (claims / "aaa111.owner").exists() and (claims / "bbb222.owner").exists()


@pytest.mark.parametrize("args", [["report", "RUN"], ["project", "scenarios/ci-smoke.yaml"]], ids=["report", "project"])
def test_report_and_project_out_that_is_a_file_is_an_input_error(tmp_path, args):
    from typer.testing import CliRunner

    from distro_bench.cli import app
    from tests.unit.runfolders import make_run

    run = make_run(tmp_path, seeds=1, steps=4)
    f = tmp_path / "afile"
    f.write_text("x")
    argv = [str(run) if a == "RUN" else str(Path(__file__).resolve().parents[3] / a) if a.endswith(".yaml") else a
            for a in args]
    r = CliRunner().invoke(app, [*argv, "--out", str(f)])
    assert r.exit_code == 2, r.output
    assert f"--out {f}: cannot write" in r.output and "is a file, not a folder" in r.output.replace("\n", "")
    assert "internal error" not in r.output


def test_a_worker_failure_on_a_full_disk_reports_both_through_the_cli(tmp_path, monkeypatch):
    # The whole path: run_scenario's finally hits ENOSPC while a WorkerFailed propagates. It was "internal
    # error: OSError" with the worker failure lost and status.json left "running".
    import yaml
    from typer.testing import CliRunner

    from distro_bench.cli import app
    from distro_bench.errors import WorkerFailed
    from distro_bench.run import runner

    def failing_worker(*a, **k):
        raise WorkerFailed(WORKER_FAILURE, rank=1, log_tail="RuntimeError: boom")

    def full(self, path, *a, **k):
        raise OSError(errno.ENOSPC, "Error writing bytes to file")

    monkeypatch.setattr(runner, "_train_one", failing_worker)
    monkeypatch.setattr(pd.DataFrame, "to_parquet", full)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(tiny_scenario_dict()))
    r = CliRunner().invoke(app, ["run", str(scenario), "--backend", "local", "--out", str(tmp_path / "out"),
                                 "--no-measure-links"])
    out = r.output.replace("\n", " ")
    assert r.exit_code == 1, r.output
    assert "internal error" not in out and "no space left on device writing" in out and WORKER_FAILURE in out, out
    assert "RuntimeError: boom" in out  # the worker's log tail still shown
    (d,) = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]  # beside it: index.parquet
    status = json.loads((d / "status.json").read_text())
    assert status["state"] == "failed" and WORKER_FAILURE in status["reason"]
