"""What the field checks of scenario/model.py cannot see, as readable problem lines: references between
sections (a link, hardware or baseline named but not defined), speeds, budgets, churn, regions, and the files
a scenario names (traces, corpus), which must lie in its folder unless the user opts in. scenario/loading.py
runs them after the models; each line names the field, the value and what would be valid."""

from __future__ import annotations

import os
import re
from collections import Counter
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from distro_bench.scenario import datafiles as df
from distro_bench.scenario import environ, hfcorpus, methods, presets
from distro_bench.scenario.corpus import CorpusError, read_corpus
from distro_bench.scenario.model import (
    BUILTIN_CORPORA,
    MAX_STEPS,
    MAX_WORKERS,
    MIN_COMPUTE_SCALE,
    LinkSpec,
    Scenario,
    resolve_hardware,
    resolve_model,
    show_value,
)
from distro_bench.scenario.optimizers import NoLoCoConfig
from distro_bench.scenario.regions import matrix_problems
from distro_bench.scenario.replay import replay_problems
from distro_bench.scenario.sites import sites_problems
from distro_bench.scenario.trace import TraceError, open_trace, parse_trace


def field_path(parts: tuple | list) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:  # a user's key: shown as written when plain, else quoted (control characters escaped) and cut
            text = str(p)
            out += ("." if out else "") + (text if re.fullmatch(r"[\w.:()\[\]-]{1,64}", text) else show_value(text, 40))
    return out or "(top level)"


def _known(names) -> str:
    return ", ".join(sorted(names))


def _optimizer_problem(e: dict[str, Any]) -> tuple[tuple[Any, ...], str | None]:
    """(location, message or None) of an error inside `optimizers.<name>` (scenario/methods.py validate_entries
    words them): a run named after no method points at its name, an unknown method at its `type`."""
    loc = e["loc"]
    if len(loc) == 2 and e["type"] == "optimizer_unnamed":
        return (*loc, "(name)"), None
    if len(loc) == 2 and e["type"] == "optimizer_type":
        return (*loc, "type"), None
    return loc, None


def pydantic_problems(err: ValidationError, prefix: tuple = ()) -> list[str]:
    problems = []
    for e in err.errors(include_url=False):
        # pydantic names the union member it tried (`str`, `LinkSpec`) inside the location; a user's own top-level
        # key of that name (`str: ...`) is kept, so an unknown key is always named.
        loc = e["loc"][:1] + tuple(p for p in e["loc"][1:] if p not in (
            "str", "LinkSpec", "HardwareSpec", "function-after[_jitter_fits_delay(), LinkSpec]"))
        msg = e["msg"].removeprefix("Value error, ")
        if msg.startswith("Input should") and not isinstance(e.get("input"), (dict, list)):
            msg = f"{msg} (got {show_value(e['input'], 40)})"  # the valid range, and the value given
        special = None
        if loc and loc[0] == "optimizers":
            loc, special = _optimizer_problem({**e, "loc": loc})
        if special:
            msg = special
        elif e["type"] == "extra_forbidden":
            msg = f"unknown field {loc[-1]!r}"
        elif e["type"] == "missing":
            msg = "required field is missing"
        elif e["type"] == "string_pattern_mismatch" and loc and loc[-1] == "name":
            msg = f"invalid name {e['input']!r}: letters, digits, '-', '_' and '.', starting with a letter or digit"
        problems.append(f"{field_path(prefix + loc)}: {msg}")
    # A union (str | Spec) reports the same location twice; keep one per location and message.
    return list(dict.fromkeys(problems))


