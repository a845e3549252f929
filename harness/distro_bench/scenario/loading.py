"""Scenario files in and out: YAML read safely (size, depth, duplicate keys, huge integers), validated by the
models (scenario/model.py) and then the checks beyond them (scenario/problems.py) into one ScenarioError that
lists every problem; a run folder's resolved copy loaded with the models' checks only; the resolved scenario
written back."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from distro_bench.errors import ScenarioError
from distro_bench.scenario import hfcorpus
from distro_bench.scenario.corpus import read_corpus
from distro_bench.scenario.datafiles import MAX_TOKENIZER_BYTES, token_bytes
from distro_bench.scenario.model import BUILTIN_CORPORA, NAME_RULE, Scenario, show_value, valid_name
from distro_bench.scenario.problems import (
    CONFINE,
    FILES_CHECKED,
    field_path,
    problems_beyond,
    pydantic_problems,
    reference_problems,
)
from distro_bench.scenario.trace import TraceFile, open_trace, parse_trace


def scenario_from_dict(data: Any, source: str = "<scenario>", base_dir: Path | None = None, *,
                       confine: bool = False, stored: bool = False) -> Scenario:
    """Validate a parsed document; raise ScenarioError listing every located problem. `confine`: the corpus must
    lie in `base_dir` too (a scenario file a user names: load_scenario), like trace files always must. `stored`:
    a run folder's record, read by report and check: a method whose code is not installed here is kept as data."""
    shape = _shape_problem(data)
    if shape:
        raise ScenarioError(source, [shape])
    token = CONFINE.set(confine)
    try:
        return _from_dict(data, source, base_dir, stored)
    except RecursionError:  # a shape check above makes this unlikely; never a traceback though
        raise ScenarioError(source, [f"(top level): nested too deeply; at most {MAX_DEPTH} levels"]) from None
    finally:
        CONFINE.reset(token)


# A scenario is a few hundred values nested a few levels deep: past these caps it is a mistake or an attack
# (1000 nested lists crashed the YAML reader; an alias bomb expands to billions of values).
MAX_DEPTH = 32
MAX_VALUES = 200_000
MAX_SCENARIO_BYTES = 2**20  # 1 MiB: the largest scenario here is ~3 KB; a 40 MB one took 26 s to validate


def _shape_problem(data: Any) -> str | None:
    """Nesting deeper than MAX_DEPTH or more than MAX_VALUES values (aliases counted each time they are used),
    walked without recursion; the location of the first one too deep."""
    stack: list[tuple[Any, tuple, int]] = [(data, (), 0)]
    count = 0
    while stack:
        value, loc, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            return f"(top level): more than {MAX_VALUES:,} values (YAML aliases count each time they are used)"
        if depth > MAX_DEPTH:
            return f"{field_path(loc[:8])}{'...' if len(loc) > 8 else ''}: nested more than {MAX_DEPTH} levels deep"
        if isinstance(value, dict):
            stack.extend((v, (*loc, show_value(k, 24) if not isinstance(k, (str, int)) else k), depth + 1)
                         for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (*loc, i), depth + 1) for i, v in enumerate(value))
    return None


