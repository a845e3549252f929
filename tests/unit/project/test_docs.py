"""The docs cannot drift from the code: the generated parts are regenerated and compared, and every
relative link in README.md and docs/*.md points to a file that exists (and an anchor that exists)."""

from __future__ import annotations

import importlib.util
import re

import pytest

from tests.helpers import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Pages other helpers of this release write; listed in the README before they land (remove once merged).
PENDING = {"host-requirements.md", "link-emulation.md", "python-api.md", "export.md", "fair-comparison.md",
           "sweeps.md", "reports.md", "optimizers.md", "distro.md"}


def _gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("rel", list(_gen_docs().TARGETS))
def test_generated_docs_match_the_code(rel):
    gen = _gen_docs()
    current = (REPO / rel).read_text()
    assert gen.generate(rel, current) == current, f"{rel} is out of date: run `python scripts/gen_docs.py`"


def test_summary_keys_are_all_listed():
    from distro_bench.results.metrics import SUMMARY_KEYS

    text = (REPO / "docs" / "run-folder.md").read_text()
    assert all(f"`{k}`" in text for k in SUMMARY_KEYS)


def _anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes."""
    out = set()
    for h in re.findall(r"(?m)^#{1,6} +(.+?) *$", text):
        out.add(re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-"))
    return out


def _links(text: str) -> list[str]:
    text = re.sub(r"(?s)```.*?```", "", text)  # links inside code blocks are not links
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("doc", DOCS, ids=[d.relative_to(REPO).as_posix() for d in DOCS])
def test_relative_links_resolve(doc):
    bad = []
    for link in _links(doc.read_text()):
        if re.match(r"[a-z]+:", link):  # http:, https:, mailto:
            continue
        path, _, anchor = link.partition("#")
        target = (doc.parent / path).resolve() if path else doc
        if path and target.name in PENDING and target.parent == REPO / "docs" and not target.exists():
            continue
        if not target.exists():
            bad.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target.read_text()):
            bad.append(f"{link}: no heading #{anchor} in {target.relative_to(REPO)}")
    assert not bad, f"{doc.relative_to(REPO)}: " + "; ".join(bad)


def test_readme_is_short_and_starts_with_the_two_commands():
    text = (REPO / "README.md").read_text()
    assert len(text.encode()) <= 10_500
    block = re.search(r"```bash\n(.*?)```", text, re.S).group(1).splitlines()
    assert block[0].startswith("./install.sh") and "distro-bench run scenarios/home-dsl.yaml" in block[0]
    assert "pytest" in block[1]
    ci = (REPO / ".ci" / "run").read_text()
    assert block[1] in ci, ".ci/run must run the README's test command exactly"


ENTRY_POINT_GROUPS = {"distro_bench.optimizers"}  # names of entry-point groups, not modules


def test_every_python_name_the_docs_give_imports():
    # Issue 52: docs/python-api.md named distro_bench.run.progress.PlainProgress (it is in distro_bench.cli.progress)
    import importlib

    bad = []
    for doc in DOCS:
        for ref in re.findall(r"`(distro_bench(?:\.[A-Za-z_]\w*)+)(?:\(\))?`", doc.read_text()):
            if ref in ENTRY_POINT_GROUPS:
                continue
            parts = ref.split(".")
            for i in range(len(parts), 0, -1):  # the longest importable module, then attributes
                try:
                    obj = importlib.import_module(".".join(parts[:i]))
                except ImportError:
                    continue
                for attr in parts[i:]:
                    obj = getattr(obj, attr, None)
                if obj is None:
                    bad.append(f"{doc.name}: {ref}")
                break
            else:
                bad.append(f"{doc.name}: {ref}")
    assert not bad, bad
