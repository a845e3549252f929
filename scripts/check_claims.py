"""The results pages' claims against the committed per-seed results behind them (issue 49).

    python scripts/check_claims.py            # exit 1 when a page states an order or a "distinct" its data does not back

A results page (docs/shootout-*.md, docs/size-ladder.md, the README's and optimizers.md's summaries of them)
states orders between methods ("AdamW < DiLoCo < DisTrO") and "distinct" claims. Two ways a statement is backed:

1. **An all-pairs table** (a table headed `| size | pair | a - b [95% interval] | p | Holm p | order at 0.05 |`,
   as benchmarks/size_ladder.py writes them), registered in PAIR_TABLES with the caption above it, its figure
   and the committed summary.json behind each rung. Every row is recomputed from the per-seed results with
   results/multiple.py `all_pairs` (paired by seed, Holm over all the pairs of the rung's run): the gap and
   its interval, p and Holm p must agree at the printed decimals, the verdict must be the test's ("a < b": a's
   figure lower, Holm p < 0.05; "not distinct": Holm p >= 0.05 or no test, i.e. no evidence of a difference, not
   evidence of equality), and the table must hold every pair of the family, no more.
2. **A registered claim** in CLAIMS with the committed summary.json(s) it rests on and the figure it is about:
   - an order (`order`): every pair of it, not only neighbours, Holm-corrected over ALL pairs of the run's
     methods: "A < B" means A's figure is lower, family-wise at 5%;
   - `not_distinct`: no pair of the methods has Holm p < 0.05 over all pairs (no order between them is shown);
   - "the best" (`best`): lower than every other method in that family;
   - "distinct from the baseline" (`vs_baseline`): the method's Holm-adjusted p against the baseline, over the
     run's m - 1 comparisons with it, under 0.05 (and `not_vs_baseline` for one said not to be);
   - `definition` / `not_claimed`: text that uses the words without claiming (a legend, "an order ... is not
     supported"), recorded so that every use is accounted for.
   A claim about one pair may also register the p it quotes per source (`quoted`, as printed; `quoted_holm`
   when it is the Holm-adjusted one), checked at the printed decimals.

The page is scanned for chains of two or more method names joined by `<` or `>` and for the word "distinct":
each must lie inside a checked table row or a registered claim's text, else it is an unbacked statement and the
script fails. A registered claim whose text is no longer on its page is reported as stale (not a failure: the
page changed; the entry should go). Runs in `.ci/run`'s lint lane.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "harness"))

from distro_bench.report.shootout import seed_times  # noqa: E402
from distro_bench.results.multiple import ALPHA, AllPairs, all_pairs, compare_family  # noqa: E402
from distro_bench.results.stats import finite, t_interval  # noqa: E402
from distro_bench.results.summary import migrate  # noqa: E402

SHOOTOUT = "benchmarks/shootout/2026-12-04/summary.json"
SHOOTOUT_06 = "benchmarks/shootout/2026-12-06/summary.json"  # re-tuned rates, own-evaluation reading
LADDER = {"tiny": "benchmarks/ladder/2026-12-04/tiny/summary.json",
          "small": "benchmarks/ladder/2026-12-04/small-tuned/summary.json",
          "medium": "benchmarks/ladder/2026-12-05/medium-tuned/summary.json",
          "small-tiny-rates": "benchmarks/ladder/2026-12-04/small-tiny-rates/summary.json",
          "time-tiny": "benchmarks/ladder/2026-12-05/time-tiny/summary.json",
          "time-small": "benchmarks/ladder/2026-12-05/time-small/summary.json"}
# The figures a claim can be about: time to target (restricted, compared as ratios) or a per-seed loss key.
TIME, EQUAL_TIME, FINAL = "time_to_target_s", "val_loss_at_equal_time", "final_val_loss"

PAGES = ["README.md", "docs/optimizers.md", "docs/shootout-2026-12-06.md", "docs/shootout-2026-12-04.md",
         "docs/shootout-2026-12-02.md",
         "docs/size-ladder.md"]


@dataclass(frozen=True)
class Claim:
    page: str
    text: str  # a passage of the page (whitespace-insensitive) that holds the statement(s)
    kind: str  # order | not_distinct | best | vs_baseline | not_vs_baseline | definition | not_claimed
    figure: str = ""
    sources: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()  # the order (lowest first), the best, or the methods compared with the baseline
    quoted: tuple[str, ...] = ()  # a one-pair claim's p per source, as the page prints it
    quoted_holm: bool = False  # `quoted` is the Holm-adjusted p (over all pairs), not the test's own


@dataclass(frozen=True)
class PairTable:
    """An all-pairs table of a page: the caption line above it (its start), the figure, rung -> summary.json."""

    page: str
    caption: str
    figure: str
    rungs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GapTable:
    """A gap-to-baseline table of a page (`| size | m: val loss | m: gap to baseline | ...`): the heading above it
    (its start), the figure, rung -> summary.json. Its `*` is a "distinct from the baseline" claim."""

    page: str
    heading: str
    figure: str
    rungs: dict[str, str] = field(default_factory=dict)


GAP_TABLES: list[GapTable] = [
    GapTable("docs/size-ladder.md", "## Val loss at equal tokens", FINAL,
             {"tiny": LADDER["tiny"], "small": LADDER["small"], "medium": LADDER["medium"]}),
    GapTable("docs/size-ladder.md", "## Val loss at equal time", EQUAL_TIME,
             {"tiny": LADDER["time-tiny"], "small": LADDER["time-small"]}),
    GapTable("docs/size-ladder.md", "## Tuning per rung matters", FINAL, {"small": LADDER["small-tiny-rates"]}),
]

PAIR_TABLES: list[PairTable] = [
    PairTable("docs/size-ladder.md", "Every pair at equal tokens", FINAL,
              {"tiny": LADDER["tiny"], "small": LADDER["small"], "medium": LADDER["medium"]}),
    PairTable("docs/size-ladder.md", "Every pair at equal time", EQUAL_TIME,
              {"tiny": LADDER["time-tiny"], "small": LADDER["time-small"]}),
]

# The shoot-out's methods that each results page says beat AdamW by time (all but PowerSGD) and by loss (all).
_BEAT_ADAMW_BY_TIME = ("demo-ref", "desloc", "diloco", "distro", "distro-eager", "distro-overlap",
                       "distro-overlap-lr1.5e-3", "muloco", "noloco", "sparseloco", "sparta", "streaming-diloco")
_BEAT_ADAMW_BY_LOSS = tuple(sorted((*_BEAT_ADAMW_BY_TIME, "powersgd")))


def _shootout_claims(page: str, source: str) -> list[Claim]:
    """The claims every shoot-out page makes in the same words, each checked against that page's own run."""
    return [
        Claim(page, "* = distinct at family-wise 5%", "definition"),
        Claim(page, "Every method but PowerSGD reaches the target sooner than AdamW", "vs_baseline", TIME, (source,),
              _BEAT_ADAMW_BY_TIME),
        Claim(page, "every method has a lower val loss at equal time than AdamW", "vs_baseline", EQUAL_TIME,
              (source,), _BEAT_ADAMW_BY_LOSS),
        Claim(page, "PowerSGD's time is not distinguishable from AdamW's", "not_vs_baseline", TIME, (source,),
              ("powersgd",)),
        Claim(page, "No method is distinct from every other", "not_claimed"),
    ]


