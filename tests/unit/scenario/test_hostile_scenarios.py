"""Issue 39, items 2, 8, 9 and 10: a trace is opened once and the bytes checked are the bytes copied; every value
that validated and then crashed or hung a worker is refused at validate with the field, the value and the
valid range; no input gives an internal error (also with `validate --json`); names follow the name rule and
whatever a scenario sets reaches the terminal and report.md escaped."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
import yaml

from distro_bench.errors import InputError, ScenarioError
from distro_bench.scenario.loading import dump_for_run, load_scenario, scenario_from_dict
from tests.helpers import tiny_scenario_dict

SECRET = "rootpw-s3cr3t-line"
CSV = "t_s,rate_bit_s\n0,1000000\n1,2000000\n"


@pytest.fixture(autouse=True)
def _no_opt_in(monkeypatch):
    """The confinement tests mean the default: an opt-in exported in the developer's shell would void them."""
    names = ("DISTRO_BENCH_ALLOW_TRACE_OUTSIDE", "DISTRO_BENCH_ALLOW_CORPUS_OUTSIDE", "DISTRO_BENCH_DEBUG")
    for var in names:
        monkeypatch.delenv(var, raising=False)
    yield
    # The CLI's --allow-*-outside export the opt-in into this process (for its workers): it must not outlive the
    # test, or a later test's confinement check is voided (monkeypatch restores only what it changed itself).
    for var in names:
        os.environ.pop(var, None)


