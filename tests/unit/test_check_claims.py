"""scripts/check_claims.py (issue 49): a results page's orders and "distinct" claims against the per-seed results
behind them, over all pairs; an order or "distinct" the registry does not hold fails."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
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
    """The registry's entries for pages that are not helper `paper`'s size-ladder.md hold today."""
    failing = [c for c in cc.CLAIMS if c.page != "docs/size-ladder.md" and cc.verify(c)]
    assert not failing, failing
