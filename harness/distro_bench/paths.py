"""Where this harness finds itself: the one place that looks at where the package lies on disk.

`PACKAGE_DIR` is the import package (`.../distro_bench`), `IMPORT_ROOT` the folder that holds it (`harness/` in
a checkout, `site-packages/` when installed): what a child process puts on PYTHONPATH to import this very copy.
`source_tree()` is the checkout (pyproject.toml beside `harness/`), None for a non-editable install: the files
that only a checkout has (containers/, scenarios/) are looked up through it.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
IMPORT_ROOT = PACKAGE_DIR.parent


def source_tree() -> Path | None:
    """The checkout this package runs from (harness/distro_bench under it), or None when it is installed."""
    root = IMPORT_ROOT.parent
    return root if IMPORT_ROOT.name == "harness" and (root / "pyproject.toml").is_file() else None