CLAIMS: list[Claim] = [
    *_shootout_claims("docs/shootout-2026-12-06.md", SHOOTOUT_06),
    *_shootout_claims("docs/shootout-2026-12-04.md", SHOOTOUT),
    Claim("docs/shootout-2026-12-04.md", 'checks every order and "distinct" on this page', "definition"),
    Claim("docs/shootout-2026-12-04.md", "This page said before that MuLoCo was best and distinct from all", "not_claimed"),
    # README.md, docs/optimizers.md: their summaries of the shoot-out
    Claim("README.md", "all but PowerSGD beat AdamW", "vs_baseline", TIME, (SHOOTOUT_06,), _BEAT_ADAMW_BY_TIME),
    Claim("README.md", "no single best", "not_claimed"),
    Claim("docs/optimizers.md", "no method is distinct from every other", "not_claimed"),
    # docs/size-ladder.md's prose (its tables are checked row by row: PAIR_TABLES)
    *[Claim("docs/size-ladder.md", "at every rung DiLoCo and DisTrO each end lower than SparseLoCo, and AdamW lower "
            "than SparseLoCo", "order", FINAL, (LADDER["tiny"], LADDER["small"], LADDER["medium"]), (m, "sparseloco"))
      for m in ("diloco", "distro", "adamw")],
    Claim("docs/size-ladder.md", "AdamW lower than DiLoCo at small and medium (at tiny Holm p = 0.054 over the six "
          "pairs", "order", FINAL, (LADDER["small"], LADDER["medium"]), ("adamw", "diloco")),
    Claim("docs/size-ladder.md", "AdamW lower than DiLoCo at small and medium (at tiny Holm p = 0.054 over the six "
          "pairs", "not_distinct", FINAL, (LADDER["tiny"],), ("adamw", "diloco"), ("0.054",), quoted_holm=True),
    Claim("docs/size-ladder.md", "lower than DisTrO at small only (tiny 0.054, medium 0.112", "order", FINAL,
          (LADDER["small"],), ("adamw", "distro")),
    Claim("docs/size-ladder.md", "lower than DisTrO at small only (tiny 0.054, medium 0.112", "not_distinct", FINAL,
          (LADDER["tiny"], LADDER["medium"]), ("adamw", "distro"), ("0.054", "0.112"), quoted_holm=True),
    Claim("docs/size-ladder.md", "**DiLoCo and DisTrO are not distinct at any rung** (paired p = 0.51, 0.11, 0.92)",
          "not_distinct", FINAL, (LADDER["tiny"], LADDER["small"], LADDER["medium"]), ("diloco", "distro"),
          ("0.51", "0.11", "0.92")),
    *[Claim("docs/size-ladder.md", "every method ends lower than AdamW at both rungs (Holm p <= 0.037)", "order",
            EQUAL_TIME, (LADDER["time-tiny"], LADDER["time-small"]), (m, "adamw"))
      for m in ("diloco", "distro", "sparseloco")],
    Claim("docs/size-ladder.md", "at tiny SparseLoCo ends lower than DiLoCo and than DisTrO (Holm p 0.036, 0.019)",
          "order", EQUAL_TIME, (LADDER["time-tiny"],), ("sparseloco", "diloco"), ("0.036",), quoted_holm=True),
    Claim("docs/size-ladder.md", "at tiny SparseLoCo ends lower than DiLoCo and than DisTrO (Holm p 0.036, 0.019)",
          "order", EQUAL_TIME, (LADDER["time-tiny"],), ("sparseloco", "distro"), ("0.019",), quoted_holm=True),
    Claim("docs/size-ladder.md", "DiLoCo and DisTrO are not distinct (p = 0.78)", "not_distinct", EQUAL_TIME,
          (LADDER["time-tiny"],), ("diloco", "distro"), ("0.78",)),
    Claim("docs/size-ladder.md", "At small **no order among the three is shown**", "not_distinct", EQUAL_TIME,
          (LADDER["time-small"],), ("diloco", "distro", "sparseloco")),
    Claim("docs/size-ladder.md", "DisTrO against SparseLoCo p = 0.067 (0.20 after Holm)", "not_distinct", EQUAL_TIME,
          (LADDER["time-small"],), ("distro", "sparseloco"), ("0.067",)),
    Claim("docs/size-ladder.md", "DiLoCo against DisTrO 0.099 (0.20)", "not_distinct", EQUAL_TIME,
          (LADDER["time-small"],), ("diloco", "distro"), ("0.099",)),
    Claim("docs/size-ladder.md", "DisTrO against SparseLoCo p = 0.067 (0.20 after Holm)", "not_distinct", EQUAL_TIME,
          (LADDER["time-small"],), ("distro", "sparseloco"), ("0.20",), quoted_holm=True),
    Claim("docs/size-ladder.md", "DiLoCo against DisTrO 0.099 (0.20)", "not_distinct", EQUAL_TIME,
          (LADDER["time-small"],), ("diloco", "distro"), ("0.20",), quoted_holm=True),
    Claim("docs/size-ladder.md", "DiLoCo against SparseLoCo 0.71", "not_distinct", EQUAL_TIME,
          (LADDER["time-small"],), ("diloco", "sparseloco"), ("0.71",)),
    Claim("docs/size-ladder.md", "no gap to AdamW but SparseLoCo's is distinct from 0", "vs_baseline", FINAL,
          (LADDER["small-tiny-rates"],), ("sparseloco",)),
    Claim("docs/size-ladder.md", "no gap to AdamW but SparseLoCo's is distinct from 0", "not_vs_baseline", FINAL,
          (LADDER["small-tiny-rates"],), ("diloco", "distro")),
    # docs/optimizers.md's summary of the ladder
    *[Claim("docs/optimizers.md", "at equal tokens AdamW ends lower than each other method at small", "order", FINAL,
            (LADDER["small"],), ("adamw", m)) for m in ("diloco", "distro", "sparseloco")],
    *[Claim("docs/optimizers.md", "DiLoCo and DisTrO each lower than SparseLoCo at every rung", "order", FINAL,
            (LADDER["tiny"], LADDER["small"], LADDER["medium"]), (m, "sparseloco")) for m in ("diloco", "distro")],
    Claim("docs/optimizers.md", "DiLoCo and DisTrO are not distinct at any rung", "not_distinct", FINAL,
          (LADDER["tiny"], LADDER["small"], LADDER["medium"]), ("diloco", "distro")),
    *[Claim("docs/optimizers.md", "at equal time on the DSL links (tiny, small) every method ends lower than AdamW",
            "order", EQUAL_TIME, (LADDER["time-tiny"], LADDER["time-small"]), (m, "adamw"))
      for m in ("diloco", "distro", "sparseloco")],
    *[Claim("docs/optimizers.md", "among the three only tiny shows an order (SparseLoCo lowest)", "order", EQUAL_TIME,
            (LADDER["time-tiny"],), ("sparseloco", m)) for m in ("diloco", "distro")],
    Claim("docs/optimizers.md", "among the three only tiny shows an order (SparseLoCo lowest)", "not_distinct",
          EQUAL_TIME, (LADDER["time-small"],), ("diloco", "distro", "sparseloco")),
]


