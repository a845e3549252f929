"""Render a Document as Markdown; figures are linked relative to the Markdown file."""

from __future__ import annotations

import os
import re
from pathlib import Path

from distro_bench.report.document import Banner, Bullets, Document, Figure, Para, Table

_BANNER = {"error": "**FAILED / INCOMPLETE:**", "warn": "**Note:**", "info": "**Note:**"}


# Text in a report may carry what a scenario's author wrote (its description, names, a corpus spec); report.md must
# show it as text, never as HTML (`<script>`), a link or image (`[x](url)`, `![](http://tracker)`), an emoji
# shortcode (`hf:a::b`), emphasis or a heading. Only what could start markup is escaped, so the file stays
# readable as plain text; the report's own `code spans` are kept (unless they hold a `<`).
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1)[^<])+?\1", re.S)
_INLINE = re.compile(r"\\(?=[!-/:-@\[-`{-~])|[*\[\]|`]|<(?=[A-Za-z/!?])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|&(?=#?\w+;)|~~"
                     r"|:(?=[\w+-]*[A-Za-z][\w+-]*:)")
# What makes a line a heading, quote, list item or a setext underline (the escape goes before its mark).
_LINE_START = re.compile(r"^([ \t]*)(?:(?=[#+*-](?:[ \t]|$))|(?=>)|(?=[=-]+[ \t]*$)|(\d+)(?=[.)](?:[ \t]|$)))", re.M)


def _escape_plain(plain: str, block: bool) -> str:
    out = _INLINE.sub(lambda m: {"<": "&lt;", "&": "&amp;", "~~": "\\~\\~"}.get(m.group(), "\\" + m.group()), plain)
    return _LINE_START.sub(lambda m: m.group(1) + (m.group(2) or "") + "\\", out) if block else out


def text(value: object, block: bool = True) -> str:
    """`value` as Markdown that renders as the same characters (control characters dropped). `block`: it
    starts a line (a paragraph), where `# `, `> `, `- ` and `1. ` would make a heading, quote or list."""
    raw = "".join(c for c in str(value) if c in "\n\t" or (ord(c) >= 32 and not 0x7f <= ord(c) <= 0x9f))
    parts, last = [], 0
    for m in _CODE_SPAN.finditer(raw):
        parts += [_escape_plain(raw[last:m.start()], block), m.group()]
        last = m.end()
    parts.append(_escape_plain(raw[last:], block))
    return "".join(parts)


def _cell(value: object) -> str:
    """Text inside a line (a table cell, a list item, a title): its newlines become spaces."""
    return text(str(value).replace("\n", " "), block=False)


def _table(t: Table) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in t.headers) + " |",
             "|" + "|".join("---:" if t.is_numeric(i) else "---" for i in range(len(t.headers))) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in t.rows]
    return lines


def render(doc: Document, md_path: Path) -> str:
    out = [f"# {_cell(doc.title)}", ""]
    if doc.subtitle:
        out += [text(doc.subtitle), ""]
    for b in doc.banners:
        out += [f"> {_BANNER.get(b.kind, '**Note:**')} {_cell(b.text)}", ""]
    for section in doc.sections:
        out += [f"## {_cell(section.title)}", ""]
        for block in section.blocks:
            if isinstance(block, Para):
                out += [text(block.text), ""]
            elif isinstance(block, Bullets):
                out += [f"- {_cell(item)}" for item in block.items] + [""]
            elif isinstance(block, Table):
                out += [*_table(block), ""]
            elif isinstance(block, Figure):
                rel = Path(os.path.relpath(block.path, md_path.parent)).as_posix()
                out += [f"![{_cell(block.alt)}]({rel})", "", f"*{_cell(block.caption)}*", ""]
            elif isinstance(block, Banner):
                out += [f"> {_BANNER.get(block.kind, '**Note:**')} {_cell(block.text)}", ""]
    return "\n".join(out).rstrip() + "\n"
