"""Issue 51 item 8: every string from a run folder or a scenario is escaped for the terminal in every command's
output: control characters and bidirectional overrides shown visibly (errors.terminal_text, the one escape),
Rich markup shown as text. `check` printed status.json's `state` raw (an OSC title and a screen clear); notes
escaped markup only; optimizer names with ESC or U+202E reached `check`'s output."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from distro_bench.errors import terminal_text
from tests.unit.runfolders import make_run

ESC = "\x1b]0;pwned\x07\x1b[2J"
BIDI = "\u202e"
MARKUP = "[bold]x[/bold]"
RAW = ("\x1b", "\x07", BIDI, "\x9b")


@pytest.fixture
def forged(tmp_path):
    run = make_run(tmp_path, "run", steps=6)
    df = pd.read_parquet(run / "metrics.parquet")
    df["optimizer"] = df["optimizer"].replace("distro", "dis" + ESC + BIDI + MARKUP)
    df.to_parquet(run / "metrics.parquet", index=False)
    s = json.loads((run / "summary.json").read_text())
    s["run"].update(state="complete" + ESC, reason="r" + ESC, scenario="sc" + ESC + MARKUP)
    s["target"]["how"] = "how" + ESC + "[red]x[/red]"
    (run / "summary.json").write_text(json.dumps(s))
    (run / "status.json").write_text(json.dumps({"state": "comp" + ESC + BIDI + "\nPASS all", "reason": "why" + ESC}))
    return run


def test_terminal_text_shows_controls_and_bidi_visibly():
    assert terminal_text("a\x1b[2Jb\u202ec\u2066d\x9be\u200ff") == "a\\x1b[2Jb\\u202ec\\u2066d\\x9be\\u200ff"
    assert terminal_text("a\nb\tc") == "a\nb\tc" and terminal_text("a\nb", oneline=True) == "a\\x0ab"


@pytest.mark.parametrize("args", [["check"], ["check", "--json"], ["report"], ["export", "--to", "mlflow"],
                                  ["report", "SELF", "--out", "CMP"]])
def test_no_command_passes_a_control_character_or_markup_from_a_run_folder(cli, forged, tmp_path, args):
    argv = [args[0], forged, *[forged if a == "SELF" else tmp_path / "cmp" if a == "CMP" else a for a in args[1:]]]
    result = cli(*argv)
    assert result.exit_code in (0, 1), result.output
    out = result.output
    assert not [c for c in RAW if c in out], out
    if args == ["check"]:
        assert "dis\\x1b]0;pwned\\x07\\x1b[2J\\u202e" + MARKUP in out  # visible, and the markup as text
        assert "measured: comp\\x1b]0;pwned\\x07\\x1b[2J\\u202e\\x0aPASS all" in out.replace("\n", "")
        assert "\nPASS all" not in out  # a forged newline does not print a line of its own
