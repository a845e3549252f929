"""Published operating points against the projection model: for every figure in
distro_bench/data/published/points.yaml (DisTrO report, INTELLECT-1, Covenant-72B, OpenDiLoCo, ...; package
data, so an installed package finds it) the scenario beside it is projected analytically (no model is built)
and the table "published figure | source | published | projected | replayed | ratio | within band? | basis |
why" is printed. The replayed column comes from replay runs (docs/replay.md): by default the ones kept in
benchmarks/replays/ (each run folder's summary.json, scenario.yaml and prediction.json), or those given with
--replayed. Runs in a few seconds (each time row is projected again per setting moved); needs no root or network.

    python benchmarks/published.py [--points FILE] [--replayed RUN_DIR ...] [--write-docs]

--write-docs replaces the table in docs/projection.md's "Published operating points" section, and the time rows'
sensitivity table (each time-model setting at -25% and +25%) after it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from distro_bench.errors import InputError
from distro_bench.studies.published import POINTS_FILE, evaluate_all, load_replay, markdown_table, sensitivity_table

REPO = Path(__file__).resolve().parents[1]
REPLAYS = REPO / "benchmarks" / "replays"  # the replay runs the docs' table shows (run folders, three files each)


def kept_replays() -> list[Path]:
    return sorted(p for p in REPLAYS.iterdir() if p.is_dir()) if REPLAYS.is_dir() else []
DOC = REPO / "docs" / "projection.md"
BEGIN, END = "<!-- published-points:begin -->", "<!-- published-points:end -->"
SENSITIVITY = "<!-- published-sensitivity:begin -->", "<!-- published-sensitivity:end -->"


def write_docs(table: str, sensitivity: str = "", doc: Path = DOC) -> None:
    text = doc.read_text()
    for (begin, end), body in (((BEGIN, END), table), (SENSITIVITY, sensitivity)):
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{begin}\n{body}\n{end}{tail}"
    doc.write_text(text)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--points", type=Path, default=POINTS_FILE)
    p.add_argument("--replayed", type=Path, action="append", default=None,
                   help="a replay's run folder for the replayed column (repeatable; default: benchmarks/replays/*)")
    p.add_argument("--write-docs", action="store_true", help="update the table in docs/projection.md")
    args = p.parse_args()
    try:
        replays = [load_replay(d) for d in (args.replayed if args.replayed is not None else kept_replays())]
        results = evaluate_all(args.points, replays)
        table, sensitivity = markdown_table(results), sensitivity_table(results)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(table + "\n\n" + sensitivity)
    if args.write_docs:
        write_docs(table, sensitivity)
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
