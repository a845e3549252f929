"""Reports, plots, cross-run comparison and the CI gate; everything here reads only stored run folders."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distro_bench.report.load import LoadedRun


def write_run_report(run_dir: Path | LoadedRun, out: Path | None = None) -> list[Path]:
    """report.md, report.html and plots/*.png for one run folder, or one already loaded (imported lazily:
    matplotlib is slow to load)."""
    from distro_bench.report.run_report import write_run_report as write

    return write(run_dir, out)


def write_comparison(run_dirs: list[Path], out: Path, allow_different: bool = False) -> list[Path]:
    from distro_bench.report.compare import write_comparison as write

    return write(run_dirs, out, allow_different=allow_different)


__all__ = ["write_comparison", "write_run_report"]
