"""The results pages' claims against the committed per-seed results behind them (issue 49).

    python scripts/check_claims.py            # exit 1 when a page states an order or a "distinct" its data does not back

A results page (docs/shootout-*.md, docs/size-ladder.md, the README's and optimizers.md's summaries of them)
states orders between methods ("AdamW < DiLoCo < DisTrO") and "distinct" claims. Each such statement must be
registered in CLAIMS below with the committed summary.json(s) it rests on and the figure it is about, and the
data must back it:

- an order: every pair of it, not only neighbours, Holm-corrected over ALL pairs of the run's methods
  (results/multiple.py `all_pairs`): "A < B" means A's figure is lower, family-wise at 5%;
- "the best" (`best`): lower than every other method in that family;
- "distinct from the baseline" (`vs_baseline`): the method's Holm-adjusted p against the baseline, over the
  run's m - 1 comparisons with it, under 0.05 (and `not_vs_baseline` for one said not to be);
- `definition` / `not_claimed`: text that uses the words without claiming (a legend, "an order ... is not
  supported"), recorded so that every use is accounted for.

The page is scanned for chains of two or more method names joined by `<` or `>` and for the word "distinct":
each must lie inside a registered claim's text, else it is an unbacked statement and the script fails. A
registered claim whose text is no longer on its page is reported as stale (not a failure: the page changed;
the entry should go). Runs in `.ci/run`'s lint lane.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "harness"))

from distro_bench.report.shootout import seed_times  # noqa: E402
from distro_bench.results.multiple import AllPairs, all_pairs, compare_family  # noqa: E402
from distro_bench.results.summary import migrate  # noqa: E402

SHOOTOUT = "benchmarks/shootout/2026-12-04/summary.json"
LADDER = {"tiny": "benchmarks/ladder/2026-12-04/tiny/summary.json",
          "small": "benchmarks/ladder/2026-12-04/small-tuned/summary.json",
          "medium": "benchmarks/ladder/2026-12-05/medium-tuned/summary.json",
          "small-tiny-rates": "benchmarks/ladder/2026-12-04/small-tiny-rates/summary.json",
          "time-tiny": "benchmarks/ladder/2026-12-05/time-tiny/summary.json",
          "time-small": "benchmarks/ladder/2026-12-05/time-small/summary.json"}
# The figures a claim can be about: time to target (restricted, compared as ratios) or a per-seed loss key.
TIME, EQUAL_TIME, FINAL = "time_to_target_s", "val_loss_at_equal_time", "final_val_loss"

PAGES = ["README.md", "docs/optimizers.md", "docs/shootout-2026-12-04.md", "docs/shootout-2026-12-02.md",
         "docs/size-ladder.md"]


@dataclass(frozen=True)
class Claim:
    page: str
    text: str  # a passage of the page (whitespace-insensitive) that holds the statement(s)
    kind: str  # order | best | vs_baseline | not_vs_baseline | definition | not_claimed
    figure: str = ""
    sources: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()  # the order (lowest first), the best, or the methods compared with the baseline


CLAIMS: list[Claim] = [
    # docs/shootout-2026-12-04.md
    Claim("docs/shootout-2026-12-04.md", "* = distinct at family-wise 5%", "definition"),
    Claim("docs/shootout-2026-12-04.md", "Every method but PowerSGD reaches the target sooner than AdamW", "vs_baseline",
          TIME, (SHOOTOUT,), ("demo-ref", "desloc", "diloco", "distro", "distro-eager", "distro-overlap",
                              "distro-overlap-lr1.5e-3", "muloco", "noloco", "sparseloco", "sparta",
                              "streaming-diloco")),
    Claim("docs/shootout-2026-12-04.md", "every method has a lower val loss at equal time than AdamW", "vs_baseline",
          EQUAL_TIME, (SHOOTOUT,), ("demo-ref", "desloc", "diloco", "distro", "distro-eager", "distro-overlap",
                                    "distro-overlap-lr1.5e-3", "muloco", "noloco", "powersgd", "sparseloco",
                                    "sparta", "streaming-diloco")),
    Claim("docs/shootout-2026-12-04.md", "PowerSGD's time is not distinguishable from AdamW's", "not_vs_baseline",
          TIME, (SHOOTOUT,), ("powersgd",)),
    Claim("docs/shootout-2026-12-04.md", "No method is distinct from every other", "not_claimed"),
    Claim("docs/shootout-2026-12-04.md", 'checks every order and "distinct" on this page', "definition"),
    Claim("docs/shootout-2026-12-04.md", "This page said before that MuLoCo was best and distinct from all", "not_claimed"),
    # README.md, docs/optimizers.md: their summaries of the shoot-out
    Claim("README.md", "all but PowerSGD beat AdamW", "vs_baseline", TIME, (SHOOTOUT,),
          ("demo-ref", "desloc", "diloco", "distro", "distro-eager", "distro-overlap", "distro-overlap-lr1.5e-3",
           "muloco", "noloco", "sparseloco", "sparta", "streaming-diloco")),
    Claim("README.md", "MuLoCo lowest by mean, but not distinct from every other over all pairs", "not_claimed"),
    Claim("docs/optimizers.md", "no method is distinct from every other", "not_claimed"),
    Claim("docs/optimizers.md", "AdamW's val loss is below each other method's at tiny, small and medium", "vs_baseline",
          FINAL, (LADDER["tiny"], LADDER["small"]), ("diloco", "distro", "sparseloco")),
    Claim("docs/optimizers.md", "AdamW's val loss is below each other method's at tiny, small and medium", "vs_baseline",
          FINAL, (LADDER["medium"],), ("diloco", "sparseloco")),
    Claim("docs/optimizers.md", "at equal time on the DSL links (tiny, small) every method beats AdamW", "vs_baseline",
          EQUAL_TIME, (LADDER["time-tiny"], LADDER["time-small"]), ("diloco", "distro", "sparseloco")),
    # docs/size-ladder.md (its text is helper `paper`'s; these entries record what it states today)
    Claim("docs/size-ladder.md", "The order by mean holds at all three sizes: **AdamW < DiLoCo < DisTrO < SparseLoCo**",
          "order", FINAL, (LADDER["tiny"], LADDER["small"], LADDER["medium"]),
          ("adamw", "diloco", "distro", "sparseloco")),
    Claim("docs/size-ladder.md", "Every gap is distinct from 0 after Holm but DisTrO's at medium", "vs_baseline", FINAL,
          (LADDER["tiny"], LADDER["small"]), ("diloco", "distro", "sparseloco")),
    Claim("docs/size-ladder.md", "all distinct from 0 after Holm", "vs_baseline", EQUAL_TIME,
          (LADDER["time-tiny"], LADDER["time-small"]), ("diloco", "distro", "sparseloco")),
    Claim("docs/size-ladder.md", "tiny SparseLoCo < DisTrO < DiLoCo", "order", EQUAL_TIME, (LADDER["time-tiny"],),
          ("sparseloco", "distro", "diloco")),
    Claim("docs/size-ladder.md", "small DisTrO < SparseLoCo < DiLoCo", "order", EQUAL_TIME, (LADDER["time-small"],),
          ("distro", "sparseloco", "diloco")),
    Claim("docs/size-ladder.md", "small at tiny's rates: DiLoCo < DisTrO < AdamW < SparseLoCo", "order", FINAL,
          (LADDER["small-tiny-rates"],), ("diloco", "distro", "adamw", "sparseloco")),
    Claim("docs/size-ladder.md", "no gap but SparseLoCo's distinct from 0", "vs_baseline", FINAL,
          (LADDER["small-tiny-rates"],), ("sparseloco",)),
]


def _norm(text: str) -> str:
    return " ".join(text.split())


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _summary(path: str) -> dict:
    return migrate(json.loads((REPO / path).read_text()))


def _values(summary: dict, figure: str) -> tuple[dict[str, dict[str, float]], bool]:
    """method -> {seed: figure} and whether it compares as a ratio (times) or a difference (losses)."""
    if figure == TIME:
        return seed_times(summary)[0], True
    out = {n: {k: float(v[figure]) for k, v in (s.get("per_seed") or {}).items()
               if isinstance(v.get(figure), (int, float))}
           for n, s in (summary.get("optimizers") or {}).items() if isinstance(s, dict)}
    return out, False


def verify(claim: Claim) -> list[str]:
    """What the data does not back in one claim (empty: backed)."""
    if claim.kind in ("definition", "not_claimed"):
        return []
    problems = []
    for src in claim.sources:
        summary = _summary(src)
        values, log = _values(summary, claim.figure)
        missing = [m for m in claim.methods if m not in values]
        if missing:
            problems.append(f"{src}: no per-seed {claim.figure} for {', '.join(missing)}")
            continue
        if claim.kind in ("order", "best"):
            pairs: AllPairs = all_pairs(values, claim.figure, log=log)
            if claim.kind == "order" and not pairs.backs(list(claim.methods)):
                weak = [f"{a} < {b} (Holm p {c.p_holm:.3f})" for i, a in enumerate(claim.methods)
                        for b in claim.methods[i + 1:] if not pairs.lower(a, b)
                        for c in [pairs.versus(a, b)] if c is not None]
                problems.append(f"{src}: {claim.figure}, all {len(pairs.comparisons)} pairs Holm-corrected: not shown "
                                + "; ".join(weak))
            if claim.kind == "best" and pairs.best != claim.methods[0]:
                problems.append(f"{src}: {claim.figure}: {claim.methods[0]} is not lower than every other method "
                                f"(may be the best: {', '.join(pairs.may_be_best())})")
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


def main() -> int:
    names = _names()
    failures, stale = [], []
    for page in PAGES:
        path = REPO / page
        if not path.exists():
            continue
        text = _norm(path.read_text())
        spans = []
        for c in (c for c in CLAIMS if c.page == page):
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
