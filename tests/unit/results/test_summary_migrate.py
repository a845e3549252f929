"""An older summary.json is brought to today's form in one place (results/summary.py MIGRATIONS) as it is
read, so the readers (verdict, check, costs) hold no branch per old form (issue 35)."""

from __future__ import annotations

import json

from distro_bench.results.rundir import read_summary
from distro_bench.results.summary import BYTES_BASES, Summary, migrate


def _old(**extra) -> dict:
    return {"schema_version": 2, "run": {"state": "complete"}, "baseline": "adamw",
            "optimizers": {"adamw": {"steps": 10}}, **extra}


def test_an_old_post_hoc_target_gains_its_flag_from_its_wording(tmp_path):
    raw = _old(target={"val_loss": 2.5, "how": "the worst optimizer's best validation loss"})
    (tmp_path / "summary.json").write_text(json.dumps(raw))
    assert read_summary(tmp_path)["target"]["post_hoc"] is True
    assert migrate(_old(target={"val_loss": 2.5, "how": "checks.target_val_loss"}))["target"]["post_hoc"] is False
    assert "target" not in migrate(_old())  # nothing invented where the folder had no target


def test_an_unknown_bytes_basis_reads_as_payload_and_known_ones_are_kept():
    for word in BYTES_BASES:
        assert migrate(_old(costs={"bytes_basis": word}))["costs"]["bytes_basis"] == word
    assert migrate(_old(costs={"bytes_basis": "bits"}))["costs"]["bytes_basis"] == "payload"


def test_a_current_summary_is_unchanged_and_the_input_is_not_modified():
    current = _old(target={"val_loss": 2.5, "how": "checks.target_val_loss", "post_hoc": False},
                   costs={"bytes_basis": "wire"})
    before = json.dumps(current, sort_keys=True)
    assert migrate(current) == current
    assert Summary.model_validate(current).to_dict() == current
    old = _old(target={"val_loss": 2.5, "how": "the worst optimizer's best val loss"})
    migrate(old)
    assert "post_hoc" not in old["target"] and json.dumps(current, sort_keys=True) == before


def test_cost_basis_words_name_every_basis():
    from distro_bench.results.cost import BASIS_WORDS

    assert set(BASIS_WORDS) == set(BYTES_BASES)
