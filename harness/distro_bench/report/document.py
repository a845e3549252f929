"""A report as plain blocks, rendered by markdown.py and html.py: one content builder, two formats."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Banner:
    """A note that must not be missed (run failed, environments differ); kind: error | warn | info."""

    kind: str
    text: str


@dataclass
class Para:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    # Columns holding numbers are right-aligned; by default every column but the first.
    numeric: list[bool] | None = None

    def is_numeric(self, i: int) -> bool:
        return self.numeric[i] if self.numeric is not None else i > 0


@dataclass
class Figure:
    path: Path
    alt: str
    caption: str


# What a section holds, in order.
Block = Para | Bullets | Table | Figure


@dataclass
class Section:
    title: str
    blocks: list = field(default_factory=list)  # of Block; plain `list`, so a list[Figure] is one too


@dataclass
class Document:
    title: str
    subtitle: str = ""
    banners: list[Banner] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
