"""Issue 39 "Must show": forged run folders through what `report`, `check` and `export` call, in-process.

A seeded generator mutates copies of one real small run folder (tests/unit/runfolders.py's make_run, with its
report) with links (to a secret, a folder, /dev/zero, nowhere, themselves), FIFOs, truncations, random
bytes, wrong types, huge and non-finite numbers, deep nesting, YAML aliases and deep folders. Each folder
goes through api.load_run, api.check, api.report and the export's reading and writing (a stand-in tracker:
the real ones take seconds a case; `-m slow` runs TensorBoard and the real plots on a share of the cases).
Each must succeed or raise one of our errors (exit 2 at the CLI), within a time bound, and nothing outside
the run folder may change (a sentinel folder, which the links point into, is compared before and after).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import threading
import time
import traceback
from pathlib import Path

import pandas as pd
import pytest
import yaml

from distro_bench import api
from distro_bench.errors import HarnessError
from distro_bench.export import trackers
from distro_bench.report.document import Figure
from distro_bench.results import runfiles
from distro_bench.results.rundir import atomic_write_bytes, atomic_write_json
from distro_bench.run.launch import log_tail, worker_heartbeat
from distro_bench.train.liveness import RecordTail, heartbeat_age, read_heartbeat
from tests.unit.runfolders import make_run

CASES = int(os.environ.get("DISTRO_BENCH_FORGED_CASES", "250"))
CASE_LIMIT_S = 60.0
# Every Nth case draws the real plots (seconds a case; the rest use a stand-in)
REAL_PLOTS_EVERY = int(os.environ.get("DISTRO_BENCH_FORGED_REAL_PLOTS_EVERY", "10"))
SEED = 39
SECRET = b"rootpw-s3cr3t-line\n"

FILES = ["summary.json", "scenario.yaml", "status.json", "environment.json", "metrics.parquet", "summary.csv",
         "report.md", "report.html", "plots/loss_vs_step.png", "workers/adamw/rank0.jsonl",
         "workers/distro/rank1.jsonl", "events.parquet", "prediction.json",
         # a live run's files (issue 51): what the coordinator reads while the workers train
         "workers/adamw/rank0.log", "workers/adamw/rank0.hb", "workers/distro/rank1.hb"]
LIVE = ["workers/adamw/rank0.jsonl", "workers/distro/rank1.jsonl", "workers/adamw/rank0.log", "workers/adamw/rank0.hb",
        "workers/distro/rank1.hb"]
FOLDERS = ["plots", "workers", "workers/adamw", "mlruns", "null"]
JSON_FILES = ["summary.json", "status.json", "environment.json", "prediction.json"]


# ---- the generator ------------------------------------------------------------------------------------------

def _weird(rng: random.Random):
    return rng.choice([
        "many", "", "x" * 100_000, -1, 0, 10**30, 10**18, 1e308, -1e308, 1e-300, None, True, False, [], {},
        [1, 2, 3], {"a": {"b": None}}, "../../etc/passwd", "\x1b]0;pwned\x07\x1b[2J", "[link=x]y[/link]",
        "<script>alert(1)</script>", _deep(50),
    ])


def _deep(n: int):
    v: object = 1
    for _ in range(n):
        v = [v]
    return v


def _paths(obj, prefix=()):
    """Every (path, value) in a JSON-like document."""
    yield prefix, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:20]):
            yield from _paths(v, (*prefix, i))


def _set(doc, path, value):
    if not path:
        return value
    node = doc
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return doc


def _mutate_document(rng: random.Random, doc):
    for _ in range(rng.randint(1, 3)):
        path, _ = rng.choice(list(_paths(doc)))
        if path and rng.random() < 0.15:
            node = doc
            for p in path[:-1]:
                node = node[p]
            del node[path[-1]]
        else:
            doc = _set(doc, path, _weird(rng))
    return doc


def _plain(path: Path) -> bool:
    """A regular file the generator may read and change (never through a link it made earlier)."""
    return path.is_file() and not path.is_symlink()


def _writable(path: Path) -> Path:
    """`path` made safe for the generator to write: whatever is there that is not a plain file goes."""
    if path.is_symlink() or (path.exists() and not _plain(path)):
        _replace(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _linked_parent(run: Path, rel: str) -> bool:
    """A folder on the way to run/rel is a link an earlier mutation made: the generator must not go through it."""
    p = run
    for part in Path(rel).parts[:-1]:
        p = p / part
        if p.is_symlink() or (p.exists() and not p.is_dir()):
            return True
    return False


def _replace(path: Path) -> None:
    if path.is_symlink() or path.is_file() or path.is_fifo():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _cleared(run: Path, rel: str) -> Path | None:
    """run/rel emptied for a new entry (its folder made), or None where an earlier mutation linked a folder on the way."""
    if _linked_parent(run, rel):
        return None
    p = run / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    _replace(p)
    return p


def _target(rng: random.Random, outside: Path, here: Path) -> str:
    return str(rng.choice([outside / "secret.txt", outside / "victim.png", outside / "victim_dir", "/dev/zero",
                           "/dev/null", "/nonexistent/x", here.name, outside / "victim_dir" / "new.png"]))


def _m_link(rng, run, outside):
    rel = rng.choice(FILES + FOLDERS)
    if (p := _cleared(run, rel)) is None:
        return f"skipped {rel}"
    p.symlink_to(_target(rng, outside, p))
    return f"link {rel}"


def _m_fifo(rng, run, outside):
    rel = rng.choice(FILES)
    if (p := _cleared(run, rel)) is None:
        return f"skipped {rel}"
    os.mkfifo(p)
    return f"fifo {rel}"


def _m_bytes(rng, run, outside):
    rel = rng.choice(FILES)
    if _linked_parent(run, rel):
        return f"skipped {rel}"
    p = run / rel
    if not _plain(p):
        return f"bytes {rel} (not a plain file)"
    data = p.read_bytes()
    how = rng.choice(["truncate", "random", "flip", "empty", "sparse"])
    if how == "truncate":
        data = data[:rng.randint(0, max(0, len(data) - 1))]
    elif how == "random":
        data = rng.randbytes(rng.randint(1, 4096))
    elif how == "flip":
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            if b:
                b[rng.randrange(len(b))] = rng.randrange(256)
        data = bytes(b)
    elif how == "empty":
        data = b""
    if how == "sparse":
        with open(p, "r+b") as f:
            f.truncate(rng.choice([2**31, 2**33]))
    else:
        p.write_bytes(data)
    return f"{how} {rel}"


def _m_delete(rng, run, outside):
    rel = rng.choice([*FILES, "workers", "plots"])
    if _linked_parent(run, rel):
        return f"skipped {rel}"
    _replace(run / rel)
    return f"delete {rel}"


def _m_to_dir(rng, run, outside):
    rel = rng.choice(FILES)
    if (p := _cleared(run, rel)) is None:
        return f"skipped {rel}"
    (p / "inner").mkdir(parents=True)
    return f"folder at {rel}"


def _m_json(rng, run, outside):
    rel = rng.choice(JSON_FILES)
    if _linked_parent(run, rel):
        return f"skipped {rel}"
    p = run / rel
    try:
        doc = json.loads(p.read_text()) if _plain(p) else {}
    except (OSError, ValueError, RecursionError):
        doc = {}
    how = rng.choice(["values", "values", "nan", "top", "deep"])
    if how == "values":
        text = json.dumps(_mutate_document(rng, doc))
    elif how == "nan":
        text = json.dumps(doc).replace("2", rng.choice(["NaN", "Infinity", "-Infinity", "1e999", "9" * 5000]), 1)
    elif how == "deep":
        n = rng.choice([900, 5000, 100_000])
        text = json.dumps(doc).replace("2", "[" * n + "]" * n, 1)
    else:
        text = json.dumps(rng.choice([[], "x", 1, None]))
    _writable(p).write_text(text)
    return f"json {how} {rel}"


def _m_yaml(rng, run, outside):
    p = run / "scenario.yaml"
    try:
        doc = yaml.safe_load(p.read_text()) if _plain(p) else {}
    except (OSError, yaml.YAMLError, ValueError, RecursionError):
        doc = {}
    how = rng.choice(["values", "values", "count", "aliases", "recursive", "raw"])
    if how == "values":
        text = yaml.safe_dump(_mutate_document(rng, doc if isinstance(doc, dict) else {}))
    elif how == "count":
        text = (p.read_text() if _plain(p) else "count: 2").replace(
            "count: 2", f"count: {rng.choice(['1000000000000', 'many', '-3', '1e400', '.nan', '9' * 5000])}")
    elif how == "aliases":  # a billion laughs
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
        text = "\n".join(lines) + "\nname: x\nworkers: *a8\n"
    elif how == "recursive":
        text = "name: &n [*n]\nworkers: &w {a: *w}\n"
    else:
        text = rng.choice(["name: x\n\tworkers: []\n", "name: a\nname: b\n", "{[", "- " * 5000 + "x\n",
                           "!!python/object/apply:os.system [echo pwned]\n", "\x00\xff\xfe", "a: " + "[" * 5000,
                           "a: " + "[" * 900 + "]" * 900 + "\n"])
    _writable(p).write_text(text)
    return f"yaml {how}"


def _m_parquet(rng, run, outside):
    p = run / "metrics.parquet"
    try:
        df = pd.read_parquet(p) if _plain(p) else None
    except (OSError, ValueError):
        df = None
    if df is None:
        return "parquet (unreadable already)"
    how = rng.choice(["drop", "strings", "huge", "nonfinite", "names", "empty", "negative"])
    col = rng.choice(list(df.columns))
    if how == "drop":
        df = df.drop(columns=[col])
    elif how == "strings":
        df[col] = "many"
    elif how == "huge":
        df[rng.choice(["step", "rank", "payload_tx_bytes", "tokens"])] = 2**62
    elif how == "nonfinite":
        df[rng.choice(["loss", "val_loss", "step_time_s", "t_start", "comm_s"])] = rng.choice(
            [float("nan"), float("inf"), -float("inf"), 1e308])
    elif how == "names":
        df["optimizer"] = rng.choice(["../x", "", "x" * 5000, "\x1b[2J", "[bold]"])
    elif how == "empty":
        df = df.iloc[0:0]
    else:
        df[rng.choice(["step", "rank", "seed"])] = -5
    df.to_parquet(p, index=False)
    return f"parquet {how} {col}"


def _m_jsonl(rng, run, outside):
    rel = rng.choice(["workers/adamw/rank0.jsonl", "workers/distro/rank1.jsonl"])
    if _linked_parent(run, rel):
        return f"skipped {rel}"
    p = _writable(run / rel)
    rec = {"type": "step", "optimizer": "adamw", "rank": 0, "step": 1, "loss": 2.0, "step_time_s": 0.1}
    rec = _mutate_document(rng, rec)
    lines = [json.dumps(rec), "garbage{", "[" * rng.choice([10, 5000]) + "]" * 10, "NaN", "[]",
             json.dumps({"type": "start", "rank": rng.choice([0, -1, 10**20, "x"]), "device": _weird(rng)})]
    with open(p, "a") as f:
        f.write("\n".join(rng.sample(lines, rng.randint(1, len(lines)))) + "\n")
    if rng.random() < 0.5:  # without a summary the report rebuilds from these records
        _replace(run / "summary.json")
    return f"jsonl {rel}"


def _m_prediction(rng, run, outside):
    """prediction.json of the wrong shape (13 internal errors in `report` before issue 51)."""
    p = run / "prediction.json"
    if _linked_parent(run, "prediction.json"):
        return "skipped prediction.json"
    figures = {"payload_tx_bytes": 10, "payload_rx_bytes": 10, "wire_tx_bytes": 11.0, "wire_rx_bytes": 11.0,
               "rounds": 2, "latency_s": 0.01, "transfer_s": 0.02, "comm_s": 0.03, "step_s": 0.1, "floor_ratio": None}
    doc = {"network_emulated": False, "world_size": 2, "max_hop_delay_s": 0.0,
           "optimizers": {"adamw": dict(figures), "distro": dict(figures)}}
    how = rng.choice(["figure", "figures", "optimizers", "top", "missing"])
    if how == "figure":
        doc["optimizers"]["distro"][rng.choice(list(figures))] = _weird(rng)
    elif how == "figures":
        doc["optimizers"]["adamw"] = _weird(rng)
    elif how == "optimizers":
        doc["optimizers"] = _weird(rng)
    elif how == "top":
        doc[rng.choice(["world_size", "max_hop_delay_s", "network_emulated"])] = _weird(rng)
    else:
        del doc["optimizers"]["distro"][rng.choice(list(figures))]
    _writable(p).write_text(json.dumps(doc))
    return f"prediction {how}"


def _m_target(rng, run, outside):
    """summary.json's target of the wrong shape (`{"val_loss": "x", "how": [1]}` was an internal error)."""
    p = run / "summary.json"
    if _linked_parent(run, "summary.json") or not _plain(p):
        return "skipped target"
    try:
        doc = json.loads(p.read_text())
    except (ValueError, RecursionError):
        return "target (summary unreadable already)"
    if not isinstance(doc, dict):
        return "target (summary not a mapping)"
    doc["target"] = rng.choice([{"val_loss": _weird(rng), "how": _weird(rng)}, {"val_loss": "x", "how": [1]},
                                _weird(rng)])
    p.write_text(json.dumps(doc))
    return "target"


