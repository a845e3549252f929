"""The CI tiers (docs/testing.md): every test CI leaves out (tests/conftest.py EXTENDED) exists, so the table
cannot name a test that was renamed away, and says what proves the same in CI."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import EXTENDED

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("nodeid", sorted(EXTENDED))
def test_every_extended_entry_names_an_existing_test(nodeid):
    path, _, name = nodeid.partition("::")
    func = name.split("[")[0]
    tree = ast.parse((REPO / path).read_text())
    assert func in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}, f"{nodeid}: no such test"
    assert EXTENDED[nodeid].strip(), "each entry says what proves the same in CI"
