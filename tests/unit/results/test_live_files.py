"""Issue 51 items 4 and 7: a worker's live files (records, log, heartbeat) are read as stored run-folder files are
(results/runfiles.py: no link followed, non-blocking, regular files only, capped), and forged files that expand
(a parquet table of one long string per row, a sparse jsonl of NULs, a folder of many files) are refused with
the file and the limit before they take the memory. A real run with a FIFO rank0.jsonl:
tests/integration/local/test_live_files.py."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from distro_bench.net.netchange import _read_heartbeat
from distro_bench.results import metrics, runfiles
from distro_bench.results.rundir import read_parquet
from distro_bench.run.launch import log_tail
from distro_bench.train.liveness import RecordTail, heartbeat_age, read_heartbeat

SECRET = "root-only secret line"


@pytest.fixture
def secret(tmp_path) -> Path:
    p = tmp_path / "secret.txt"
    p.write_text(SECRET + "\n")
    return p


def _in_thread(fn, limit_s: float = 10.0):
    """fn() in a thread: its result, or a failure if it is still blocked after limit_s (a FIFO opened plainly)."""
    box: dict = {}

    def call():
        try:
            box["value"] = fn()
        except Exception as e:  # raised again in the test's thread
            box["error"] = e

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(limit_s)
    assert not t.is_alive(), f"{fn} blocked for {limit_s}s"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def test_log_tail_does_not_follow_a_link_to_a_secret(tmp_path, secret):
    (tmp_path / "rank0.log").symlink_to(secret)
    assert log_tail(tmp_path / "rank0.log") == ""


def test_log_tail_of_a_fifo_or_dev_zero_returns_at_once(tmp_path):
    os.mkfifo(tmp_path / "rank0.log")
    (tmp_path / "rank1.log").symlink_to("/dev/zero")
    assert _in_thread(lambda: log_tail(tmp_path / "rank0.log")) == ""
    assert _in_thread(lambda: log_tail(tmp_path / "rank1.log")) == ""


def test_log_tail_reads_only_the_end_of_a_long_log(tmp_path):
    log = tmp_path / "rank0.log"
    log.write_text("x" * 10_000_000 + "\n" + "\n".join(f"line {i}" for i in range(30)) + "\n")
    assert log_tail(log, lines=3).splitlines() == ["line 27", "line 28", "line 29"]


@pytest.mark.parametrize("reader", [read_heartbeat, _read_heartbeat])
def test_heartbeats_refuse_links_fifos_and_devices(tmp_path, secret, reader):
    (tmp_path / "rank0.hb").write_text("12 communicate 1700000000.5\n")
    assert reader(tmp_path / "rank0.hb") == (12, "communicate", 1700000000.5)
    (tmp_path / "rank1.hb").symlink_to(secret)
    os.mkfifo(tmp_path / "rank2.hb")
    (tmp_path / "rank3.hb").symlink_to("/dev/zero")
    for r in (1, 2, 3):
        assert _in_thread(lambda r=r: reader(tmp_path / f"rank{r}.hb")) is None
    assert heartbeat_age(tmp_path / "rank1.hb") is None and heartbeat_age(tmp_path / "rank2.hb") is None


def test_record_tail_reads_new_lines_and_refuses_a_fifo(tmp_path):
    path = tmp_path / "rank0.jsonl"
    tail = RecordTail(path)
    assert tail.new_records() == []  # not there yet
    path.write_text('{"type": "step", "step": 0}\n{"type": "st')
    assert tail.new_records() == [{"type": "step", "step": 0}]
    with path.open("a") as f:
        f.write('ep", "step": 1}\nnot json\n')
    assert tail.new_records() == [{"type": "step", "step": 1}]  # the line not a record skipped, as after the run
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(runfiles.RunFileError, match=r"rank0\.jsonl: a FIFO, not a regular file"):
        _in_thread(tail.new_records)


def test_record_tail_refuses_a_link_and_an_endless_line(tmp_path, secret):
    (tmp_path / "rank0.jsonl").symlink_to(secret)
    with pytest.raises(runfiles.RunFileError, match="symbolic link"):
        RecordTail(tmp_path / "rank0.jsonl").new_records()
    with (tmp_path / "rank1.jsonl").open("wb") as f:
        f.truncate(runfiles.MAX_LINE_BYTES + 10)  # sparse: NULs, no newline
    with pytest.raises(runfiles.RunFileError, match="longer than"):
        RecordTail(tmp_path / "rank1.jsonl").new_records()


def test_a_sparse_jsonl_of_1000_mib_is_refused_naming_the_limit(tmp_path):
    folder = tmp_path / "workers" / "adamw"
    folder.mkdir(parents=True)
    with (folder / "rank0.jsonl").open("wb") as f:
        f.truncate(1000 * runfiles.MiB)  # under the 1 GiB cap; ended in a MemoryError before
    with pytest.raises(runfiles.RunFileError, match=r"rank0.jsonl: line 1 is longer than 1048576 bytes"):
        metrics.read_worker_records(tmp_path / "workers")


def test_too_many_lines_are_refused(tmp_path, monkeypatch):
    (tmp_path / "rank0.jsonl").write_text('{"type": "step"}\n' * 11)
    monkeypatch.setattr(runfiles, "MAX_JSONL_LINES", 10)
    with pytest.raises(runfiles.RunFileError, match="more than 10 lines"):
        list(runfiles.iter_lines(tmp_path, "rank0.jsonl", "rank.jsonl", max_lines=runfiles.MAX_JSONL_LINES))


def test_too_many_files_in_a_folder_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(runfiles, "MAX_FILES", 5)
    for i in range(6):
        (tmp_path / f"rank{i}.jsonl").write_text("")
    with pytest.raises(runfiles.RunFileError, match=r"more than 5 files named rank\*\.jsonl"):
        list(runfiles.iter_files(tmp_path.parent, tmp_path.name, "rank*.jsonl"))


def test_a_parquet_that_expands_to_gibibytes_is_refused_before_decoding(tmp_path):
    # 2,000 rows naming one 2 MiB string: a few KB on disk, 4 GiB as pandas holds it
    one = pa.DictionaryArray.from_arrays(pa.array([0] * 2000, pa.int32()), pa.array(["x" * 2 * runfiles.MiB]))
    table = pa.table({"optimizer": one,
                      "step": pa.array(range(2000))})
    pq.write_table(table, tmp_path / "metrics.parquet", compression="zstd")
    assert (tmp_path / "metrics.parquet").stat().st_size < 100_000
    with pytest.raises(runfiles.RunFileError, match=r"metrics\.parquet: more than 1073741824 bytes once decoded"):
        read_parquet(tmp_path, "metrics.parquet")


def test_parquet_columns_and_nesting_are_limited(tmp_path):
    pq.write_table(pa.table({f"c{i}": [1] for i in range(runfiles.MAX_PARQUET_COLUMNS + 1)}), tmp_path / "a.parquet")
    with pytest.raises(runfiles.RunFileError, match="257 columns, above the limit of 256"):
        _read(tmp_path, "a.parquet")
    pq.write_table(pa.table({"step": [1], "loss": [[1.0] * 10]}), tmp_path / "b.parquet")
    with pytest.raises(runfiles.RunFileError, match="holds lists or records"):
        _read(tmp_path, "b.parquet")


def _read(root: Path, name: str):
    """read_parquet on a file of another name (the caps are by kind: metrics.parquet's)."""
    (root / "metrics.parquet").unlink(missing_ok=True)
    os.rename(root / name, root / "metrics.parquet")
    return read_parquet(root, "metrics.parquet")


def test_a_plain_parquet_reads_as_pandas_reads_it(tmp_path):
    pq.write_table(pa.table({"optimizer": ["adamw", "distro", None], "step": [1, 2, 3]}), tmp_path / "metrics.parquet")


    got, plain = read_parquet(tmp_path, "metrics.parquet"), pd.read_parquet(tmp_path / "metrics.parquet")
    assert got is not None
    pd.testing.assert_frame_equal(got, plain)