def _m_live(rng, run, outside):
    """A worker's live files forged as a worker could (its folder is its own while it trains): a heartbeat or
    log as a link, a FIFO, a device link, garbage, a huge sparse file; records with an endless line."""
    rel = rng.choice(LIVE)
    if (p := _cleared(run, rel)) is None:
        return f"skipped {rel}"
    how = rng.choice(["link", "fifo", "zero", "garbage", "sparse", "endless", "beat"])
    if how == "link":
        p.symlink_to(_target(rng, outside, p))
    elif how == "fifo":
        os.mkfifo(p)
    elif how == "zero":
        p.symlink_to("/dev/zero")
    elif how == "garbage":
        p.write_bytes(rng.randbytes(rng.randint(0, 8192)))
    elif how == "beat":
        p.write_text(rng.choice(["1 x", "1 2 3 4", "nan inf -inf", "9" * 5000 + " a 1", ESC_TEXT, "-1 [b] 1e999"]))
    else:
        with open(p, "wb") as f:  # 1,000 MiB of NULs (under the 1 GiB cap), or one line past the line limit
            f.truncate(1000 * 2**20 if how == "sparse" else 2**20 + 10)
    return f"live {how} {rel}"


def _m_expand(rng, run, outside):
    """A parquet table that is small on disk and huge decoded: one 2 MiB string named by every row (a 94 KB
    metrics.parquet of 2,000 rows took ~4 GiB), or thousands of columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rel = rng.choice(["metrics.parquet", "events.parquet"])
    if (p := _cleared(run, rel)) is None:
        return f"skipped {rel}"
    if rng.random() < 0.7:
        big = pa.DictionaryArray.from_arrays(pa.array([0] * 2000, pa.int32()), pa.array(["x" * 2 * 2**20]))
        pq.write_table(pa.table({"optimizer": big, "step": pa.array(range(2000))}), p, compression="zstd")
        return f"expand strings {rel}"
    pq.write_table(pa.table({f"c{i}": [1] for i in range(rng.choice([300, 3000]))}), p)
    return f"expand columns {rel}"


def _m_deep_folders(rng, run, outside):
    if _linked_parent(run, "workers/adamw/x"):
        return "skipped deep folders"
    p = run / "workers" / "adamw"
    for _ in range(rng.choice([20, 200])):
        p = p / "d"
    p.mkdir(parents=True, exist_ok=True)
    (p / "rank9.jsonl").write_text('{"type": "step", "optimizer": "adamw", "rank": 9, "step": 0}\n')
    if rng.random() < 0.5:
        _replace(run / "summary.json")
    return "deep folders"


MUTATIONS = [_m_link, _m_link, _m_fifo, _m_bytes, _m_bytes, _m_delete, _m_to_dir, _m_json, _m_json, _m_json,
             _m_yaml, _m_yaml, _m_parquet, _m_parquet, _m_jsonl, _m_deep_folders, _m_prediction, _m_target,
             _m_live, _m_live, _m_expand]
ESC_TEXT = "\x1b]0;pwned\x07\x1b[2J\u202e"


# ---- what runs on each folder -------------------------------------------------------------------------------

def _null_tracker(run, dest):
    """Export's reading (the attachments, per-step metrics, parameters, summary figures) and a write into
    `dest`, without a tracker library: the real ones take seconds a case (per-step metrics of the first
    optimizer only: pandas' grouping is most of a case's time)."""
    result = trackers.ExportResult("null", dest)
    files = trackers.attachments(run)
    for i, opt in enumerate(run.optimizers):
        rows = run.metrics[run.metrics["optimizer"] == opt]
        doc = {"metrics": trackers.step_metrics(rows) if i == 0 else {}, "params": trackers.params_of(run, opt),
               "summary": trackers.summary_metrics(run, opt), "files": [str(p) for p, _ in files]}
        if isinstance(dest, Path):
            atomic_write_json(dest / "export.json", doc, root=run.path)
        result.runs[opt] = str(dest)
    return result


def _stand_in_plot(run, out):
    """A stand-in for the report's plots, written the way each plot is written (drawing them takes seconds
    a case: the slow test draws them): the figure's bytes into plots/ below the report's folder."""
    path = out / "loss_vs_step.png"
    data = run.data.metrics[["step", "loss"]].to_numpy().tobytes()
    atomic_write_bytes(path, b"\x89PNG stand-in" + data[:4096], root=out.parent)
    return Figure(path, "loss", "loss")


def _live(run_dir: Path) -> None:
    """What the coordinator reads of its workers while they train (issue 51), on the forged folder: each
    rank's records tailed twice, its heartbeat and its log's end. A refusal is ours; a hang or a crash is not."""
    for folder in (run_dir / "workers" / "adamw", run_dir / "workers" / "distro"):
        if folder.is_symlink() or not folder.is_dir():
            continue
        for rank in (0, 1):
            read_heartbeat(folder / f"rank{rank}.hb")
            heartbeat_age(folder / f"rank{rank}.hb")
            worker_heartbeat(folder, rank)
            log_tail(folder / f"rank{rank}.log")
            tail = RecordTail(folder / f"rank{rank}.jsonl")
            for _ in range(2):
                try:
                    tail.new_records()
                except runfiles.RunFileError:
                    break


def _commands(run_dir: Path, tracker: str) -> list[str]:
    """the live readers, then load, check, report and export one folder; the steps that succeeded (an error of
    ours ends the case)."""
    done = []
    _live(run_dir)
    done.append("live")
    run = api.load_run(run_dir)
    done.append("load")
    api.check(run, allow_few_seeds=True)
    done.append("check")
    api.report(run)
    done.append("report")
    if len(run.metrics):
        api.export(run, tracker)  # type: ignore[arg-type]
        done.append("export")
    return done


def _snapshot(folder: Path) -> dict:
    out = {}
    for p in sorted(folder.rglob("*")):
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else None
        out[str(p.relative_to(folder))] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return out


def _run_case(run_dir: Path, tracker: str) -> tuple[str, object, float]:
    """('ok'|'ours'|'bug'|'hang', detail, seconds) of one folder, in a thread bounded by CASE_LIMIT_S."""
    box: dict = {}

    def target():
        try:
            box["result"] = ("ok", _commands(run_dir, tracker))
        except HarnessError as e:
            box["result"] = ("ours", f"{type(e).__name__}: {e}"[:300])
        except BaseException:  # a bug: reported with its traceback
            box["result"] = ("bug", traceback.format_exc())

    t0 = time.monotonic()
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(CASE_LIMIT_S)
    took = time.monotonic() - t0
    if t.is_alive():
        return "hang", None, took
    kind, detail = box["result"]
    return kind, detail, took


@pytest.fixture
def forge(tmp_path, monkeypatch):
    """(base run folder with its report, the sentinel folder outside, a function making case i's folder)."""
    base = make_run(tmp_path / "base", "run", seeds=1, steps=6)
    api.report(base)
    outside = tmp_path / "outside"
    (outside / "victim_dir").mkdir(parents=True)
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "victim.png").write_bytes(b"\x89PNG not really")
    (outside / "victim_dir" / "keep.txt").write_text("keep\n")
    cases = tmp_path / "cases"
    cases.mkdir()
    monkeypatch.setitem(trackers.EXPORTERS, "null", (_null_tracker, "null"))

    def make(i: int) -> tuple[Path, list[str]]:
        rng = random.Random(SEED * 100_003 + i)
        run = cases / f"case{i:04d}" / "run"
        shutil.copytree(base, run, symlinks=True)
        return run, [m(rng, run, outside) for m in rng.sample(MUTATIONS, rng.randint(1, 3))]

    return base, outside, make


