"""No silent uid 0 (issue 51, item 2): where the run's own uid cannot read what a worker needs (here a corpus
only root may read), `distro-bench run` stops before training with the reason and the fix (exit 2, no worker
record); with --allow-root-workers it trains as uid 0 and says so in environment.json and summary.json. Where
it can (the usual case, even with root's Python under a 0700 home), the workers run as the run's own uid."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from distro_bench.backends.base import DYNAMIC_UIDS
from tests.helpers import tiny_scenario_dict

pytestmark = pytest.mark.root


@pytest.fixture
def root():
    if os.geteuid() != 0:
        pytest.skip("needs root: the point is a root coordinator's workers")


def _scenario(tmp_path: Path, corpus_mode: int) -> Path:
    d = tiny_scenario_dict(train={"steps": 2, "eval_every": 2, "seed": 0})
    d["optimizers"] = {"adamw": d["optimizers"]["adamw"]}
    d["baseline"] = "adamw"
    (tmp_path / "corpus.txt").write_text("def f(x):\n    return x + 1\n" * 400)
    (tmp_path / "corpus.txt").chmod(corpus_mode)
    d["data"] = {**d["data"], "corpus": "corpus.txt"}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def _folder(out: Path) -> Path:
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    return folder


def test_an_unreachable_corpus_stops_the_run_before_training(root, tmp_path, cli):
    scen = _scenario(tmp_path, 0o600)
    r = cli("run", scen, "--backend", "local", "--out", tmp_path / "out")
    assert r.exit_code == 2, r.output
    assert "cannot run as an unprivileged uid" in r.output and "--allow-root-workers" in r.output, r.output
    assert "corpus.txt" in r.output, r.output
    folder = _folder(tmp_path / "out")
    assert not list(folder.glob("workers/**/rank*.jsonl"))  # nothing trained
    assert json.loads((folder / "status.json").read_text())["state"] == "failed"


@pytest.mark.slow
def test_allow_root_workers_trains_as_uid_0_and_records_it(root, tmp_path, cli):
    scen = _scenario(tmp_path, 0o600)
    r = cli("run", scen, "--backend", "local", "--out", tmp_path / "out", "--allow-root-workers")
    assert r.exit_code in (0, 1), r.output
    folder = _folder(tmp_path / "out")
    env = json.loads((folder / "environment.json").read_text())
    assert env["workers_user"]["uid"] == 0 and env["workers_user"]["root_accepted"] is True, env["workers_user"]
    assert json.loads((folder / "summary.json").read_text())["run"]["root_workers"] is True


@pytest.mark.slow
def test_a_readable_corpus_runs_as_the_runs_own_uid(root, tmp_path, cli):
    scen = _scenario(tmp_path, 0o644)  # under pytest's 0700 folders: exposed to the worker alone
    r = cli("run", scen, "--backend", "local", "--out", tmp_path / "out")
    assert r.exit_code in (0, 1), r.output
    folder = _folder(tmp_path / "out")
    who = json.loads((folder / "environment.json").read_text())["workers_user"]
    assert who["uid"] in DYNAMIC_UIDS and who["root_accepted"] is False, who
    assert json.loads((folder / "summary.json").read_text())["run"]["root_workers"] is False
    # The finished folder is one owner's again.
    assert {p.stat().st_uid for p in folder.rglob("*") if not p.is_symlink()} == {0}
