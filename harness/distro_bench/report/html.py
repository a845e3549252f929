"""Render a Document as one self-contained HTML file: inline CSS, PNGs as data URIs, no script, no network."""

from __future__ import annotations

import base64
from html import escape

from distro_bench.report.document import Banner, Bullets, Document, Figure, Para, Table
from distro_bench.results import runfiles

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;max-width:1100px;
margin:2em auto;padding:0 1em;color:#1b1b1b;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
.subtitle{color:#555}
.banner{border:2px solid #333;border-left-width:8px;padding:.6em .9em;margin:1em 0;background:#f6f6f6}
.banner.error{border-color:#b00020;background:#fdecee;font-weight:600}
.banner.warn{border-color:#8a6d00;background:#fff8e1}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em;display:block;overflow-x:auto}
th,td{border:1px solid #bbb;padding:.3em .55em;text-align:left;vertical-align:top}
th{background:#eee}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.PASS{font-weight:700}td.FAIL{font-weight:700;color:#b00020;text-decoration:underline}
figure{margin:1.2em 0}figure img{max-width:100%;height:auto;border:1px solid #ddd}
figcaption{font-size:.9em;color:#444}
@media print{body{max-width:none}.banner{break-inside:avoid}figure{break-inside:avoid}}
"""


def _data_uri(path) -> str:
    """The PNG just written beside the report, read back without following a link (results/runfiles.py)."""
    data = runfiles.read_bytes(path.parent, path.name, "plot.png")
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _table(t: Table) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in t.headers)
    rows = []
    for row in t.rows:
        cells = []
        for i, c in enumerate(row):
            cls = ["num"] if t.is_numeric(i) else []
            if c in ("PASS", "FAIL"):
                cls.append(c)
            attr = f' class="{" ".join(cls)}"' if cls else ""
            cells.append(f"<td{attr}>{escape(str(c))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _block(block) -> str:
    if isinstance(block, Para):
        return f"<p>{escape(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{escape(i)}</li>" for i in block.items) + "</ul>"
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Figure):
        return (f'<figure><img src="{_data_uri(block.path)}" alt="{escape(block.alt)}">'
                f"<figcaption>{escape(block.caption)}</figcaption></figure>")
    if isinstance(block, Banner):
        return f'<div class="banner {escape(block.kind)}" role="alert">{escape(block.text)}</div>'
    raise TypeError(f"unknown report block {type(block).__name__}")


def render(doc: Document) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{escape(doc.title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{escape(doc.title)}</h1>"]
    if doc.subtitle:
        parts.append(f'<p class="subtitle">{escape(doc.subtitle)}</p>')
    parts += [_block(b) for b in doc.banners]
    for section in doc.sections:
        parts.append(f"<section><h2>{escape(section.title)}</h2>")
        parts += [_block(b) for b in section.blocks]
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