def _fuzz(forge, n: int, tracker: str, plots: bool, monkeypatch, real_every: int = 0) -> None:
    """`plots`: the real plots on every case; else a stand-in, and the real ones on every `real_every`th case
    (the plots read what a forged folder holds too: a table without compute_s, a target of the wrong shape)."""
    from distro_bench.report import plots as plots_mod

    real_plots = list(plots_mod.PLOTS)
    monkeypatch.setattr(plots_mod, "PLOTS", list(real_plots))
    # Durability is not what is tested here, and on a loaded disk each fsync costs tens of milliseconds.
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    _, outside, make = forge
    before = _snapshot(outside)
    outcomes: dict[str, int] = {}
    bugs, hangs, slowest = [], [], (0.0, None)
    t_all = time.monotonic()
    for i in range(n):
        plots_mod.PLOTS[:] = real_plots if plots or (real_every and i % real_every == 0) else [_stand_in_plot]
        run, what = make(i)
        kind, detail, took = _run_case(run, tracker)
        outcomes[kind] = outcomes.get(kind, 0) + 1
        slowest = max(slowest, (took, i))
        if kind == "bug":
            bugs.append(f"case {i} ({'; '.join(what)}):\n{detail}")
        elif kind == "hang":
            hangs.append(f"case {i} ({'; '.join(what)})")
            break  # the thread still holds the case: stop rather than pile up
        for p in list(run.parent.iterdir()):  # nothing beside the run folder either
            assert p == run, f"case {i} ({'; '.join(what)}) wrote {p}"
        if not i % 50:
            assert _snapshot(outside) == before, f"case {i} ({'; '.join(what)}) changed a file outside the run folder"
        shutil.rmtree(run.parent, ignore_errors=True)
    elapsed = time.monotonic() - t_all
    print(f"{n} forged folders in {elapsed:.1f} s: {outcomes}; internal errors {len(bugs)}, hangs {len(hangs)}; "
          f"slowest case {slowest[1]} {slowest[0]:.1f} s")
    assert not hangs, f"hung past {CASE_LIMIT_S} s: {hangs}"
    assert not bugs, f"{len(bugs)} internal error(s); first:\n" + "\n\n".join(bugs[:3])
    assert _snapshot(outside) == before, "a file outside the run folders changed"
    assert outcomes.get("ok", 0) and outcomes.get("ours", 0), outcomes  # the generator makes both kinds


