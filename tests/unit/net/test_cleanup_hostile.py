"""Issue 51 item 5 "Must show": `clean` trusts nothing it scans in /tmp, which any local user writes.

A FIFO at /tmp/dbench-delayline-x/owner.json hung the scan forever; a link there to /dev/zero was read without
limit; a folder name with escape sequences was printed raw to root's terminal. Now each is read no-follow,
non-blocking and capped (results/runfiles.py), skipped and named with its name escaped; `clean` finishes.
The folders are made in the real /tmp (where `clean` looks), under names of this test's own; the namespace and
container cleaners are scoped to nothing, so other runs on this machine are left alone.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import threading
import time
from pathlib import Path

import pytest

from distro_bench.backends.docker import DockerBackend
from distro_bench.net import cleanup, owner

LIMIT_S = 30.0


@pytest.fixture
def hostile_tmp():
    tag = secrets.token_hex(4)
    made = {kind: Path(f"/tmp/{cleanup.DELAYLINE_PREFIX}sec51-{kind}-{tag}") for kind in ("fifo", "zero", "big")}
    escape_dir = Path(f"/tmp/{cleanup.DELAYLINE_PREFIX}sec51-\x1b]0;pwned\x07\x1b[2J\u202e-{tag}")
    for d in (*made.values(), escape_dir):
        d.mkdir()
    os.mkfifo(made["fifo"] / owner.OWNER_FILE)
    (made["zero"] / owner.OWNER_FILE).symlink_to("/dev/zero")
    with (made["big"] / owner.OWNER_FILE).open("wb") as f:
        f.truncate(512 * 2**20)  # sparse: a huge file that costs no disk
    os.mkfifo(escape_dir / owner.OWNER_FILE)
    yield {**made, "escape": escape_dir}
    for d in (*made.values(), escape_dir):
        shutil.rmtree(d, ignore_errors=True)


def test_clean_with_a_fifo_a_dev_zero_link_and_a_huge_claim_in_tmp_finishes(cli, hostile_tmp, monkeypatch):
    monkeypatch.setattr(cleanup, "list_namespaces", lambda run_id=None: [])
    monkeypatch.setattr(DockerBackend, "clean_leftovers", classmethod(lambda cls, include_live=False: ([], [])))
    box: dict = {}
    t = threading.Thread(target=lambda: box.update(result=cli("clean")), daemon=True)
    started = time.monotonic()
    t.start()
    t.join(LIMIT_S)
    assert not t.is_alive(), f"clean still scanning after {LIMIT_S}s"
    took = time.monotonic() - started
    print(f"clean finished in {took:.2f}s")
    result = box["result"]
    out = result.output
    assert result.exit_code == 1, out  # hostile entries are problems: named, kept, exit 1
    for kind, why in (("fifo", "a FIFO"), ("zero", "symbolic link"), ("big", "above the cap")):
        assert f"sec51-{kind}-" in out and why in out, (kind, out)
        assert hostile_tmp[kind].is_dir()  # skipped, not removed: not ours to judge
    assert "sec51-\\x1b]0;pwned\\x07\\x1b[2J\\u202e-" in out.replace("\n", "")
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out


def test_a_stale_folder_of_ours_is_still_removed_beside_hostile_ones(hostile_tmp, tmp_path):
    # The skip is per folder: a dead owner's folder next to the hostile ones goes as before.
    for kind in ("fifo", "zero"):
        d = tmp_path / hostile_tmp[kind].name
        shutil.copytree(hostile_tmp[kind], d, symlinks=True) if kind == "zero" else d.mkdir()
        if kind == "fifo":
            os.mkfifo(d / owner.OWNER_FILE)
    dead = tmp_path / f"{cleanup.DELAYLINE_PREFIX}dead"
    dead.mkdir()
    rec = {**owner.record(), "boot": "a boot before this one"}  # proven dead: this host rebooted since
    (dead / owner.OWNER_FILE).write_text(json.dumps(rec))
    removed, problems = cleanup.remove_delayline_dirs(tmp_path)
    assert removed == [f"delay-line folder {dead}"] and not dead.exists()
    assert len(problems) == 2 and all("skipped, not ours" in p for p in problems), problems