def _norm(text: str) -> str:
    return " ".join(text.split())


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@functools.cache
def _summary(path: str) -> dict:
    return migrate(json.loads((REPO / path).read_text()))


def _values(summary: dict, figure: str) -> tuple[dict[str, dict[str, float]], bool]:
    """method -> {seed: figure} and whether it compares as a ratio (times) or a difference (losses)."""
    if figure == TIME:
        return seed_times(summary)[0], True
    out = {n: {k: float(v[figure]) for k, v in (s.get("per_seed") or {}).items() if finite(v.get(figure))}
           for n, s in (summary.get("optimizers") or {}).items() if isinstance(s, dict)}
    return out, False


@functools.cache
def _pairs(src: str, figure: str) -> AllPairs:
    """Every pair of the run's methods, paired by seed, Holm over all of them (the family a page's order needs)."""
    values, log = _values(_summary(src), figure)
    return all_pairs(values, figure, log=log)


def _agrees(printed: str, value: float) -> bool:
    """A figure as the page prints it ("0.054", "+0.207") is `value` rounded to the printed decimals."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return not math.isnan(value) and abs(float(printed) - value) <= 0.5 * 10 ** -decimals + 1e-9


def verify(claim: Claim) -> list[str]:
    """What the data does not back in one claim (empty: backed)."""
    if claim.kind in ("definition", "not_claimed"):
        return []
    if claim.quoted and (len(claim.methods) != 2 or len(claim.quoted) != len(claim.sources)):
        return [(f"`quoted` needs a claim about one pair and a p per source ({len(claim.sources)}), "
                 f"not {len(claim.methods)} methods and {len(claim.quoted)} p")]
    problems = []
    for i, src in enumerate(claim.sources):
        summary = _summary(src)
        values, log = _values(summary, claim.figure)
        missing = [m for m in claim.methods if m not in values]
        if missing:
            problems.append(f"{src}: no per-seed {claim.figure} for {', '.join(missing)}")
            continue
        if claim.kind in ("order", "best", "not_distinct"):
            pairs = _pairs(src, claim.figure)
            family = f"{claim.figure}, all {len(pairs.comparisons)} pairs Holm-corrected"
            if claim.kind == "order" and not pairs.backs(list(claim.methods)):
                weak = [f"{a} < {b} (Holm p {c.p_holm:.3f})" for j, a in enumerate(claim.methods)
                        for b in claim.methods[j + 1:] if not pairs.lower(a, b)
                        for c in [pairs.versus(a, b)] if c is not None]
                problems.append(f"{src}: {family}: not shown " + "; ".join(weak))
            if claim.kind == "not_distinct":
                # "not distinct" claims no evidence of a difference: every pair's Holm p >= 0.05 (or no test)
                shown = [f"{a} vs {b} (Holm p {c.p_holm:.3f})" for j, a in enumerate(claim.methods)
                         for b in claim.methods[j + 1:] for c in [pairs.versus(a, b)] if c is not None and c.distinct]
                if shown:
                    problems.append(f"{src}: {family}: distinct at 0.05: " + "; ".join(shown))
            if claim.kind == "best" and pairs.best != claim.methods[0]:
                problems.append(f"{src}: {claim.figure}: {claim.methods[0]} is not lower than every other method "
                                f"(may be the best: {', '.join(pairs.may_be_best())})")
            if claim.quoted:
                one = pairs.versus(claim.methods[0], claim.methods[1])
                got = math.nan if one is None else one.p_holm if claim.quoted_holm else one.p
                if not _agrees(claim.quoted[i], got):
                    problems.append(f"{src}: {claim.methods[0]} vs {claim.methods[1]}: the page says "
                                    f"{'Holm ' if claim.quoted_holm else ''}p {claim.quoted[i]}, the data {got:.4f}")
        else:
            base = summary.get("baseline") or ""
            fam = compare_family(values, base, claim.figure, log=log)
            for m in claim.methods:
                c = fam.comparisons.get(m)
                distinct = c is not None and c.distinct
                if distinct != (claim.kind == "vs_baseline"):
                    p = "n/a" if c is None else f"{c.p_holm:.3f}"
                    problems.append(f"{src}: {claim.figure}: {m} vs {base} Holm p {p}: "
                                    + ("not distinct" if claim.kind == "vs_baseline" else "distinct"))
    return problems


_PAIR_HEADER = re.compile(r"^\|\s*size\s*\|\s*pair\s*\|.*\|\s*Holm p\s*\|\s*order at 0\.05\s*\|\s*$", re.IGNORECASE)
_NUM = r"[+-]?\d+(?:\.\d+)?"
_GAP = re.compile(rf"^({_NUM}) \[({_NUM}), ({_NUM})\]$")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def pair_tables(page: str, raw: str) -> list[tuple[str, list[str]]]:
    """(caption, row lines) of each all-pairs table of a page: the caption is the last non-blank line above."""
    lines = raw.splitlines()
    found = []
    for i, line in enumerate(lines):
        if not _PAIR_HEADER.match(line):
            continue
        caption = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        rows = []
        for row in lines[i + 2:]:  # past the header and its |---| line
            if not row.lstrip().startswith("|"):
                break
            rows.append(row)
        found.append((caption, rows))
    return found


def verify_row(table: PairTable, row: str) -> list[str]:
    """One row of an all-pairs table against the pair recomputed from its rung's committed per-seed results."""
    cells = _cells(row)
    if len(cells) != 6:
        return [f"a row of {len(cells)} cells, not 6"]
    rung, pair, gap, p, p_holm, verdict = cells
    if rung not in table.rungs:
        return [f"rung {rung!r} has no registered summary (PAIR_TABLES has {', '.join(table.rungs)})"]
    names = re.fullmatch(r"(\S+) vs (\S+)", pair)
    if not names:
        return [f"pair {pair!r} is not 'a vs b'"]
    a, b = names.groups()
    src = table.rungs[rung]
    c = _pairs(src, table.figure).versus(a, b)
    if c is None:
        return [f"{src}: no pair {a} vs {b} in the data ({table.figure})"]
    problems = []
    m = _GAP.match(gap)
    iv = c.interval
    if not m or iv is None:
        problems.append(f"gap {gap!r}: the data's is " + ("none" if iv is None else
                                                            f"{iv.mean:+.3f} [{iv.lo:+.3f}, {iv.hi:+.3f}]"))
    elif not all(_agrees(s, v) for s, v in zip(m.groups(), (iv.mean, iv.lo, iv.hi), strict=True)):
        problems.append(f"gap {gap}: the data's is {iv.mean:+.3f} [{iv.lo:+.3f}, {iv.hi:+.3f}]")
    if not _agrees(p, c.p):
        problems.append(f"p {p}: the data's is {c.p:.4f}")
    if not _agrees(p_holm, c.p_holm):
        problems.append(f"Holm p {p_holm}: the data's is {c.p_holm:.4f} over {len(_pairs(src, table.figure).comparisons)} "
                        "pairs")
    order = re.fullmatch(r"(\S+) < (\S+)", verdict)
    if verdict == "not distinct":
        if c.distinct:  # no evidence of a difference: Holm p >= 0.05, or no test at all
            problems.append(f"'not distinct', but Holm p {c.p_holm:.4f} < {ALPHA}")
    elif order and {order[1], order[2]} == {a, b}:
        if not _pairs(src, table.figure).lower(order[1], order[2]):
            problems.append(f"{verdict!r} is not shown: Holm p {c.p_holm:.4f}, {a} - {b} = "
                            f"{'n/a' if iv is None else f'{iv.mean:+.3f}'}")
    else:
        problems.append(f"verdict {verdict!r} is neither 'not distinct' nor '{a} < {b}' / '{b} < {a}'")
    return [f"{src}: {rung} {pair}: {x}" for x in problems]