@pytest.mark.slow  # 13 s on the 2-core host; DISTRO_BENCH_FORGED_CASES=5000 for a longer search
def test_forged_run_folders_fail_cleanly(forge, monkeypatch):
    """CASES (250) forged folders: success or our error, each within CASE_LIMIT_S, nothing outside touched."""
    _fuzz(forge, CASES, "null", plots=False, monkeypatch=monkeypatch, real_every=REAL_PLOTS_EVERY)


@pytest.mark.slow
def test_forged_run_folders_with_real_plots_and_tensorboard(forge, monkeypatch):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    _fuzz(forge, 20, "tensorboard", plots=True, monkeypatch=monkeypatch)


def test_the_generator_is_seeded(forge):
    """The same case number forges the same folder (a failure names a case that can be replayed)."""
    _, _, make = forge
    a, what_a = make(7)
    first = {str(p.relative_to(a)): (p.is_symlink(), p.read_bytes() if p.is_file() and not p.is_symlink()
                                     and p.stat().st_size < 2**20 else None) for p in sorted(a.rglob("*"))}
    shutil.rmtree(a.parent)
    b, what_b = make(7)
    second = {str(p.relative_to(b)): (p.is_symlink(), p.read_bytes() if p.is_file() and not p.is_symlink()
                                      and p.stat().st_size < 2**20 else None) for p in sorted(b.rglob("*"))}
    assert what_a == what_b and first.keys() == second.keys()

