"""No import cycle even counting imports that exist for type checking only (`if TYPE_CHECKING:`) and imports inside
functions (issue 36). scripts/structure.py ignores both when it layers the package; a type two modules share, with
each naming the other, belongs in a module below both (api.Run lives in report/load.py beside LoadedRun, the
sweep's result types in studies/sweep_grid.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import load_script

REPO = Path(__file__).resolve().parents[3]
PACKAGE = REPO / "harness" / "distro_bench"
structure = load_script(REPO / "scripts" / "structure.py")


class _EveryImport(structure._Visitor):
    def visit_If(self, node: ast.If) -> None:  # the TYPE_CHECKING block's imports count too
        self.generic_visit(node)


def _edges(package: Path) -> tuple[list[str], dict[str, set[str]]]:
    files = {structure.module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    edges: dict[str, set[str]] = {m: set() for m in files}
    for name, path in files.items():
        v = _EveryImport(name, path.name == "__init__.py", set(files))
        v.visit(ast.parse(path.read_text(), str(path)))
        edges[name] |= {i.target for i in v.found if i.target in files and i.target != name}
    return sorted(files), edges


def test_no_module_cycle_counting_type_only_and_late_imports():
    assert structure.cycles(*_edges(PACKAGE)) == []


def test_a_type_only_cycle_is_caught(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.a import A\n")
    assert structure.cycles(*_edges(pkg)) == [["pkg.a", "pkg.b"]]