_GAP_HEADER = re.compile(r"^\|\s*size\s*\|(?:\s*[\w.-]+: val loss\s*\|\s*[\w.-]+: gap to baseline\s*\|)+\s*$")
_BASE_GAP = re.compile(rf"^({_NUM}) \[({_NUM}), ({_NUM})\] (?:p=({_NUM})|(p<0\.001)|p n/a)( \*)?$")


def gap_tables(raw: str) -> list[tuple[str, list[str], list[str]]]:
    """(heading, methods, row lines) of each gap-to-baseline table: the heading is the last `#` line above."""
    lines = raw.splitlines()
    found = []
    for i, line in enumerate(lines):
        if not _GAP_HEADER.match(line):
            continue
        heading = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].startswith("#")), "")
        methods = [c.split(":")[0].strip() for c in _cells(line)[1::2]]
        rows = []
        for row in lines[i + 2:]:
            if not row.lstrip().startswith("|"):
                break
            rows.append(row)
        found.append((heading, methods, rows))
    return found


def verify_gap_row(table: GapTable, methods: list[str], row: str) -> list[str]:
    """One row of a gap-to-baseline table against its rung's per-seed results: each method's mean [interval], its
    paired gap to the baseline [interval] and Holm p over the m - 1 comparisons, and `*` exactly where p < 0.05."""
    cells = _cells(row)
    if len(cells) != 1 + 2 * len(methods):
        return [f"a row of {len(cells)} cells, not {1 + 2 * len(methods)}"]
    rung = cells[0]
    if rung not in table.rungs:
        return [f"rung {rung!r} has no registered summary (GAP_TABLES has {', '.join(table.rungs)})"]
    src = table.rungs[rung]
    summary = _summary(src)
    values, log = _values(summary, table.figure)
    base = summary.get("baseline") or ""
    fam = compare_family(values, base, table.figure, log=log) if base in values else None
    problems = []
    for m, loss, gap in zip(methods, cells[1::2], cells[2::2], strict=True):
        iv = t_interval(values.get(m, {}).values())
        got = _GAP.match(loss)
        if iv is None or not got or not all(_agrees(x, v) for x, v in zip(got.groups(), (iv.mean, iv.lo, iv.hi),
                                                                            strict=True)):
            problems.append(f"{m}: val loss {loss!r}: the data's is "
                            + ("none" if iv is None else f"{iv.mean:.3f} [{iv.lo:.3f}, {iv.hi:.3f}]"))
        if m == base:
            if gap != "(baseline)":
                problems.append(f"{m} is the baseline: its gap reads {gap!r}")
            continue
        c = fam.comparisons.get(m) if fam else None
        parsed = _BASE_GAP.match(gap)
        if c is None or c.interval is None or not parsed:
            problems.append(f"{m}: gap {gap!r} against the data's " + ("none" if c is None or c.interval is None else
                                                                      f"{c.interval.mean:+.3f} {c.p_text}"))
            continue
        mean, lo, hi, p_holm, below, star = parsed.groups()
        civ = c.interval
        if not all(_agrees(x, v) for x, v in zip((mean, lo, hi), (civ.mean, civ.lo, civ.hi), strict=True)):
            problems.append(f"{m}: gap {gap}: the data's is {civ.mean:+.3f} [{civ.lo:+.3f}, {civ.hi:+.3f}]")
        if (p_holm is not None and not _agrees(p_holm, c.p_holm)) or (below and not c.p_holm < 0.001):
            problems.append(f"{m}: gap {gap}: Holm p over {len(fam.comparisons) if fam else 0} comparisons with "
                            f"{base} is {c.p_holm:.4f}")
        if bool(star) != c.distinct:
            problems.append(f"{m}: gap {gap}: " + ("a '*' (distinct) the data does not back" if star else
                                                  "distinct in the data but without '*'"))
    return [f"{src}: {rung}: {x}" for x in problems]


