"""docs/design.md's layout matches the tree (issue 36): every package folder of harness/distro_bench/ is listed, and
every path it lists exists. The layout is the first code block under "## Layout"; each line starts with a path
(a folder ends in '/'), indented two spaces per level below the folder it sits in."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PACKAGE = REPO / "harness" / "distro_bench"


def layout_paths(text: str) -> list[str]:
    """The repo-relative paths the layout lists, folders with a trailing '/'."""
    block = re.search(r"^## Layout.*?^```\n(.*?)^```", text, re.S | re.M)
    assert block, "docs/design.md has no code block under '## Layout'"
    stack: list[str] = []  # the folder at each depth
    out = []
    for line in block.group(1).splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        assert indent % 2 == 0, f"odd indent: {line!r}"
        depth, name = indent // 2, line.split()[0]
        assert depth <= len(stack), f"{name} is indented below no folder: {line!r}"
        del stack[depth:]
        out.append("".join(stack) + name)
        if name.endswith("/"):
            stack.append(name)
    return out


def package_folders() -> set[str]:
    return {str(p.parent.relative_to(REPO)) + "/" for p in PACKAGE.rglob("__init__.py")}


def test_design_lists_every_package_folder_and_nothing_that_is_not_there():
    listed = layout_paths((REPO / "docs" / "design.md").read_text())
    missing = sorted(package_folders() - set(listed))
    assert not missing, f"docs/design.md's layout does not list {missing}"
    gone = [p for p in listed if not (REPO / p).exists()]
    assert not gone, f"docs/design.md's layout lists what the tree does not have: {gone}"


def test_the_check_catches_a_missing_folder_and_a_stale_module():
    text = "## Layout\n\n```\nharness/\n  distro_bench/\n    net/\n      link.py  x\n      gone.py  y\n```\n"
    listed = layout_paths(text)
    assert listed == ["harness/", "harness/distro_bench/", "harness/distro_bench/net/",
                      "harness/distro_bench/net/link.py", "harness/distro_bench/net/gone.py"]
    assert "harness/distro_bench/scenario/" in package_folders() - set(listed)
    assert [p for p in listed if not (REPO / p).exists()] == ["harness/distro_bench/net/gone.py"]
