"""The files a scenario needs on every host of a multi-host run: the scenario file and every local file it names,
each at the path relative to the scenario's folder that the scenario reads it from (the Slurm script copies them
next to itself, the Kubernetes manifest carries them in a ConfigMap)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from distro_bench.errors import InputError
from distro_bench.scenario import hfcorpus
from distro_bench.scenario.model import BUILTIN_CORPORA, LinkSpec, Scenario


@dataclass(frozen=True)
class ShippedFile:
    rel: str  # POSIX path relative to the scenario's folder, as the scenario names it
    src: Path


def shipped_files(scenario: Scenario, scenario_path: Path) -> list[ShippedFile]:
    """The scenario file and every local file it names (link traces, a corpus file, token files, a tokenizer, a
    model config), each at the path
    relative to the scenario's folder that the scenario reads it from. A file outside that folder cannot
    travel with it (the copy would name another path): InputError saying so."""
    folder = scenario_path.parent
    files = [ShippedFile(scenario_path.name, scenario_path)]
    named: list[tuple[str, str]] = []
    links = [(f"links.{n}", spec) for n, spec in scenario.links.items()]
    links += [(f"workers[{i}].link", g.link) for i, g in enumerate(scenario.workers) if isinstance(g.link, LinkSpec)]
    for where, spec in links:
        named += [(f"{where}.{d}_trace", getattr(spec, f"{d}_trace")) for d in ("up", "down")
                  if getattr(spec, f"{d}_trace")]
    corpus = scenario.data.corpus
    if scenario.data.tokens is None and corpus not in BUILTIN_CORPORA and not hfcorpus.is_hf(corpus) \
            and (folder / corpus).is_file():
        named.append(("data.corpus", corpus))
    # the model's and data's own files (docs/models-and-data.md): a token file, a tokenizer, a transformers config
    for where in ("data.tokens", "data.val_tokens", "data.tokenizer", "model.hf_config"):
        section, key = where.split(".")
        value = getattr(getattr(scenario, section), key)
        if isinstance(value, str) and (folder / value).is_file():
            named.append((where, value))
    seen = {scenario_path.name}
    for where, text in named:
        rel = PurePosixPath(os.path.normpath(text).replace(os.sep, "/"))
        if rel.is_absolute() or rel.parts[:1] == ("..",):
            raise InputError(f"{where}: {text!r} lies outside the scenario's folder {folder}, so the recipe cannot "
                             "ship it with the scenario; copy it into that folder and name it relative to it")
        if str(rel) not in seen:
            seen.add(str(rel))
            files.append(ShippedFile(str(rel), folder / rel))
    return files
