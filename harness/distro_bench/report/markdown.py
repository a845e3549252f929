"""Render a Document as Markdown; figures are linked relative to the Markdown file."""

from __future__ import annotations

import os
from pathlib import Path

from distro_bench.report.document import Banner, Bullets, Document, Figure, Para, Table

_BANNER = {"error": "**FAILED / INCOMPLETE:**", "warn": "**Note:**", "info": "**Note:**"}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(t: Table) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in t.headers) + " |",
             "|" + "|".join("---:" if t.is_numeric(i) else "---" for i in range(len(t.headers))) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in t.rows]
    return lines


def render(doc: Document, md_path: Path) -> str:
    out = [f"# {doc.title}", ""]
    if doc.subtitle:
        out += [doc.subtitle, ""]
    for b in doc.banners:
        out += [f"> {_BANNER.get(b.kind, '**Note:**')} {b.text}", ""]
    for section in doc.sections:
        out += [f"## {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, Para):
                out += [block.text, ""]
            elif isinstance(block, Bullets):
                out += [f"- {item}" for item in block.items] + [""]
            elif isinstance(block, Table):
                out += [*_table(block), ""]
            elif isinstance(block, Figure):
                rel = Path(os.path.relpath(block.path, md_path.parent)).as_posix()
                out += [f"![{block.alt}]({rel})", "", f"*{block.caption}*", ""]
            elif isinstance(block, Banner):
                out += [f"> {_BANNER.get(block.kind, '**Note:**')} {block.text}", ""]
    return "\n".join(out).rstrip() + "\n"
