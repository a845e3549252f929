"""Published operating points against the projection model: for every figure in
distro_bench/data/published/points.yaml (DisTrO report, INTELLECT-1, Covenant-72B, OpenDiLoCo, ...; package
data, so an installed package finds it) the scenario beside it is projected analytically (no model is built)
and the table "published figure | source | published | projected | replayed | ratio | within band? | basis |
why" is printed (replayed: "not run" until replay mode exists). Runs in a second on a laptop; needs no root or
network.

    python benchmarks/published.py [--points FILE] [--write-docs]

--write-docs replaces the table in docs/projection.md's "Published operating points" section.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from distro_bench.errors import InputError
from distro_bench.studies.published import POINTS_FILE, evaluate_all, markdown_table

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "projection.md"
BEGIN, END = "<!-- published-points:begin -->", "<!-- published-points:end -->"


def write_docs(table: str, doc: Path = DOC) -> None:
    text = doc.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--points", type=Path, default=POINTS_FILE)
    p.add_argument("--write-docs", action="store_true", help="update the table in docs/projection.md")
    args = p.parse_args()
    try:
        table = markdown_table(evaluate_all(args.points))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(table)
    if args.write_docs:
        write_docs(table)
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
