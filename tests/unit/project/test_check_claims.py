"""scripts/check_claims.py (issue 49): a results page's orders and "distinct" claims against the per-seed results
behind them, over all pairs; an order or "distinct" the registry does not hold fails, and so does an all-pairs or
gap-to-baseline table row whose figures or verdict the recomputed test does not give."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("check_claims", REPO / "scripts" / "check_claims.py")
assert _spec is not None and _spec.loader is not None
cc = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = cc
_spec.loader.exec_module(cc)


def _summary(tmp_path: Path, losses: dict[str, list[float]]) -> str:
    per = {n: {"per_seed": {str(k): {"final_val_loss": v} for k, v in enumerate(vs)}} for n, vs in losses.items()}
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"schema_version": 1, "baseline": "adamw", "run": {}, "optimizers": per}))
    return str(path)


def test_an_order_is_backed_only_when_every_pair_of_it_holds(tmp_path):
    src = _summary(tmp_path, {"adamw": [2.0, 2.1, 2.05, 1.95, 2.02], "distro": [2.5, 2.62, 2.55, 2.47, 2.51],
                              "diloco": [2.52, 2.6, 2.58, 2.44, 2.55]})
    backed = cc.Claim("p.md", "x", "order", cc.FINAL, (src,), ("adamw", "distro"))
    assert cc.verify(backed) == []
    # distro and diloco are within noise of each other: "adamw < distro < diloco" is an order the data lacks
    problems = cc.verify(cc.Claim("p.md", "x", "order", cc.FINAL, (src,), ("adamw", "distro", "diloco")))
    assert problems and "distro < diloco" in problems[0]
    assert cc.verify(cc.Claim("p.md", "x", "vs_baseline", cc.FINAL, (src,), ("distro", "diloco"))) == []
    assert cc.verify(cc.Claim("p.md", "x", "best", cc.FINAL, (src,), ("adamw",))) == []
    assert cc.verify(cc.Claim("p.md", "x", "best", cc.FINAL, (src,), ("distro",)))


def test_chains_and_distinct_are_found_in_a_page():
    text = cc._norm("at small **AdamW < DiLoCo < Streaming DiLoCo**, and MuLoCo is distinct from all;\nDisTrO > adamw")
    found = [w for _, _, w in cc.statements(text, ["adamw", "diloco", "distro", "muloco", "streaming diloco"])]
    assert found == ["AdamW < DiLoCo < Streaming DiLoCo", "DisTrO > adamw", "distinct"]


def test_the_committed_pages_claims_are_checked():
    """The registry's entries hold today, and every page passes as a whole (the lint lane's check)."""
    failing = [(c, cc.verify(c)) for c in cc.CLAIMS if cc.verify(c)]
    assert not failing, failing
    names = cc._names()
    for page in cc.PAGES:
        failures, _ = cc.check_page(page, (REPO / page).read_text(), names, cc.CLAIMS, cc.PAIR_TABLES, cc.GAP_TABLES)
        assert not failures, failures


def _ladder_page(tmp_path: Path) -> tuple[str, str]:
    """A page as benchmarks/size_ladder.py writes it from the committed tiny rung, and that rung's summary.json."""
    spec = importlib.util.spec_from_file_location("size_ladder", REPO / "benchmarks" / "size_ladder.py")
    assert spec is not None and spec.loader is not None
    sl = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = sl  # a dataclass resolves its annotations through its module
    spec.loader.exec_module(sl)
    run = tmp_path / "tiny"
    run.mkdir()
    (run / "summary.json").write_text((REPO / cc.LADDER["tiny"]).read_text())
    return sl.ladder_table({"equal tokens": {"tiny": run}}), str(run / "summary.json")


def _check(page: str, src: str, claims: tuple = ()) -> list[str]:
    tables = [cc.PairTable("p.md", "Every pair at equal tokens", cc.FINAL, {"tiny": src})]
    gaps = [cc.GapTable("p.md", "### At equal tokens", cc.FINAL, {"tiny": src})]
    return cc.check_page("p.md", page, ["adamw", "diloco", "distro", "sparseloco"], claims, tables, gaps)[0]


def test_the_generators_tables_pass_and_each_wrong_row_fails(tmp_path):
    page, src = _ladder_page(tmp_path)
    assert "| tiny | diloco vs distro | -0.029 [-0.187, +0.129] | 0.510 | 0.510 | not distinct |" in page
    assert _check(page, src) == []
    wrong = {  # an order the test does not give, both ways; a "not distinct" on a distinct pair; figures off
        "| 0.510 | 0.510 | not distinct |": "| 0.510 | 0.510 | diloco < distro |",
        "| 0.020 | 0.054 | not distinct |": "| 0.020 | 0.054 | adamw < diloco |",
        "| 0.002 | 0.008 | adamw < sparseloco |": "| 0.002 | 0.008 | not distinct |",
        "| 0.001 | 0.003 | diloco < sparseloco |": "| 0.001 | 0.003 | sparseloco < diloco |",
        "-0.720 [-0.793, -0.648]": "-0.720 [-0.793, -0.548]",
        "| 0.510 | 0.510 |": "| 0.051 | 0.510 |",
        "| 0.020 | 0.054 |": "| 0.020 | 0.020 |",
        "p=0.036 * |": "p=0.036 |",  # a gap the family-wise claim backs, without its star
        "| 3.127 [3.054, 3.200] |": "| 3.027 [3.054, 3.200] |",
    }
    for old, new in wrong.items():
        assert page.count(old) >= 1, old
        failures = _check(page.replace(old, new, 1), src)
        assert failures, (old, new)
    # a row left out: the family on the page is incomplete
    row = next(line for line in page.splitlines() if "diloco vs sparseloco" in line)
    assert any("lacks the pair(s) diloco vs sparseloco" in f for f in _check(page.replace(row + "\n", ""), src))
    # a table with no registered data behind it
    renamed = page.replace("Every pair at equal tokens", "Every pair at some budget")
    assert any("no registered data" in f for f in _check(renamed, src))


def test_prose_orders_and_not_distinct_need_a_registered_claim_the_data_backs(tmp_path):
    page, src = _ladder_page(tmp_path)
    prose = page + "\nAt tiny AdamW < DiLoCo, and DiLoCo and DisTrO are not distinct (p = 0.51).\n"
    assert len(_check(prose, src)) == 2  # the chain and the "distinct", unregistered
    order = cc.Claim("p.md", "At tiny AdamW < DiLoCo", "order", cc.FINAL, (src,), ("adamw", "diloco"))
    same = cc.Claim("p.md", "DiLoCo and DisTrO are not distinct (p = 0.51)", "not_distinct", cc.FINAL, (src,),
                    ("diloco", "distro"), ("0.51",))
    # AdamW vs DiLoCo: Holm p 0.054 over the six pairs, so the order is not backed; the "not distinct" is
    failures = _check(prose, src, (order, same))
    assert len(failures) == 1 and "adamw < diloco (Holm p 0.054)" in failures[0]
    assert cc.verify(same) == []
    assert cc.verify(cc.Claim("p.md", "x", "not_distinct", cc.FINAL, (src,), ("distro", "sparseloco")))
    misquoted = cc.Claim("p.md", "x", "not_distinct", cc.FINAL, (src,), ("diloco", "distro"), ("0.15",))
    assert cc.verify(misquoted) and "the page says p 0.15" in cc.verify(misquoted)[0]