def _from_dict(data: Any, source: str, base_dir: Path | None, stored: bool = False) -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError(source, [f"(top level): expected a mapping of fields, got {type(data).__name__}"])
    if isinstance(data.get("optimizers"), dict):
        bad = [k for k, v in data["optimizers"].items() if v is not None and not isinstance(v, dict)]
        if bad:
            raise ScenarioError(source, [f"optimizers.{k}: expected a mapping of options" for k in bad])
        data = {**data, "optimizers": {k: (v or {}) for k, v in data["optimizers"].items()}}
    try:
        s = Scenario.model_validate(data, context={"stored": stored})
    except ValidationError as e:
        # One pass: also report the reference problems of every part that did validate, so a
        # user does not fix the first round only to meet a second.
        problems = pydantic_problems(e) + problems_beyond(data, e, base_dir or Path("."))
        raise ScenarioError(source, list(dict.fromkeys(problems))) from None
    s._base_dir = base_dir or Path(".")
    problems = reference_problems(s)
    if problems:
        raise ScenarioError(source, problems)
    return s


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, refusing a key given twice in one mapping (SafeLoader keeps the last silently:
    a second `optimizers:` would drop the first without a word)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` merges; its keys may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: SafeLoader's own error says so
                continue
            if first is not key_node:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first given on line {first.start_mark.line + 1})",
                    key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


    def construct_yaml_int(self, node):
        # Python refuses int("9" * 5000) (a ValueError, not a YAML error); no field takes more than 20 digits.
        if len(str(node.value)) > MAX_INT_CHARS:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of {len(str(node.value))} characters; at most {MAX_INT_CHARS}", node.start_mark)
        return super().construct_yaml_int(node)


MAX_INT_CHARS = 40
UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", UniqueKeyLoader.construct_yaml_int)


def read_scenario_text(path: Path) -> str:
    """The scenario file's text: a regular file of at most MAX_SCENARIO_BYTES, opened once, non-blocking (a
    FIFO cannot hang validation), in UTF-8. ScenarioError naming the file otherwise."""
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ScenarioError(source, ["no such scenario file"]) from None
    except (OSError, ValueError) as e:  # a symlink loop, a name too long, a NUL in the path
        raise ScenarioError(source, [f"cannot be opened ({getattr(e, 'strerror', None) or e})"]) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ScenarioError(source, ["not a regular file; a scenario is a YAML file"])
    with os.fdopen(fd, "rb") as f:
        raw = f.read(MAX_SCENARIO_BYTES + 1)
    if len(raw) > MAX_SCENARIO_BYTES:
        raise ScenarioError(source, [(f"larger than {MAX_SCENARIO_BYTES:,} bytes ({MAX_SCENARIO_BYTES // 2**20} MiB), "
                                      "the cap on a scenario file")])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(source, ["not a UTF-8 text file"]) from None


def load_scenario(path: str | Path, *, confine: bool = True) -> Scenario:
    """Load and validate a scenario file. `confine` (default): its corpus must lie in the file's folder, as its
    traces must; a run folder's resolved scenario.yaml (absolute corpus path, validated at run time) is loaded
    with confine=False."""
    try:
        path = Path(path)
        source = str(path)
    except (TypeError, ValueError) as e:
        raise ScenarioError(repr(path), [f"not a path ({e})"]) from None
    text = read_scenario_text(path)
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        raise ScenarioError(source, [f"{where}: not valid YAML ({getattr(e, 'problem', e)})"]) from None
    except RecursionError:
        raise ScenarioError(source, [f"nested too deeply for a scenario; at most {MAX_DEPTH} levels"]) from None
    except (ValueError, OverflowError) as e:  # a value Python's own conversions refuse (a base-60 int past its
        # digit limit; a base-60 float of 200 fields, past the float range)
        problem = f"YAML: a value cannot be read ({e}); a number is written in decimal, e.g. 3e-4"
        raise ScenarioError(source, [problem]) from None
    return scenario_from_dict(data, source=source, base_dir=path.parent, confine=confine)


def load_resolved(path: str | Path) -> Scenario:
    """Read a run folder's resolved scenario.yaml and validate its models, without the
    file and reference checks of scenario_from_dict (reference_problems: traces, corpus, presets, budget).
    Relative paths in it (the trace copies) are read from its folder. ScenarioError names the file otherwise."""
    path = Path(path)
    source = str(path)
    try:
        data = yaml.safe_load(read_scenario_text(path))
    except yaml.YAMLError as e:
        raise ScenarioError(source, [f"not valid YAML ({e})"]) from None
    except (ValueError, OverflowError, RecursionError) as e:  # as load_scenario: a value that cannot be read
        raise ScenarioError(source, [f"YAML: a value cannot be read ({type(e).__name__})"]) from None
    try:
        s = Scenario.model_validate(data)
    except ValidationError as e:
        raise ScenarioError(source, pydantic_problems(e)) from None
    s._base_dir = path.parent
    return s


def dump_scenario(s: Scenario) -> str:
    return yaml.safe_dump(s.resolved_dict(), sort_keys=False)


def dump_for_run(s: Scenario, run_dir: Path) -> tuple[str, bool]:
    """(scenario.yaml's text for the run folder, whether it follows traces). Each trace a link follows is
    copied to RUN/traces/<link>-<direction>-<file name> (two links' `x.csv` from different folders stay two
    files) and named relative to the run folder, so the folder is self-contained, a container (which mounts
    it) finds them, and reloading the text with base_dir=run_dir gives the scenario the run follows.

    The copy holds the bytes validation read and checked (Scenario._traces), never the path read again; it is
    created new (O_EXCL, O_NOFOLLOW) with mode 0644 if the source was readable by everyone, else 0600. Every
    trace is in hand before the first file is written, so a trace that cannot be read leaves nothing behind."""
    d = s.resolved_dict()
    links = [(name, link) for name, link in d["links"].items()]
    links += [(f"workers{i}", g["link"]) for i, g in enumerate(d["workers"]) if isinstance(g.get("link"), dict)]
    by_path = {str(t.path): t for t in s._traces.values()}
    copies: list[tuple[str, TraceFile]] = []
    used: set[str] = set()
    for where, link in links:
        for direction in ("up", "down"):
            src = link.get(f"{direction}_trace")
            if not src:
                continue
            seen = by_path.get(src)
            if seen is None:  # not read at validation (a scenario built without it): read and checked once now
                seen = open_trace(Path(src))
                parse_trace(Path(src), seen.data)  # the bytes copied are a trace (validation parsed the others)
            stem = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{where}-{direction}-{Path(src).name}").lstrip(".")
            name, k = stem, 1
            while name in used:  # link names that differ only in characters replaced above
                k += 1
                name = f"{k}-{stem}"
            used.add(name)
            copies.append((name, seen))
            link[f"{direction}_trace"] = f"traces/{name}"
    if copies:
        folder = run_dir / "traces"
        folder.mkdir(mode=0o755)
        for name, seen in copies:
            fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         seen.copy_mode)
            with os.fdopen(fd, "wb") as f:
                os.fchmod(fd, seen.copy_mode)  # the umask cannot widen or narrow the rule
                f.write(seen.data)
    data_copies = _copy_data_files(s, d, run_dir)
    return yaml.safe_dump(d, sort_keys=False), bool(used) or data_copies


# The run folder's copy of each data file a scenario names: the workers read these (issue 51).
DATA_COPIES = {"data.corpus": "corpus.txt", "data.tokenizer": "tokenizer.json", "data.tokens": "tokens.bin",
               "data.val_tokens": "val_tokens.bin"}


def write_data_copies(s: Scenario, run_dir: Path) -> None:
    """RUN/data/ from this host's own validated scenario, where the run folder lacks it: a multi-host run's other
    hosts write into a local copy of node 0's folder, whose scenario.yaml names data/ (run/lifecycle.py join)."""
    if not (run_dir / "data").exists():
        _copy_data_files(s, s.resolved_dict(), run_dir)


def _copy_data_files(s: Scenario, d: dict, run_dir: Path) -> bool:
    """Copy the corpus file or folder (joined, as the workers read it), the tokenizer and the token files into
    RUN/data/, as validation read them (Scenario._files; read now, under the same rules, where it did not), and name
    them in `d` relative to the run folder: no worker opens a path from the scenario's folder. Token files are
    copied as the flat array the workers read (a parquet file's or a dataset folder's `input_ids` joined). Mode
    0644 where the source is readable by everyone, else 0600, as for traces."""
    copies: list[tuple[str, bytes, int]] = []
    for field, name in DATA_COPIES.items():
        key = field.split(".")[1]
        value = getattr(s.data, key)
        if value is None or (field == "data.corpus" and (s.data.tokens is not None or value in BUILTIN_CORPORA
                                                          or hfcorpus.is_hf(value))):
            continue
        path = Path(s.corpus_path()) if field == "data.corpus" else s.file_path(field)
        assert path is not None, field
        data = s._files.get(field)
        if data is None:  # a scenario validated without its files read: read once now, under the same rules
            data = (read_corpus(path) if field == "data.corpus" else
                    token_bytes(path.resolve(), s.data.token_dtype) if key in ("tokens", "val_tokens") else
                    s.file_bytes(field, MAX_TOKENIZER_BYTES, "tokenizer"))
        try:
            mode = 0o644 if os.stat(path).st_mode & stat.S_IROTH else 0o600
        except OSError:
            mode = 0o600
        copies.append((name, data, mode))
        d["data"][key] = f"data/{name}"
    if not copies:
        return False
    folder = run_dir / "data"
    folder.mkdir(mode=0o755)
    for name, data, mode in copies:
        fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        with os.fdopen(fd, "wb") as f:
            os.fchmod(fd, mode)
            f.write(data)
    return True


def with_overrides(s: Scenario, *, steps: int | None = None, seed: int | None = None,
                   optimizers: list[str] | None = None, time_budget: str | float | None = None,
                   tokens: str | int | None = None, target_val_loss: float | None = None,
                   repeat: int | None = None) -> Scenario:
    """A copy of `s` with CLI overrides applied and re-validated (every check but the files', which overrides do
    not change and which were checked on load). A budget given here replaces the scenario's
    (`--target-val-loss` keeps the scenario's steps or time budget as its cap unless one is given too)."""
    data = s.model_dump(mode="json", exclude_none=True)
    if s.data.tokens is None:
        data["data"]["corpus"] = s.corpus_path()
    else:
        data["data"].pop("corpus", None)
    train = data["train"]
    if steps is not None or time_budget is not None or tokens is not None:
        for k in ("steps", "time_budget", "tokens"):
            train.pop(k, None)
        if target_val_loss is None:
            train.pop("target_val_loss", None)
    if steps is not None:
        train["steps"] = steps
        train["eval_every"] = min(train.get("eval_every", 10), steps)
    if time_budget is not None:
        train["time_budget"] = time_budget
    if tokens is not None:
        train["tokens"] = tokens
    if target_val_loss is not None:
        train["target_val_loss"] = target_val_loss
        train.pop("tokens", None)
    if seed is not None:
        train["seed"] = seed
        if repeat is None:
            train.pop("seeds", None)
    if repeat is not None:
        start = train.get("seed", 0)
        train["seeds"] = list(range(start, start + repeat))
    if optimizers:
        bad = [o for o in optimizers if not valid_name(o)]
        if bad:
            raise ScenarioError("--optimizer", [f"invalid optimizer name {o!r}: {NAME_RULE}" for o in bad])
        unknown = [o for o in optimizers if o not in s.optimizers]
        if unknown:
            raise ScenarioError("--optimizer", [f"unknown optimizer {o!r}; this scenario has: "
                                                + ", ".join(s.optimizers) for o in unknown])
        data["optimizers"] = {k: v for k, v in data["optimizers"].items() if k in optimizers}
        if data["baseline"] not in optimizers:
            data["baseline"] = optimizers[0]
        if isinstance(data.get("replay"), dict):  # a replay's settings of the optimizers left out go with them
            for key in ("fraction", "codec"):
                if isinstance(data["replay"].get(key), dict):
                    data["replay"][key] = {k: v for k, v in data["replay"][key].items() if k in optimizers}
    token = FILES_CHECKED.set(True)  # the files it names were checked when this scenario was validated
    try:
        out = scenario_from_dict(data, source=f"{s.name} (with overrides)", base_dir=s._base_dir)
    finally:
        FILES_CHECKED.reset(token)
    out._traces = dict(s._traces)  # the bytes validation read: the run folder copies these
    out._files = dict(s._files)
    return out
