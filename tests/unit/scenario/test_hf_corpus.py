"""`hf:` corpora: the spelling in the scenario, and a local dataset folder in the hub's layout (no network)."""

from __future__ import annotations

import pytest

from distro_bench.errors import ScenarioError
from distro_bench.scenario import hfcorpus
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import tiny_scenario_dict


def test_spelling():
    assert hfcorpus.parse("hf:roneneldan/TinyStories") == hfcorpus.HFCorpus("roneneldan/TinyStories", "train", "text")
    assert hfcorpus.parse("hf:./ds:validation:body") == hfcorpus.HFCorpus("./ds", "validation", "body")
    for bad in ("hf:", "hf:a::text", "hf:a:b:c:d"):
        with pytest.raises(ValueError, match="hf:<dataset>"):
            hfcorpus.parse(bad)


def test_scenario_checks_the_spelling_and_the_folder(tmp_path):
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(tiny_scenario_dict(data={"corpus": "hf:a:b:c:d"}))
    assert "data.corpus" in e.value.problems[0]
    with pytest.raises(ScenarioError, match="no such dataset folder"):
        scenario_from_dict(tiny_scenario_dict(data={"corpus": "hf:./missing"}), base_dir=tmp_path)


@pytest.fixture
def local_dataset(tmp_path, monkeypatch):
    if not hfcorpus.available():
        pytest.skip("the optional `datasets` library is not installed (pip install 'distro-bench[hf]')")
    import pandas as pd

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("DISTRO_BENCH_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "ds" / "data"
    folder.mkdir(parents=True)
    rows = [f"story {i}: " + "the cat sat on the mat and looked at the moon. " * 4 for i in range(300)]
    pd.DataFrame({"text": rows, "id": range(300)}).to_parquet(folder / "train-00000-of-00001.parquet")
    pd.DataFrame({"text": ["a held-out line"] * 5}).to_parquet(folder / "test-00000-of-00001.parquet")
    return tmp_path, rows


def test_local_folder_loads_caches_and_shards_alike(local_dataset):
    from distro_bench.train.data import encode, load_corpus, split

    root, rows = local_dataset
    s = scenario_from_dict(tiny_scenario_dict(data={"corpus": "hf:./ds:train:text", "seq_len": 32, "batch_size": 4}),
                           base_dir=root)
    spec = s.corpus_path()
    assert spec == f"hf:{(root / 'ds').resolve()}:train:text"
    data = load_corpus(spec)
    assert data == "\n\n".join(rows).encode()  # every row, in order, separated by blank lines
    assert len(list((root / "cache" / "corpora").iterdir())) == 1
    assert load_corpus(spec) == data  # from the cache: the same bytes for every rank
    tokens = encode(data)
    shards = [split(tokens, 0.05, r, 2, 32) for r in range(2)]
    assert shards[0][1].equal(shards[1][1]) and not shards[0][0].equal(shards[1][0])
    assert load_corpus(spec.replace(":train:", ":test:")).startswith(b"a held-out line")


def test_missing_field_is_named(local_dataset):
    from distro_bench.errors import InputError
    from distro_bench.train.data import load_corpus

    root, _ = local_dataset
    with pytest.raises(InputError, match=r"no field 'body'.*fields: id, text"):
        load_corpus(f"hf:{root / 'ds'}:train:body")
