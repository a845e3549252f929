"""The unit tests mirror the source (issue 50 item 4, docs/testing.md): each test file sits in
tests/unit/<folder>/, where <folder> names a package or top-level module of harness/distro_bench (the code it
tests) or is `project` (the repository as a whole: docs, layout, install script, CI, benchmark scripts).
Each folder is a Python package, so two folders may hold files of the same name (tests.unit.<folder>.<name>)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
UNIT = REPO / "tests" / "unit"
PACKAGE = REPO / "harness" / "distro_bench"
CROSS_CUTTING = {"project"}


def folder_names(package: Path) -> set[str]:
    """The names a unit-test folder may take: the package's sub-packages and top-level modules, and `project`."""
    subpackages = {p.parent.name for p in package.glob("*/__init__.py")}
    modules = {p.stem for p in package.glob("*.py") if not p.stem.startswith("_")}
    return subpackages | modules | CROSS_CUTTING


def misplaced(unit: Path, allowed: set[str]) -> list[str]:
    """Each way the tree under `unit` breaks the layout, one line each (empty when it holds)."""
    problems = []
    for test in sorted(unit.rglob("test_*.py")):
        rel = test.relative_to(unit)
        if len(rel.parts) != 2:
            problems.append(f"tests/unit/{rel}: a test file belongs in tests/unit/<folder>/, one level down")
        elif rel.parts[0] not in allowed:
            problems.append(f"tests/unit/{rel}: folder {rel.parts[0]!r} names no package or module of "
                            f"distro_bench; valid: {', '.join(sorted(allowed))}")
    for folder in sorted(p for p in unit.iterdir() if p.is_dir() and p.name != "__pycache__"):
        if not (folder / "__init__.py").is_file():
            problems.append(f"tests/unit/{folder.name}/: no __init__.py (its tests' module names would clash)")
    return problems


def test_every_unit_test_sits_in_the_folder_of_a_package_or_in_project():
    assert misplaced(UNIT, folder_names(PACKAGE)) == []


def test_the_folder_names_are_the_packages_and_modules_of_distro_bench():
    names = folder_names(PACKAGE)
    assert {"scenario", "train", "net", "results", "report", "run", "backends", "api", "project"} <= names
    assert "__init__" not in names and "__main__" not in names


def test_a_flat_file_a_folder_without_a_package_and_a_missing_init_are_each_named(tmp_path):
    (tmp_path / "test_flat.py").write_text("")
    (tmp_path / "misc").mkdir()
    (tmp_path / "misc" / "__init__.py").write_text("")
    (tmp_path / "misc" / "test_a.py").write_text("")
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "test_b.py").write_text("")
    (tmp_path / "net" / "deeper").mkdir()
    (tmp_path / "net" / "deeper" / "test_c.py").write_text("")
    problems = misplaced(tmp_path, {"net", "project"})
    assert problems == [
        "tests/unit/misc/test_a.py: folder 'misc' names no package or module of distro_bench; valid: net, project",
        "tests/unit/net/deeper/test_c.py: a test file belongs in tests/unit/<folder>/, one level down",
        "tests/unit/test_flat.py: a test file belongs in tests/unit/<folder>/, one level down",
        "tests/unit/net/: no __init__.py (its tests' module names would clash)",
    ]