def check_tables(page: str, raw: str, tables: Iterable[PairTable],
                 gaps: Iterable[GapTable] = ()) -> tuple[list[str], list[str]]:
    """(failures, checked row lines) of a page's all-pairs tables: every row recomputed, every pair of each rung's
    family present once."""
    failures, checked = [], []
    registered = [t for t in tables if t.page == page]
    for caption, rows in pair_tables(page, raw):
        table = next((t for t in registered if caption.startswith(t.caption)), None)
        if table is None:
            failures.append(f"an all-pairs table under {caption!r} has no registered data: add it to PAIR_TABLES")
            continue
        seen: dict[str, set[frozenset[str]]] = {}
        for row in rows:
            failures += [f"table {table.caption!r}: {x}" for x in verify_row(table, row)]
            checked.append(row)
            cells = _cells(row)
            if len(cells) == 6 and (names := re.fullmatch(r"(\S+) vs (\S+)", cells[1])):
                got = seen.setdefault(cells[0], set())
                if frozenset(names.groups()) in got:
                    failures.append(f"table {table.caption!r}: {cells[0]} {cells[1]} appears twice")
                got.add(frozenset(names.groups()))
        for rung, src in table.rungs.items():
            family = {frozenset(k) for k, c in _pairs(src, table.figure).comparisons.items() if not math.isnan(c.p)}
            missing = family - seen.get(rung, set())
            if missing:
                failures.append(f"table {table.caption!r}: {rung} lacks the pair(s) "
                                + ", ".join(" vs ".join(sorted(x)) for x in sorted(missing, key=sorted))
                                + f" of its family ({src})")
    registered_gaps = [t for t in gaps if t.page == page]
    for heading, methods, rows in gap_tables(raw):
        gap = next((t for t in registered_gaps if heading.startswith(t.heading)), None)
        if gap is None:
            failures.append(f"a gap-to-baseline table under {heading!r} has no registered data: add it to GAP_TABLES")
            continue
        for row in rows:
            failures += [f"table {gap.heading!r}: {x}" for x in verify_gap_row(gap, methods, row)]
            checked.append(row)
    return failures, checked