def _write(folder: Path, doc: dict | str, name: str = "scenario.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return folder / name


def _refused(cli, path: Path, *extra: str) -> str:
    """validate and validate --json both exit 2 with one located problem, no traceback; the plain output."""
    plain = cli("validate", path, *extra)
    assert plain.exit_code == 2, plain.output
    assert "Traceback" not in plain.output and "internal error" not in plain.output
    as_json = cli("validate", path, *extra, "--json")
    assert as_json.exit_code == 2, as_json.output
    doc = json.loads(as_json.stdout)
    assert doc["valid"] is False and doc["problems"], doc
    return " ".join(plain.output.split())


def _traced(folder: Path, up: str = "t.csv", down: str | None = None) -> dict:
    link = {"down": "50Mbit", "up_trace": up, **({"down_trace": down} if down else {})}
    if down:
        link.pop("down")
    return tiny_scenario_dict(links={"l": link}, workers=[{"count": 2, "link": "l"}])


# ---- item 2: a trace is opened once; the copy is the bytes validation checked ------------------------------

def test_the_run_copies_the_bytes_validated_not_what_the_path_names_later(tmp_path):
    sc = tmp_path / "sc"
    sc.mkdir()
    (sc / "t.csv").write_text(CSV)
    secret = tmp_path / "private" / "secret"
    secret.parent.mkdir(mode=0o700)
    secret.write_text(SECRET + "\n")
    s = load_scenario(_write(sc, _traced(sc)))
    (sc / "t.csv").unlink()
    (sc / "t.csv").symlink_to(secret)  # flipped between validation and the run's copy
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _text, follows = dump_for_run(s, run_dir)
    copies = list((run_dir / "traces").iterdir())
    assert follows and len(copies) == 1
    assert copies[0].read_text() == CSV and SECRET not in copies[0].read_text()


@pytest.mark.parametrize("source_mode,copy_mode", [(0o600, 0o600), (0o640, 0o600), (0o644, 0o644)])
def test_the_copy_is_private_unless_the_source_was_readable_by_everyone(tmp_path, source_mode, copy_mode):
    sc = tmp_path / "sc"
    sc.mkdir()
    (sc / "t.csv").write_text(CSV)
    os.chmod(sc / "t.csv", source_mode)
    s = load_scenario(_write(sc, _traced(sc)))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    old = os.umask(0)  # the rule holds whatever the umask
    try:
        dump_for_run(s, run_dir)
    finally:
        os.umask(old)
    (copy,) = (run_dir / "traces").iterdir()
    assert stat.S_IMODE(copy.stat().st_mode) == copy_mode


def test_a_trace_that_cannot_be_read_at_copy_time_leaves_nothing_in_the_run_folder(tmp_path):
    sc = tmp_path / "sc"
    sc.mkdir()
    (sc / "a.csv").write_text(CSV)
    (sc / "b.csv").write_text(CSV)
    s = load_scenario(_write(sc, _traced(sc, up="a.csv", down="b.csv")))
    s._traces.clear()  # as a scenario never validated from a file: the copy must read the traces itself
    (sc / "b.csv").unlink()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with pytest.raises(ValueError, match="no such file"):
        dump_for_run(s, run_dir)
    assert list(run_dir.iterdir()) == []  # not a half-written traces/ folder


def test_a_trace_swapped_for_a_symlink_is_not_followed_at_open(tmp_path):
    from distro_bench.scenario.trace import TraceError, open_trace

    (tmp_path / "secret").write_text(SECRET)
    (tmp_path / "t.csv").symlink_to(tmp_path / "secret")
    with pytest.raises(TraceError, match="symlink") as e:
        open_trace(tmp_path / "t.csv")
    assert SECRET not in str(e.value)


# ---- item 8: values that validated and then crashed or hung a worker --------------------------------------

@pytest.mark.parametrize("doc,fragment", [
    (tiny_scenario_dict(hardware={"h": {"compute_scale": 1e-300}}, workers=[{"count": 2, "hardware": "h"}]),
     "hardware.h.compute_scale: Input should be greater than or equal to 0.001 (got 1e-300)"),
    (tiny_scenario_dict(hardware={"h": {"compute_schedule": [{"at": "1s", "compute_scale": 1e-300}]}},
                        workers=[{"count": 2, "hardware": "h"}]),
     "hardware.h.compute_schedule[0].compute_scale: Input should be greater than or equal to 0.001"),
    (tiny_scenario_dict(hardware={"a": {"tflops": 1e300}, "b": {"tflops": 1e-300}},
                        workers=[{"count": 1, "hardware": "a"}, {"count": 1, "hardware": "b"}]),
     "hardware.a.tflops: Input should be less than or equal to 100000 (got 1e+300)"),
    (tiny_scenario_dict(hardware={"a": {"tflops": 10000}, "b": {"tflops": 1}},
                        workers=[{"count": 1, "hardware": "a"}, {"count": 1, "hardware": "b"}]),
     "hardware.b.tflops: 1 is 10,000x slower than the fastest profile (10000); at most 1,000x"),
    (tiny_scenario_dict(data={"corpus": "builtin:pydoc", "seq_len": 32, "batch_size": 4, "val_batches": 10**9}),
     "data.val_batches: Input should be less than or equal to 10000 (got 1000000000)"),
    (tiny_scenario_dict(data={"corpus": "builtin:pydoc", "seq_len": 8192, "batch_size": 4096}),
     "data: batch_size 4096 x seq_len 8192 is 33,554,432 tokens per worker and step; at most 4,194,304"),
    (tiny_scenario_dict(data={"corpus": "builtin:pydoc", "seq_len": 1024, "batch_size": 512, "val_batches": 10000}),
     "evaluation tokens held per worker; at most 33,554,432"),
    (tiny_scenario_dict(train={"tokens": "1e15", "eval_every": 3}),
     "train.tokens: 1,000,000,000,000,000 tokens are 3,906,250,000,000 steps at 256 tokens a step"),
    (tiny_scenario_dict(workers=[{"count": True}]), "workers[0].count: true is a yes/no value; this field takes a number"),
    (tiny_scenario_dict(train={"steps": 6, "eval_every": 3, "seeds": [1, True]}), "train.seeds: item 1: true"),
    (tiny_scenario_dict(optimizers={"adamw": {"lr": 1e-3, "warmup_steps": True}}),
     "warmup_steps: true is a yes/no value"),
    (tiny_scenario_dict(optimizers={"adamw": {"lr": 1e-3, "bucket_mb": 1e-300}}),
     "optimizers.adamw.bucket_mb: Input should be greater than or equal to 0.001"),
])
def test_values_that_crashed_or_hung_a_worker_are_refused_at_validate(cli, tmp_path, doc, fragment):
    out = _refused(cli, _write(tmp_path, doc))
    assert fragment in out


def test_corpus_outside_the_scenario_folder_is_refused_unless_allowed(cli, tmp_path):
    (tmp_path / "secret.txt").write_text(SECRET + " " * 200)
    for corpus in ("/", "/dev/zero", "../secret.txt"):
        out = _refused(cli, _write(tmp_path / "sc", tiny_scenario_dict(data={"corpus": corpus})))
        assert f"data.corpus: '{corpus}' is outside the scenario's folder" in out
        assert "--allow-corpus-outside" in out and SECRET not in out
    ok = cli("validate", tmp_path / "sc" / "scenario.yaml", "--allow-corpus-outside")
    assert ok.exit_code == 0, ok.output


def test_a_corpus_symlink_out_of_the_folder_counts_as_outside(cli, tmp_path):
    (tmp_path / "secret.txt").write_text(SECRET)
    (tmp_path / "sc").mkdir()
    (tmp_path / "sc" / "c.txt").symlink_to(tmp_path / "secret.txt")
    out = _refused(cli, _write(tmp_path / "sc", tiny_scenario_dict(data={"corpus": "c.txt"})))
    assert "data.corpus: 'c.txt' is outside the scenario's folder" in out


def test_a_corpus_fifo_device_or_huge_sparse_file_in_the_folder_is_refused_quickly(cli, tmp_path):
    sc = tmp_path / "sc"
    sc.mkdir()
    os.mkfifo(sc / "fifo.txt")
    with open(sc / "big.txt", "wb") as f:
        f.truncate(8 * 2**30)  # sparse: 8 GiB of nothing on disk
    t0 = time.monotonic()
    assert "fifo.txt' is a FIFO" in _refused(cli, _write(sc, tiny_scenario_dict(data={"corpus": "fifo.txt"})))
    assert "big.txt' is 8,589,934,592 bytes; a corpus is at most 67,108,864 bytes" in _refused(
        cli, _write(sc, tiny_scenario_dict(data={"corpus": "big.txt"})))
    assert time.monotonic() - t0 < 30


def test_the_worker_reads_a_corpus_within_the_same_caps(tmp_path):
    from distro_bench.train.data import load_corpus

    os.mkfifo(tmp_path / "fifo.txt")
    t0 = time.monotonic()
    with pytest.raises(InputError, match="a FIFO"):
        load_corpus(str(tmp_path / "fifo.txt"))
    with pytest.raises(InputError, match="is a device"):
        load_corpus("/dev/zero")
    assert time.monotonic() - t0 < 5
    # A folder: text files read in sorted order; a symlink inside (to a secret elsewhere) is not followed.
    (tmp_path / "secret.txt").write_text(SECRET)
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    (folder / "b.txt").write_text("bbb")
    (folder / "sub" / "a.txt").write_text("aaa")
    (folder / "link.txt").symlink_to(tmp_path / "secret.txt")
    (folder / "loop").symlink_to(folder)
    assert load_corpus(str(folder)) == b"bbb\n\naaa"


def test_the_run_folders_resolved_scenario_names_its_own_copy_of_the_corpus(tmp_path):
    sc = tmp_path / "sc"
    sc.mkdir()
    (sc / "c.txt").write_text("text " * 500)
    s = load_scenario(_write(sc, tiny_scenario_dict(data={"corpus": "c.txt", "seq_len": 32, "batch_size": 4})))
    run = tmp_path / "run"
    run.mkdir()
    text, follows_copies = dump_for_run(s, run)
    resolved = _write(run, text)
    assert follows_copies and yaml.safe_load(text)["data"]["corpus"] == "data/corpus.txt"
    # as a user's file and as the workers load it: the run folder's copy, never the scenario's folder
    for loaded in (load_scenario(resolved), load_scenario(resolved, confine=False)):
        assert loaded.corpus_path() == str((run / "data" / "corpus.txt").resolve())
    assert (run / "data" / "corpus.txt").read_text() == "text " * 500


def test_a_corpus_folder_swapped_for_a_symlink_after_validation_reaches_no_worker(tmp_path):
    """Issue 51 item 6: the run copies the bytes validation read; the workers read the copy."""
    sc = tmp_path / "sc"
    (sc / "corpus").mkdir(parents=True)
    (sc / "corpus" / "a.txt").write_text("public text " * 100)
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "a.txt").write_text("SECRET " * 100)
    (secret / "a.txt").chmod(0o600)
    s = load_scenario(_write(sc, tiny_scenario_dict(data={"corpus": "corpus", "seq_len": 32, "batch_size": 4})))
    (sc / "corpus" / "a.txt").unlink()
    (sc / "corpus").rmdir()
    (sc / "corpus").symlink_to(secret)  # after validation: the folder is now a link to another one
    run = tmp_path / "run"
    run.mkdir()
    text, _ = dump_for_run(s, run)
    copy = (run / "data" / "corpus.txt").read_text()
    assert "SECRET" not in copy and copy == "public text " * 100
    from distro_bench.train.data import load_corpus

    assert b"SECRET" not in load_corpus(load_scenario(_write(run, text), confine=False).corpus_path())
    # and a folder that is a link out of the scenario's folder at validation is refused there
    with pytest.raises(ScenarioError, match="outside the scenario's folder"):
        load_scenario(_write(sc, tiny_scenario_dict(data={"corpus": "corpus", "seq_len": 32, "batch_size": 4})))


