"""What a run leaves when it is killed or fails early, and what `clean` makes of it (issue 39, item 11): a run
that fails while opening its folder leaves nothing; delay-line folders of a killed coordinator go; SIGTERMs
after the first do not stop the run from writing how it ended; `clean --force` is named in the status."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from distro_bench.errors import HarnessError
from distro_bench.net import cleanup, owner
from distro_bench.run import lifecycle
from distro_bench.run.lifecycle import RunLifecycle
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import tiny_scenario_dict


@pytest.fixture
def claims(tmp_path, monkeypatch):
    d = tmp_path / "claims"
    d.mkdir()
    monkeypatch.setattr("distro_bench.net.owner.runtime_dir", lambda: d)
    return d


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_a_run_failing_while_opening_its_folder_leaves_no_claim_and_no_folder(tmp_path, claims, monkeypatch):
    def broken(scenario, run_dir):
        (run_dir / "traces").mkdir()  # part of the copy made, then the failure
        raise HarnessError("trace t.csv changed while it was read (injected)")

    monkeypatch.setattr(lifecycle, "dump_for_run", broken)
    life = RunLifecycle(scenario_from_dict(tiny_scenario_dict()), "local")
    out = tmp_path / "out"
    with pytest.raises(HarnessError, match="injected"):
        life.open(out)
    assert list(out.iterdir()) == []  # no folder without status.json
    assert list(claims.iterdir()) == []  # and no owner file for `clean` to puzzle over


def test_clean_removes_the_delay_line_folders_of_a_killed_coordinator(tmp_path):
    dead, live, unowned_old, unowned_new = (tmp_path / f"{cleanup.DELAYLINE_PREFIX}{x}" for x in ("a", "b", "c", "d"))
    for d in (dead, live, unowned_old, unowned_new):
        d.mkdir()
        (d / "stats.json").write_text("{}")
    owner.stamp(live)  # this process: alive
    (dead / owner.OWNER_FILE).write_text(json.dumps({**owner.record(), "pid": str(_dead_pid())}))
    old = time.time() - cleanup.UNOWNED_GRACE_S - 10
    os.utime(unowned_old, (old, old))  # an older harness's folder, no process names it
    removed, problems = cleanup.remove_delayline_dirs(tmp_path)
    assert problems == []
    assert sorted(removed) == sorted(f"delay-line folder {d}" for d in (dead, unowned_old))
    assert not dead.exists() and not unowned_old.exists() and live.exists() and unowned_new.exists()


def test_the_delay_line_stamps_its_folder_with_its_owner():
    import inspect

    from distro_bench.net.delayline import controller

    # The folder is made in DelayLine.start (root, namespaces): the stamp right after mkdtemp is what clean reads.
    src = inspect.getsource(controller.DelayLine.start)
    assert src.index("owner.stamp(self._tmpdir)") > src.index('mkdtemp(prefix="dbench-delayline-")')


# In a process of its own: where later SIGTERMs are not caught (the old behaviour) they kill it.
SIGTERMS = """
import json, os, signal, sys, time
from pathlib import Path
from distro_bench.net import owner
owner.runtime_dir = lambda: Path(sys.argv[1])
from distro_bench.run import lifecycle
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import tiny_scenario_dict
life = lifecycle.RunLifecycle(scenario_from_dict(tiny_scenario_dict()), "local")
life.open(Path(sys.argv[2]))
previous = signal.getsignal(signal.SIGTERM)
try:
    with life.guard():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises here
except lifecycle.Interrupted:
    pass
# A supervisor repeats its TERM while the run tears down and writes how it ended: ignored until finish() is done.
os.kill(os.getpid(), signal.SIGTERM)
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.1)
life.finish(write_report=False)
restored = signal.getsignal(signal.SIGTERM) is previous
with lifecycle.sigterm_as_interrupt():  # without a lifecycle: restored at the end of the block, as before
    pass
print(json.dumps({"sigterms": life.sigterms, "restored": restored and signal.getsignal(signal.SIGTERM) is previous,
                  "status": json.loads((life.run_dir / "status.json").read_text())}))
"""


@pytest.mark.slow
def test_sigterms_after_the_first_do_not_stop_the_finish(tmp_path, claims):
    import sys

    from tests.helpers import REPO

    p = subprocess.run([sys.executable, "-c", SIGTERMS, str(claims), str(tmp_path / "out")], capture_output=True,
                       text=True, timeout=300, cwd=REPO)
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])  # -15: killed by the second SIGTERM
    r = json.loads(p.stdout.splitlines()[-1])
    assert r["sigterms"] == 3 and r["restored"], r
    assert r["status"]["state"] == "incomplete" and "SIGTERM" in r["status"]["reason"], r


def test_the_status_says_clean_force_ended_the_run(tmp_path, claims):
    life = RunLifecycle(scenario_from_dict(tiny_scenario_dict()), "local")
    life.open(tmp_path / "out")
    # What `clean --force` does to a live run's namespaces (NetnsBackend.clean_leftovers) or containers.
    owner.mark_ended_by_clean(owner.record(), "namespace dbench-x1-n0")
    owner.mark_ended_by_clean(owner.record(), "namespace dbench-x1-sw")
    life.state, life.reason = "failed", "adamw: worker rank 0 (node0) exited with code -9"
    life.finish(write_report=False)
    status = json.loads((life.run_dir / "status.json").read_text())
    assert status["state"] == "failed"
    assert status["reason"].startswith("ended by `distro-bench clean --force`, which removed namespace dbench-x1-n0, "
                                       "namespace dbench-x1-sw"), status
    assert "exited with code -9" in status["reason"]
    assert list(claims.glob("ended-*")) == []  # read once


def test_finish_gives_what_nobody_wrote_back_to_the_coordinators_user(tmp_path):
    from distro_bench.backends.base import WORKER_UID
    from distro_bench.run.lifecycle import reclaim_worker_files

    if os.geteuid() != 0:
        pytest.skip("needs root to give files to another uid")
    out = tmp_path / "workers" / "adamw"
    out.mkdir(parents=True)
    (out / "rank0.jsonl").write_text("{}\n")
    (out / "link").symlink_to("/etc/hostname")  # a worker's link: its own ownership changes, never the target's
    for p in (out, out / "rank0.jsonl"):
        os.chown(p, WORKER_UID, WORKER_UID)
    os.lchown(out / "link", WORKER_UID, WORKER_UID)
    reclaim_worker_files(tmp_path)
    assert {p.name: p.lstat().st_uid for p in (out, out / "rank0.jsonl", out / "link")} == {
        "adamw": 0, "rank0.jsonl": 0, "link": 0}
    assert os.stat("/etc/hostname").st_uid == 0