def statements(text: str, names: list[str]) -> list[tuple[int, int, str]]:
    """(start, end, what) of each order chain and each "distinct" in a page's normalised text."""
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    chain = re.compile(rf"(?<![\w-])(?:{alt})(?:\s*[<>]\s*(?:{alt}))+(?![\w-])", re.IGNORECASE)
    found = [(m.start(), m.end(), m.group(0)) for m in chain.finditer(text)]
    found += [(m.start(), m.end(), "distinct") for m in re.finditer(r"\bdistinct\b", text, re.IGNORECASE)]
    return found


def _names() -> list[str]:
    """Every method name of the data, as the pages write them: the key and its spaced form."""
    keys: set[str] = set()
    for src in {SHOOTOUT, *LADDER.values()}:
        keys |= set(_summary(src).get("optimizers") or {})
    return sorted(keys | {k.replace("-", " ") for k in keys})


def check_page(page: str, raw: str, names: list[str], claims: Iterable[Claim] = (),
               tables: Iterable[PairTable] = (), gaps: Iterable[GapTable] = ()) -> tuple[list[str], list[str]]:
    """(failures, stale notes) of one page: its all-pairs and gap tables recomputed, its registered claims
    verified, and every order chain or "distinct" on it inside a checked row or a registered claim."""
    failures, rows = check_tables(page, raw, tables, gaps)
    failures = [f"{page}: {f}" for f in failures]
    text = _norm(raw)
    spans, stale, cursor = [], [], 0
    for row in rows:
        at = text.find(_norm(row), cursor)
        if at >= 0:
            spans.append((at, at + len(_norm(row))))
            cursor = at
    for c in (c for c in claims if c.page == page):
        at = text.find(_norm(c.text))
        if at < 0:
            stale.append(f"{page}: registered claim no longer on the page: {c.text!r}")
            continue
        spans.append((at, at + len(_norm(c.text))))
        failures += [f"{page}: {c.text!r}: {p}" for p in verify(c)]
    for start, end, what in statements(text, names):
        if not any(a <= start and end <= b for a, b in spans):
            context = text[max(0, start - 60):end + 60]
            failures.append(f"{page}: an unregistered {'order' if what != 'distinct' else 'distinct'} claim "
                            f"({what!r}) in '...{context}...': register it in scripts/check_claims.py CLAIMS "
                            "with its data, or reword it")
    return failures, stale


def main() -> int:
    names = _names()
    failures, stale = [], []
    for page in PAGES:
        path = REPO / page
        if not path.exists():
            continue
        failed, notes = check_page(page, path.read_text(), names, CLAIMS, PAIR_TABLES, GAP_TABLES)
        failures += failed
        stale += notes
    for s in stale:
        print(f"check_claims: note: {s}")
    for f in failures:
        print(f"check_claims: FAIL {f}")
    if failures:
        print(f"check_claims: {len(failures)} claim(s) the committed per-seed results do not back")
        return 1
    print(f"check_claims: every order and 'distinct' on {len(PAGES)} pages is backed by its committed per-seed results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