def test_a_scenario_file_past_its_size_cap_is_refused_fast(cli, tmp_path):
    text = yaml.safe_dump(tiny_scenario_dict()) + "# " + "x" * (2 * 2**20) + "\n"
    t0 = time.monotonic()
    assert "larger than 1,048,576 bytes (1 MiB), the cap on a scenario file" in _refused(cli, _write(tmp_path, text))
    assert time.monotonic() - t0 < 10


@pytest.mark.parametrize("command", [["run"], ["sweep", "--set", "train.seed=1,2"]])
@pytest.mark.parametrize("out", ["", "x" * 5000, "a/" + "b" * 300])
def test_bad_out_is_a_usage_error(cli, tmp_path, command, out):
    path = _write(tmp_path, tiny_scenario_dict())
    result = cli(command[0], path, *command[1:], "--out", out)
    assert result.exit_code == 2, result.output
    assert "--out" in result.output and "Traceback" not in result.output
    assert not any(tmp_path.glob("tiny-test-*"))


# ---- item 9: no internal errors ---------------------------------------------------------------------------

@pytest.mark.parametrize("text,fragment", [
    ("name: x\nworkers: " + "[" * 1000 + "]" * 1000 + "\n", "nested too deeply for a scenario; at most 32 levels"),
    ("name: x\ndescription: " + "{a: " * 100 + "1" + "}" * 100 + "\n", "nested more than 32 levels deep"),
    (yaml.safe_dump(tiny_scenario_dict()).replace("seed: 0", "seed: " + "9" * 5000),
     "not valid YAML (an integer of 5000 characters; at most 40)"),
    (("a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, "
     "*b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
     "f: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"), "more than 200,000 values"),
])
def test_hostile_documents_are_refused_with_exit_2(cli, tmp_path, text, fragment):
    t0 = time.monotonic()
    assert fragment in _refused(cli, _write(tmp_path, text))
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("kind", ["folder", "loop", "nul"])
def test_a_trace_that_is_a_folder_a_symlink_loop_or_has_a_nul_is_a_located_problem(cli, tmp_path, kind):
    sc = tmp_path / "sc"
    sc.mkdir()
    if kind == "folder":
        (sc / "t.csv").mkdir()
    elif kind == "loop":
        (sc / "t.csv").symlink_to("t.csv")
    trace = "t\0.csv" if kind == "nul" else "t.csv"
    out = _refused(cli, _write(sc, _traced(sc, up=trace)))
    assert "links.l.up_trace:" in out
    assert {"folder": "a folder, not a regular file", "loop": "cannot be resolved",
            "nul": "holds a NUL character"}[kind] in out


