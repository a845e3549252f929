"""Plot styling that survives black-and-white printing: every series differs by line style, marker or hatch,
not colour alone, and the palette's greys are distinct too."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import matplotlib

from distro_bench.errors import terminal_text
from distro_bench.results.rundir import atomic_write_bytes

matplotlib.use("Agg")  # reports are written headless, in workers' CI and over ssh

import matplotlib.pyplot as plt
import matplotlib.text

# Dark to light: distinct when printed in grey.
COLORS = ["#1b1b1b", "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9"]
LINESTYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
HATCHES = ["", "//", "..", "xx", "\\\\", "--", "oo"]

# Step-time segments: fill and hatch fixed per phase so every breakdown plot reads the same way.
SEGMENTS = {
    "compute": ("#4d4d4d", ""),
    "compress": ("#a6a6a6", "xx"),
    "communicate": ("#ffffff", "//"),
    "apply": ("#d9d9d9", ".."),
    "wait for slowest": ("#ffffff", "\\\\\\"),
    "optimizer (compress + apply)": ("#d9d9d9", ".."),
    "other": ("#f2f2f2", ""),
}

DPI = 100


def series_style(i: int) -> dict:
    """Line style for the i-th optimizer (or run) in every line plot."""
    return {"color": COLORS[i % len(COLORS)], "linestyle": LINESTYLES[i % len(LINESTYLES)],
            "marker": MARKERS[i % len(MARKERS)]}


def bar_style(i: int) -> dict:
    return {"color": COLORS[i % len(COLORS)], "hatch": HATCHES[i % len(HATCHES)], "edgecolor": "black",
            "alpha": 0.85 if i else 1.0}


def new_figure(width: float = 7.5, height: float = 4.2, ncols: int = 1, sharey: bool = False):
    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "hatch.linewidth": 0.6, "axes.grid": True,
                         "grid.alpha": 0.3})
    return plt.subplots(1, ncols, figsize=(width, height), squeeze=False, sharey=sharey)


def save(fig, path, root=None) -> None:
    """The figure as a file, drawn in memory and written without following a link at `path` or in a folder
    below `root` (default: the file's folder): savefig would write through one (results/runfiles.py)."""
    # Names on a plot come from the run folder: a control character is drawn as \\xNN, not passed to the font,
    # whose "Glyph 27 missing" warning would carry the raw ESC to the terminal (tick labels, made while the
    # figure is drawn, are not there to change yet: their warning is silenced).
    for text in fig.findobj(matplotlib.text.Text):
        shown = terminal_text(text.get_text())
        if shown != text.get_text():
            text.set_text(shown)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        fig.tight_layout()
        fig.savefig(buf, format=Path(path).suffix.lstrip(".") or "png", dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    atomic_write_bytes(Path(path), buf.getvalue(), root=root)


def note_on_axes(ax, text: str) -> None:
    """A boxed note inside the plot (for what is absent: a reader of the image alone must see it)."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=9, wrap=True,
            bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "black"})


def human_bytes(n: float | None) -> str:
    if n is None:
        return "n/a"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.3g} B"
