"""scenario/confined.py: the one reader of files a scenario names (corpus, trace, model and data files)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distro_bench.scenario import corpus, datafiles, trace
from distro_bench.scenario.confined import ConfinedReadError, read_confined


def _why(path: Path, cap: int = 100, within: Path | None = None) -> tuple[str, object]:
    with pytest.raises(ConfinedReadError) as e:
        read_confined(path, cap, within)
    return e.value.why, e.value.detail


def test_reads_a_regular_file_with_its_mode(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_bytes(b"hello")
    f.chmod(0o640)
    got = read_confined(f, 5)
    assert (got.data, got.mode) == (b"hello", 0o640)


def test_each_rule_names_itself(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 11)
    (tmp_path / "real").write_bytes(b"ok")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    os.mkfifo(tmp_path / "fifo")
    assert _why(tmp_path / "none") == ("missing", None)
    assert _why(tmp_path / "big", cap=10) == ("too_big", 11)
    assert _why(tmp_path / "fifo") == ("not_regular", "a FIFO")
    assert _why(tmp_path) == ("not_regular", "a folder")
    with pytest.raises(ConfinedReadError) as e:
        read_confined(tmp_path / "link", 10)
    assert (e.value.why, e.value.symlink) == ("unopenable", True)


def test_a_folder_on_the_way_that_leaves_within_is_caught(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"s")
    inside = tmp_path / "inside"
    inside.mkdir()
    (inside / "sub").symlink_to(outside)  # only the last component is no-follow; the folder on the way is followed
    why, real = _why(inside / "sub" / "secret", within=inside)
    assert why == "outside" and real == outside / "secret"


def test_the_three_callers_keep_their_own_words(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(corpus.CorpusError, match="is a FIFO, not a regular file"):
        corpus._read_one(tmp_path / "fifo", 10)
    with pytest.raises(trace.TraceError, match="a FIFO, not a regular file; a trace is"):
        trace.open_trace(tmp_path / "fifo")
    with pytest.raises(datafiles.DataFileError, match=r"token file .* is not a regular file"):
        datafiles.read_file(tmp_path / "fifo", 10, "token file")
