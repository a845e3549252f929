"""`clean --force` ending a live netns run leaves that run a note, so its status says clean ended it rather than
only "worker exited -9" (issue 39, item 11). Scoped to this test's own run id: other runs on the host stay."""

from __future__ import annotations

import os
import subprocess

import pytest

from distro_bench.net import cleanup, naming, owner


def test_clean_force_tells_the_live_run_it_ended_it(monkeypatch, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces")
    from distro_bench.backends.netns import NetnsBackend

    monkeypatch.setattr(owner, "runtime_dir", lambda: tmp_path)
    rid = naming.new_run_id()
    name = naming.node_ns(rid, 0)
    real = cleanup.list_namespaces
    monkeypatch.setattr(cleanup, "list_namespaces", lambda run_id=None: real(run_id or rid))
    monkeypatch.setattr(cleanup, "remove_delayline_dirs", lambda base=None: ([], []))
    if subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode:
        pytest.skip("network namespaces unavailable here")
    try:
        owner.claim(rid)  # this process is the live run
        removed, problems = NetnsBackend.clean_leftovers(include_live=False)
        assert removed == [] and real(rid) == [name] and owner.ended_by_clean() is None
        removed, problems = NetnsBackend.clean_leftovers(include_live=True)
        assert removed == [f"namespace {name}"] and problems == [] and real(rid) == []
        assert owner.ended_by_clean() == f"namespace {name}"
    finally:
        owner.release(rid)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