def test_a_scenario_path_that_is_a_folder_or_fifo_is_refused(cli, tmp_path):
    os.mkfifo(tmp_path / "fifo.yaml")
    for path, fragment in ((tmp_path, "not a regular file"), (tmp_path / "fifo.yaml", "not a regular file")):
        assert fragment in _refused(cli, path)


@pytest.mark.parametrize("groups,link,fragment", [
    (50_000, None, "workers: 50000 worker groups; at most 64 workers are supported in all"),
    (20_000, "nosuchlink", "workers: 20000 worker groups; at most 64 workers are supported in all"),
    (100_000, None, "(top level): more than 200,000 values"),  # refused by the document's size before
])
def test_many_worker_groups_are_refused_before_they_are_expanded(groups, link, fragment):
    doc = tiny_scenario_dict(workers=[{"count": 1, **({"link": link} if link else {})}] * groups)
    t0 = time.monotonic()
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(doc)
    assert time.monotonic() - t0 < 10
    assert fragment in str(e.value)


# ---- item 10: names, and what reaches the terminal and report.md ------------------------------------------

ESC_NAME = "\x1b]0;pwned\x07\x1b[2J"


@pytest.mark.parametrize("section", ["links", "hardware"])
@pytest.mark.parametrize("name", [ESC_NAME, "[/]", "[link=http://x]a", "a b", "../x", ""])
def test_link_and_hardware_names_follow_the_name_rule(cli, tmp_path, section, name):
    spec = {"up": "10Mbit"} if section == "links" else {"compute_scale": 0.5}
    doc = tiny_scenario_dict(**{section: {name: spec}},
                             workers=[{"count": 2, ("link" if section == "links" else "hardware"): name}])
    out = _refused(cli, _write(tmp_path, doc))
    assert f"{section}: invalid {section} name" in out
    assert "\x1b" not in out and "\x07" not in out