def reference_problems(s: Scenario) -> list[str]:
    problems = []
    link_names = set(s.links) | set(presets.LINKS)
    hw_names = set(s.hardware) | set(presets.HARDWARE)
    for i, g in enumerate(s.workers):
        if isinstance(g.link, str) and g.link not in link_names:
            problems.append(f"workers[{i}].link: unknown link {g.link!r}; known: {_known(link_names)}")
        if isinstance(g.hardware, str) and g.hardware not in hw_names:
            problems.append(f"workers[{i}].hardware: unknown hardware {g.hardware!r}; known: {_known(hw_names)}")
        for field, spec, known in (("link", g.link, presets.LINKS), ("hardware", g.hardware, presets.HARDWARE)):
            if not isinstance(spec, str) and spec is not None and spec.preset and spec.preset not in known:
                problems.append(f"workers[{i}].{field}.preset: unknown preset {spec.preset!r}; known: {_known(known)}")
    for section, specs, known in (("links", s.links, presets.LINKS), ("hardware", s.hardware, presets.HARDWARE)):
        for name, spec in specs.items():
            if spec.preset and spec.preset not in known:
                problems.append(f"{section}.{name}.preset: unknown preset {spec.preset!r}; known: {_known(known)}")
    if not FILES_CHECKED.get():
        problems += _trace_problems(s)
    problems += _region_problems(s)
    problems += _site_problems(s)
    names = Counter(g.name for g in s.workers if g.name)
    for dup in sorted(n for n, k in names.items() if k > 1):
        problems.append(f"workers: name {dup!r} is used by more than one group")
    if s.world_size > MAX_WORKERS:
        problems.append(f"workers: {s.world_size} workers in all; at most {MAX_WORKERS} are supported")
        return problems  # the rest expands every worker
    problems += _speed_problems(s)
    problems += _budget_problems(s)
    for name, cfg in s.optimizers.items():  # NoLoCo's gossip groups must tile the world
        if isinstance(cfg, NoLoCoConfig) and s.world_size > 1 and s.world_size % cfg.group_size:
            problems.append(f"optimizers.{name}.group_size: {s.world_size} workers do not split into groups of "
                            f"{cfg.group_size}")
    files_checked = FILES_CHECKED.get()  # and the vocabularies with them
    if not files_checked:
        problems += _data_file_problems(s)
    if s.model.source != "builtin":
        problems += [] if files_checked else _vocab_problems(s)
    elif s.model.preset and s.model.preset not in presets.MODELS:
        problems.append(f"model.preset: unknown model {s.model.preset!r}; known: {_known(presets.MODELS)}")
    else:
        problems += [] if files_checked else _vocab_problems(s)
        m = resolve_model(s.model)
        missing = [k for k in ("dim", "n_layers", "n_heads", "ffn_dim") if k not in m]
        if missing:
            problems.append(f"model: {', '.join(missing)} required when no preset is given")
        else:
            if m["dim"] % m["n_heads"] or (m["dim"] // m["n_heads"]) % 2:
                problems.append(f"model.n_heads: dim {m['dim']} must split into {m['n_heads']} heads of even size")
            if s.data.seq_len > m["max_seq_len"]:
                problems.append(f"data.seq_len: {s.data.seq_len} exceeds the model's max_seq_len {m['max_seq_len']}")
    if not FILES_CHECKED.get():
        problems += _corpus_problems(s)
    if s.baseline not in s.optimizers:
        problems.append(f"baseline: {s.baseline!r} is not one of the optimizers ({_known(s.optimizers)})")
    links_used = {n.link_name for n in s.nodes() if n.link_name} if s.costs.link_classes else set()
    for name in s.costs.link_classes:
        if name not in links_used:
            problems.append(f"costs.link_classes: {name!r} is not a link the workers use ({_known(links_used)})")
    if s.checks.candidate and s.checks.candidate not in s.optimizers:
        problems.append(f"checks.candidate: {s.checks.candidate!r} is not one of the optimizers ({_known(s.optimizers)})")
    if s.replay is None and s.train.steps is not None and s.train.eval_every > s.train.steps:  # a replay evaluates nothing
        problems.append(f"train.eval_every: {s.train.eval_every} is more than train.steps ({s.train.steps})")
    return problems + _churn_problems(s) + _replay_problems(s)


def _replay_problems(s: Scenario) -> list[str]:
    if s.replay is None:
        return []
    tflops = {}
    for g in s.workers:
        try:
            name, hw = resolve_hardware(s, g.hardware)
        except (KeyError, ValidationError):  # an unknown name or preset: reported on its own
            continue
        tflops[name] = hw.tflops
    return replay_problems(s.replay, {k: c.type for k, c in s.optimizers.items()}, s.train.budget_kind,
                           s.churn is not None and s.churn.active, tflops)


def _speed_problems(s: Scenario) -> list[str]:
    """A profile's speed derived from tflops (relative to the fastest) must stay within MIN_COMPUTE_SCALE too:
    `tflops: 1e300` beside `1e-300` made a speed of 0 and a division by zero in the worker."""
    profiles = []
    for g in s.workers:
        try:
            profiles.append(resolve_hardware(s, g.hardware))
        except (KeyError, ValidationError):  # an unknown name or preset: reported on its own
            continue
    fastest = max((hw.tflops for _, hw in profiles if hw.tflops), default=None)
    problems = []
    for name, hw in dict(profiles).items():
        if hw.compute_scale is None and hw.tflops and fastest and hw.tflops / fastest < MIN_COMPUTE_SCALE:
            problems.append(f"hardware.{name}.tflops: {hw.tflops:g} is {fastest / hw.tflops:,.0f}x slower than the "
                            f"fastest profile ({fastest:g}); at most {1 / MIN_COMPUTE_SCALE:,.0f}x (give compute_scale "
                            "instead, or closer tflops)")
    return problems


def _budget_problems(s: Scenario) -> list[str]:
    """A token budget becomes steps; it is held to the same cap as `train.steps`."""
    max_steps = MAX_STEPS
    if s.train.tokens is None:
        return []
    per_step = s.world_size * s.data.batch_size * s.data.seq_len
    steps = -(-s.train.tokens // per_step)
    if steps > max_steps:
        return [(f"train.tokens: {s.train.tokens:,} tokens are {steps:,} steps at {per_step:,} tokens a "
                 f"step ({s.world_size} workers x batch_size x seq_len); at most {max_steps:,} steps, as for train.steps")]
    return []


def _corpus_problems(s: Scenario) -> list[str]:
    """The corpus: built in, `hf:` (a local dataset folder confined like a file), or a file or folder of text
    files inside the scenario's folder, within the caps of harness/distro_bench/train/data.py."""
    corpus = s.data.corpus
    if corpus in BUILTIN_CORPORA:
        return []
    if corpus.startswith("builtin:"):
        return [f"data.corpus: unknown corpus {show_value(corpus)}; built in: {_known(BUILTIN_CORPORA)}"]
    if "\0" in corpus:
        return [f"data.corpus: {show_value(corpus)} holds a NUL character; no file is named so"]
    if hfcorpus.is_hf(corpus):
        try:
            hf = hfcorpus.parse(corpus)
        except ValueError as e:
            return [f"data.corpus: {e}"]
        if hf.is_local and CONFINE.get():
            outside = _outside(s, Path(hf.dataset).expanduser(), ALLOW_CORPUS_OUTSIDE_ENV, "data.corpus",
                               "--allow-corpus-outside")
            if outside:
                return [outside]
        if hf.is_local and not (s._base_dir / Path(hf.dataset).expanduser()).is_dir():
            return [(f"data.corpus: no such dataset folder {show_value(hf.dataset)} (relative paths are read from "
                     f"{s._base_dir})")]
        if not hfcorpus.available():
            return [f"data.corpus: {show_value(corpus)} needs the datasets library: {hfcorpus.INSTALL}"]
        return []
    if CONFINE.get():
        outside = _outside(s, Path(corpus), ALLOW_CORPUS_OUTSIDE_ENV, "data.corpus", "--allow-corpus-outside")
        if outside:
            return [outside]
    confined = CONFINE.get() and os.environ.get(ALLOW_CORPUS_OUTSIDE_ENV) != "1"
    try:
        path = (s._base_dir / corpus).resolve()
        # Read once here, each file checked on its descriptor: the run copies these bytes into its folder and the
        # workers read the copy (issue 51: a folder swapped for a symlink after validation reaches no worker).
        s._files["data.corpus"] = read_corpus(path, s._base_dir.resolve() if confined else None)
    except CorpusError as e:
        return [(f"data.corpus: {e} (relative paths are read from {s._base_dir}); or use one of "
                 f"{_known(BUILTIN_CORPORA)}")]
    except (OSError, RuntimeError, ValueError) as e:
        return [f"data.corpus: {show_value(corpus)} cannot be read ({type(e).__name__}: {e})"]
    return []


def _data_file_problems(s: Scenario) -> list[str]:
    """model.hf_config, data.tokenizer, data.tokens and data.val_tokens: in the scenario's folder (like a corpus),
    regular files within their caps (scenario/datafiles.py), read once here; the bytes are kept in `s._files` and
    the run folder's copies are these bytes (scenario/loading.py dump_for_run). Token ids must lie below the
    data's vocabulary."""
    fields: list[tuple[str, int, str]] = [("data.tokenizer", df.MAX_TOKENIZER_BYTES, "tokenizer"),
                                          ("data.tokens", df.MAX_TOKEN_BYTES, "token file"),
                                          ("data.val_tokens", df.MAX_TOKEN_BYTES, "token file")]
    if isinstance(s.model.hf_config, str):
        fields.insert(0, ("model.hf_config", df.MAX_CONFIG_BYTES, "config.json"))
    problems = []
    folder = s._base_dir.resolve()
    within = None if os.environ.get(ALLOW_CORPUS_OUTSIDE_ENV) == "1" or not CONFINE.get() else folder
    for field, cap, what in fields:
        path = s.file_path(field)
        if path is None or field in s._files:
            continue
        if "\0" in str(path):
            problems.append(f"{field}: {show_value(str(path))} holds a NUL character; no file is named so")
            continue
        if CONFINE.get():
            section, key = field.split(".")
            outside = _outside(s, Path(getattr(getattr(s, section), key)).expanduser(), ALLOW_CORPUS_OUTSIDE_ENV,
                               field, "--allow-corpus-outside")
            if outside:
                problems.append(outside)
                continue
        try:
            full = path.resolve()
            if field.startswith("data.") and field != "data.tokenizer":
                data = df.token_bytes(full, s.data.token_dtype, within)
                top = df.max_token_id(data, s.data.token_dtype)
                if s.data.vocab_size is not None and top >= s.data.vocab_size:
                    problems.append(f"{field}: holds token id {top}, not below data.vocab_size {s.data.vocab_size}; "
                                    "give the vocabulary the ids come from")
            else:
                data = df.read_file(full, cap, what, within)
        except (df.DataFileError, OSError, RuntimeError) as e:
            problems.append(f"{field}: {e} (relative paths are read from {s._base_dir})")
            continue
        s._files[field] = data
    if not problems and s.model.hf_config is not None:  # a path read above, or a config written inline
        try:
            s.hf_config()
        except df.DataFileError as e:
            problems.append(str(e))
    if not problems and s.data.tokenizer is not None:
        try:
            vocab = s.data_vocab() if s.data.vocab_size is None else df.tokenizer_vocab(s._files["data.tokenizer"],
                                                                                          "data.tokenizer")
        except df.DataFileError as e:
            problems.append(str(e))
        else:
            if s.data.vocab_size is not None and s.data.vocab_size != vocab:
                problems.append(f"data.vocab_size: {s.data.vocab_size}, but the tokenizer {show_value(s.data.tokenizer)} "
                                f"has {vocab} tokens; leave vocab_size out (the tokenizer's is used)")
    return problems


def _data_words(s: Scenario) -> str:
    d = s.data
    if d.tokens is not None:
        return f"data.tokens {show_value(d.tokens)}, vocab_size {d.vocab_size}"
    if d.tokenizer is not None:
        return f"data.tokenizer {show_value(d.tokenizer)}"
    return f"data.corpus {show_value(d.corpus)} without a tokenizer: bytes, vocabulary 256"


def vocab_mismatch(s: Scenario) -> str | None:
    """The line saying that the model's vocabulary is not the data's, naming both; None where they agree. An id past
    the model's vocabulary fails the first step; rows past the data's are parameters (and bytes) that train nothing."""
    try:
        data_vocab = s.data_vocab()
        model_vocab = s.resolved_model()["vocab_size"]
    except (df.DataFileError, KeyError):  # reported by _data_file_problems
        return None
    if model_vocab == data_vocab:
        return None
    where = "model.hf_config" if s.model.source == "hf_config" else "model.vocab_size"
    return (f"{where}: the model's vocabulary is {model_vocab}, the data's {data_vocab} ({_data_words(s)}); they must "
            "be the same: " + ("leave model.vocab_size out (the data's is used) or " if where == "model.vocab_size"
                               else "") + "name data of that vocabulary")


def input_problems(s: Scenario, *, training: bool = False) -> list[str]:
    """What `validate` and a run's preflight check beyond the fields, without torch: an `hf:` hub dataset is in a
    cache or on a reachable hub (hfcorpus.reachability_problem); with `training`, the model's vocabulary is the
    data's, also for the built-in model's published shapes (valid to project, not to train on other data)."""
    problems = []
    if training and s.replay is None and (mismatch := vocab_mismatch(s)):
        problems.append(mismatch)
    if s.data.tokens is None and hfcorpus.is_hf(s.data.corpus):
        problem = hfcorpus.reachability_problem(s.data.corpus)
        if problem:
            problems.append(problem)
    return problems


def _vocab_problems(s: Scenario) -> list[str]:
    """A model from outside must take the data's vocabulary, and no model may take a smaller one. The built-in
    model with a larger one (a published shape: llama-1.2b's 32000, a published point's 128256) is valid for
    `project` and replays; a training run refuses it (train/inputs.py), and `validate` says so."""
    problem = vocab_mismatch(s)
    if problem is None or s.replay is not None:  # a replay feeds the model no data
        return []
    model_vocab, data_vocab = s.resolved_model()["vocab_size"], s.data_vocab()
    if s.model.source == "builtin" and model_vocab > data_vocab:
        return []
    return [problem]


def _outside(s: Scenario, path: Path, env: str, where: str, flag: str) -> str | None:
    """The problem of a file a scenario names outside its own folder (None when inside, or allowed)."""
    if os.environ.get(env) == "1":
        return None
    folder = s._base_dir.resolve()
    try:
        full = (s._base_dir / path).resolve()  # symlinks followed: a link out of the folder is outside
    except (OSError, RuntimeError, ValueError) as e:  # a symlink loop (RuntimeError before Python 3.13), a NUL
        return f"{where}: {show_value(str(path))} cannot be resolved ({type(e).__name__}: {e})"
    if full.is_relative_to(folder):
        return None
    return (f"{where}: {show_value(str(path))} is outside the scenario's folder {folder}; put it in that folder (or a "
            f"subfolder), or allow it with {flag} ({env}=1)")


def _churn_problems(s: Scenario) -> list[str]:
    """Churn needs ranks that exist and optimizers that train on over whichever workers are present."""
    if s.churn is None or not s.churn.active:
        return []
    problems = s.churn.problems(s.world_size)
    able = [n for n in methods.names() if _follows_membership(n)]
    for name, cfg in s.optimizers.items():
        why = cfg.churn_problem()
        if why:
            problems.append(f"optimizers.{name}: {why}; with churn: set, use one of {', '.join(able)}")
    return problems


def _follows_membership(name: str) -> bool:
    try:
        return methods.options_class(name).follows_membership
    except methods.MethodError:
        return False


def _region_problems(s: Scenario) -> list[str]:
    """Regions: every group names one when a `regions:` table is given (and only then), and the table has
    a delay for every pair of regions in use (harness/distro_bench/scenario/regions.py)."""
    used: dict[str, list[str]] = {}
    for i, g in enumerate(s.workers):
        if g.region is not None:
            used.setdefault(g.region, []).append(f"workers[{i}]")
    if s.regions is None:
        return [f"{where[0]}.region: {r!r} needs a regions: table (e.g. regions: preset:cloud-3) giving the "
                "delay between regions" for r, where in used.items()]
    problems = [f"workers[{i}].region: missing; with regions: set, every worker group names its region"
                for i, g in enumerate(s.workers) if g.region is None]
    return problems + matrix_problems(s.regions, used)


def _site_problems(s: Scenario) -> list[str]:
    """Sites: every group names one when `sites:` is given (and only then), each a site of `sites.uplinks`, and
    the WAN tables name known sites (harness/distro_bench/scenario/sites.py). Not with `regions:`: both are delays
    per destination on one uplink, and one of them is enough to say where a node is."""
    used: dict[str, list[str]] = {}
    for i, g in enumerate(s.workers):
        if g.site is not None:
            used.setdefault(g.site, []).append(f"workers[{i}]")
    if s.sites is None:
        return [f"{where[0]}.site: {site!r} needs a sites: table (sites.uplinks.{site}: {{up: 100Mbit, down: "
                "100Mbit}) giving the uplink its nodes share" for site, where in used.items()]
    problems = [f"workers[{i}].site: missing; with sites: set, every worker group names its site (one of "
                f"{', '.join(sorted(s.sites.uplinks))})" for i, g in enumerate(s.workers) if g.site is None]
    if s.regions is not None:
        problems.append("sites: not with regions: in one scenario; give the delays between sites as "
                        "sites.delays (a WAN path per pair of sites) and drop regions:")
    return problems + sites_problems(s.sites, used)


# Trace files are read (and copied into the run folder) with the harness's rights, often root's: a scenario
# may name only files in its own folder, unless the user running it opts in (the CLI's --allow-trace-outside
# sets this variable).
ALLOW_TRACE_OUTSIDE_ENV = environ.ALLOW_TRACE_OUTSIDE
# The same for a corpus file or folder (and a local `hf:` dataset folder): --allow-corpus-outside. Checked when
# a scenario *file* is loaded (load_scenario); a run folder's resolved scenario.yaml names the corpus the run
# was validated with, by its absolute path, and is loaded with confine=False by the workers.
ALLOW_CORPUS_OUTSIDE_ENV = environ.ALLOW_CORPUS_OUTSIDE
CONFINE: ContextVar[bool] = ContextVar("distro_bench_confine_corpus", default=False)
# Set while with_overrides (scenario/loading.py) re-validates a copy: its trace files and corpus were checked when the
# scenario was loaded (overrides change neither), so they are not read again; every other check runs.
FILES_CHECKED: ContextVar[bool] = ContextVar("distro_bench_files_checked", default=False)


def _trace_problems(s: Scenario) -> list[str]:
    """Every trace file a link names must lie in the scenario's folder (relative paths are read from it),
    be a regular file within the caps of harness/distro_bench/scenario/trace.py, and parse. Each is opened
    once; its bytes are kept in `s._traces` for the run folder's copy."""
    problems = []
    specs = [(f"links.{name}", spec) for name, spec in s.links.items()]
    specs += [(f"workers[{i}].link", g.link) for i, g in enumerate(s.workers) if isinstance(g.link, LinkSpec)]
    folder = s._base_dir.resolve()
    outside_ok = os.environ.get(ALLOW_TRACE_OUTSIDE_ENV) == "1"
    for where, spec in specs:
        for d in ("up", "down"):
            path = getattr(spec, f"{d}_trace")
            if not path:
                continue
            if "\0" in path:
                problems.append(f"{where}.{d}_trace: {show_value(path)} holds a NUL character; no file is named so")
                continue
            outside = _outside(s, Path(path), ALLOW_TRACE_OUTSIDE_ENV, f"{where}.{d}_trace", "--allow-trace-outside")
            if outside:
                problems.append(outside)
                continue
            full = (s._base_dir / path).resolve()
            try:
                seen = s._traces.get(path) or open_trace(full, None if outside_ok else folder)
                parse_trace(full, seen.data).windows(spec.trace_resolution)
            except TraceError as e:
                problems.append(f"{where}.{d}_trace: {e} (relative paths are read from {s._base_dir})")
                continue
            s._traces[path] = seen
    return problems


# Stand-ins for a required field that failed, so the rest of the scenario can still be checked.
_STAND_INS = {"name": "scenario", "workers": [{"count": 1}], "optimizers": {"adamw": {"lr": 1e-3}}}


def problems_beyond(data: dict, err: ValidationError, base_dir: Path) -> list[str]:
    """Reference problems of the parts of `data` that passed the field checks.

    Each failing part is replaced by a neutral stand-in (an empty link or hardware spec or an AdamW entry under
    the same name, a one-worker group, the section's defaults) and whatever else is wrong is reported, leaving out problems
    located inside a replaced part (they would describe the stand-in, not the file)."""
    data = {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v) for k, v in data.items()}
    replaced = set()
    for e in err.errors(include_url=False):
        loc = e["loc"]
        if not loc:
            return []
        top = loc[0]
        if top in ("links", "hardware") and len(loc) > 1 and isinstance(data.get(top), dict) and loc[1] in data[top]:
            data[top][loc[1]] = {}
            replaced.add(field_path(loc[:2]))
        elif top == "optimizers" and len(loc) > 1 and isinstance(data.get(top), dict) and loc[1] in data[top]:
            data[top][loc[1]] = {"type": "adamw", "lr": 1e-3}  # the name stays: the baseline may be it
            replaced.add(field_path(loc[:2]))
        elif top == "workers" and len(loc) > 1 and isinstance(loc[1], int) and isinstance(data.get(top), list):
            data[top][loc[1]] = {"count": 1}
            replaced.add(field_path(loc[:2]))
        else:
            data.pop(top, None)
            if top in _STAND_INS:
                data[top] = _STAND_INS[top]
            replaced.add(field_path(loc[:1]))
            if top == "model":  # seq_len is checked against the model
                replaced.add("data.seq_len")
    try:
        s = Scenario.model_validate(data)
    except ValidationError:
        return []
    s._base_dir = base_dir

    def inside(problem: str) -> bool:
        return any(problem.startswith(r) and problem[len(r):len(r) + 1] in (".", ":", "[") for r in replaced)

    return [p for p in reference_problems(s) if not inside(p)]