def test_no_control_character_from_a_scenario_reaches_the_terminal(cli, tmp_path):
    # An unknown key: its location is printed; a trace file name: printed by validate's timeline.
    doc = tiny_scenario_dict(**{ESC_NAME: 1})
    out = cli("validate", _write(tmp_path / "a", doc)).output
    assert "\x1b" not in out and "\\x1b" in out
    sc = tmp_path / "b"
    sc.mkdir()
    trace = f"t{ESC_NAME}.csv"
    (sc / trace).write_text(CSV)
    result = cli("validate", _write(sc, _traced(sc, up=trace)))
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\\x1b" in result.output


def test_a_scenario_path_with_markup_is_printed_as_is(cli, tmp_path):
    path = _write(tmp_path / "[bold]x[/]", tiny_scenario_dict())
    result = cli("validate", path)
    assert result.exit_code == 0, result.output
    assert "[bold]x[/]" in result.output


def test_a_description_reaches_report_md_and_html_as_text(tmp_path):
    from distro_bench import api
    from tests.unit.runfolders import make_run

    run = make_run(tmp_path)
    scen = yaml.safe_load((run / "scenario.yaml").read_text())
    scen["description"] = ("<script>alert(1)</script> [click](javascript:alert(1)) ![x](http://tracker.example/p.png) "
                           "hf:a::b\n# not a heading")
    (run / "scenario.yaml").write_text(yaml.safe_dump(scen))
    files = api.report(run)
    md, html = Path(files.markdown).read_text(), Path(files.html).read_text()
    for page in (md, html):
        assert "<script" not in page
    assert "&lt;script>alert(1)&lt;/script>" in md
    assert "\\[click\\](javascript" in md and "!\\[x\\](http://tracker" in md
    assert "hf\\:a::b" in md and "\n# not a heading" not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_markdown_escaping_keeps_the_reports_own_text_readable():
    from distro_bench.report.markdown import text

    assert text("Data: builtin:pydoc, step_time_s_mean 2.5 -> 3") == "Data: builtin:pydoc, step_time_s_mean 2.5 -> 3"
    assert text("run `distro-bench check` now") == "run `distro-bench check` now"
    assert text("p < 0.05 & 1 | 2, >= 100x") == "p < 0.05 & 1 \\| 2, >= 100x"
    assert text("<b>bold</b> &amp; <!-- c --> <http://x>") == "&lt;b>bold&lt;/b> &amp;amp; &lt;!-- c --> &lt;http://x>"
