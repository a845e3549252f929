"""Models from outside and real tokenised data (issue 47 items 3 and 4): the model protocol, its bad inputs (exit 2
naming the field and what was expected), token files, tokenizers, vocabularies, hub datasets offline, the loss's
unit. docs/models-and-data.md."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import sys
import textwrap

import numpy as np
import pytest
import torch
import yaml

from distro_bench.errors import InputError, ScenarioError
from distro_bench.scenario.loading import dump_for_run, load_resolved, load_scenario, scenario_from_dict
from distro_bench.scenario.model import model_label
from distro_bench.train import models
from tests.helpers import tiny_scenario_dict

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
HAS_TOKENIZERS = importlib.util.find_spec("tokenizers") is not None
GPT2 = {"model_type": "gpt2", "vocab_size": 256, "n_positions": 64, "n_embd": 32, "n_layer": 2, "n_head": 2,
        "bos_token_id": 0, "eos_token_id": 0}


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A third-party package, `byomodels`, on sys.path (and PYTHONPATH, for workers), holding factories good and bad."""
    pkg = tmp_path / "site" / "byomodels"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent('''
        import torch
        from torch import nn

        class Bigram(nn.Module):
            def __init__(self, vocab_size):
                super().__init__()
                self.table = nn.Embedding(vocab_size, vocab_size)
            def forward(self, tokens):
                return self.table(tokens)

        def bigram(*, vocab_size):
            return Bigram(vocab_size)

        def counted(*, vocab_size, extra=0):
            m = Bigram(vocab_size)
            m.flops_per_token = lambda seq_len: 6.0 * vocab_size * vocab_size + extra
            return m

        def not_a_module(*, vocab_size):
            return "a string"

        def wrong_shape(*, vocab_size):
            class Flat(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = nn.Embedding(vocab_size, 8)
                def forward(self, tokens):
                    return self.w(tokens)  # [B, T, 8]: not logits over the vocabulary
            return Flat()

        def needs_width(*, vocab_size, width):
            return Bigram(vocab_size)
        '''))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path / 'site'}:{os.environ.get('PYTHONPATH', '')}")
    yield "byomodels"
    sys.modules.pop("byomodels", None)


def _validate(cli, write_scenario, **overrides):
    return cli("validate", write_scenario(tiny_scenario_dict(**overrides)))


# ---- the protocol -----------------------------------------------------------------------------------------

def test_a_factory_model_builds_from_its_import_path_with_shapes_from_meta(plugin):
    spec = {"factory": "byomodels:bigram", "args": {}, "vocab_size": 256}
    model = models.build(spec, seed=1)
    assert model(torch.zeros(2, 5, dtype=torch.long)).shape == (2, 5, 256)
    assert models.model_shapes(spec) == {"table.weight": (256, 256)}  # from the module itself, no formula
    assert models.parameter_count(spec) == 256 * 256
    same = models.build(spec, seed=1)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), same.parameters()))  # replicas start alike
    assert models.flops_per_token(spec, 64) == (6.0 * 256 * 256, "6 x parameters (estimate)")
    counted = {"factory": "byomodels:counted", "args": {"extra": 5}, "vocab_size": 256}
    assert models.flops_per_token(counted, 64) == (6.0 * 256 * 256 + 5, "the model's own count")


def test_the_builtin_presets_go_through_the_same_registry():
    tiny = scenario_from_dict(tiny_scenario_dict()).resolved_model()
    recipe = models.recipe_of(tiny)
    assert recipe.factory == "llama" and models.REGISTRY["llama"] == "distro_bench.train.model:llama"
    built = models.build(tiny, seed=0)
    assert models.model_shapes(tiny) == {n: tuple(p.shape) for n, p in built.named_parameters()}
    flops, basis = models.flops_per_token(tiny, 32)
    matmul = sum(p.numel() for n, p in built.named_parameters() if p.dim() == 2 and not n.startswith("tok_"))
    assert basis == "the model's own count" and flops == 6 * matmul + 12 * tiny["n_layers"] * tiny["dim"] * 32


def test_grouped_query_attention_shapes_come_from_the_model():
    from distro_bench.train.projection import analytic_shapes

    cfg = {"dim": 64, "n_layers": 1, "n_heads": 8, "ffn_dim": 128, "vocab_size": 256}
    shapes = analytic_shapes(cfg, n_kv_heads=2)
    assert shapes["layers.0.attn.wk.weight"] == (16, 64) and shapes["layers.0.attn.wq.weight"] == (64, 64)
    model = models.build({**cfg, "n_kv_heads": 2}, seed=0)
    assert model(torch.zeros(1, 4, dtype=torch.long)).shape == (1, 4, 256)  # the GQA model runs


@pytest.mark.parametrize(("factory", "expected"), [
    ("nopkg_xyz.models:build", "cannot import module 'nopkg_xyz.models'"),
    ("byomodels:missing", "module 'byomodels' has no 'missing'"),
    ("byomodels:not_a_module", "returned str, not a torch.nn.Module"),
    ("byomodels:wrong_shape", "maps token ids [2, 32] to shape [2, 32, 8]; expected logits [2, 32, 256]"),
    ("byomodels:needs_width", "refused its arguments"),
])
def test_a_bad_factory_is_exit_2_at_validate_naming_what_was_expected(cli, write_scenario, plugin, factory, expected):
    r = _validate(cli, write_scenario, model={"factory": factory})
    assert r.exit_code == 2, r.output
    assert "model.factory" in r.output and expected in r.output.replace("\n", " ").replace("  ", " ")
    assert "Traceback" not in r.output


def test_a_bad_factory_stops_a_run_before_its_folder(plugin, tmp_path):
    from distro_bench import api

    s = scenario_from_dict(tiny_scenario_dict(model={"factory": "byomodels:wrong_shape"}))
    with pytest.raises(ScenarioError, match=re.escape("expected logits")):
        api.run(s, backend="local", out=tmp_path / "out", write_report=False)
    assert not list((tmp_path / "out").glob("*/scenario.yaml"))


@pytest.mark.parametrize(("model", "expected"), [
    ({"factory": "bad path"}, "model.factory"),
    ({"factory": "a:b", "dim": 64}, "a factory model takes its options in `args`"),
    ({"factory": "a:b", "preset": "tiny"}, "give preset or factory, not both"),
    ({"factory": "a:b", "hf_config": "c.json"}, "give one of factory and hf_config"),
    ({"preset": "tiny", "args": {"x": 1}}, "args: options of a `factory`"),
])
def test_model_fields_that_do_not_go_together_are_named(model, expected):
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(tiny_scenario_dict(model=model))
    assert any(expected in p for p in e.value.problems), e.value.problems


def test_validate_says_what_model_it_is():
    assert model_label(scenario_from_dict(tiny_scenario_dict()).model) == "tiny"
    given = scenario_from_dict(tiny_scenario_dict(model={"dim": 256, "n_layers": 4}))
    assert model_label(given.model) == "tiny with dim 256, 4 layers"  # not "tiny": its own dim and layers
    custom = scenario_from_dict(tiny_scenario_dict(model={"preset": None, "dim": 64, "n_layers": 2, "n_heads": 2,
                                                          "ffn_dim": 128}))
    assert model_label(custom.model) == "custom (dim 64, 2 layers, n_heads 2, ffn_dim 128)"
    assert model_label(scenario_from_dict(tiny_scenario_dict(model={"factory": "a.b:c"})).model) == "factory a.b:c"


# ---- vocabularies ------------------------------------------------------------------------------------------

def test_a_vocabulary_larger_than_bytes_is_explained_at_validate_and_refused_by_a_run(cli, write_scenario, tmp_path):
    from distro_bench import api

    r = _validate(cli, write_scenario, model={"preset": "tiny", "vocab_size": 50257})
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert "the model's vocabulary is 50257, the data's 256" in said and "`run` refuses it" in said
    s = scenario_from_dict(tiny_scenario_dict(model={"preset": "tiny", "vocab_size": 50257}))
    with pytest.raises(ScenarioError, match=re.escape("the model's vocabulary is 50257, the data's 256")):
        api.run(s, backend="local", out=tmp_path / "out", write_report=False)


def test_a_factory_or_config_model_of_another_vocabulary_is_exit_2(cli, write_scenario, plugin, tmp_path):
    r = _validate(cli, write_scenario, model={"factory": "byomodels:bigram", "vocab_size": 50257})
    assert r.exit_code == 2 and "the model's vocabulary is 50257, the data's 256" in " ".join(r.output.split())
    (tmp_path / "config.json").write_text(json.dumps({**GPT2, "vocab_size": 1000}))
    r = _validate(cli, write_scenario, model={"hf_config": "config.json"})
    assert r.exit_code == 2 and "model.hf_config: the model's vocabulary is 1000, the data's 256" in " ".join(r.output.split())


def test_a_model_smaller_than_the_data_vocabulary_is_refused():
    with pytest.raises(ScenarioError, match=re.escape("vocabulary is 256, the data's 1000")):
        scenario_from_dict(tiny_scenario_dict(model={"preset": "tiny", "vocab_size": 256},
                                              data={"tokens": "x.bin", "vocab_size": 1000}))


def test_a_text_corpus_without_a_tokenizer_is_bytes():
    with pytest.raises(ScenarioError, match=re.escape("a text corpus without a tokenizer is bytes, vocabulary 256, not 1000")):
        scenario_from_dict(tiny_scenario_dict(data={"vocab_size": 1000}))


# ---- token files ---------------------------------------------------------------------------------------------

def _bin(path, ids, dtype="uint16"):
    np.asarray(ids, dtype=dtype).tofile(path)
    return path.name


def _token_scenario(tmp_path, **data):
    d = tiny_scenario_dict(data={"seq_len": 16, "batch_size": 2, "val_batches": 1, **data})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def test_a_nanogpt_bin_and_its_held_out_file_are_read_as_written(tmp_path):
    from distro_bench.train.data import load_tokens

    rng = np.random.default_rng(0)
    train, val = rng.integers(0, 1000, 4000), rng.integers(0, 1000, 400)
    s = load_scenario(_token_scenario(tmp_path, tokens=_bin(tmp_path / "train.bin", train),
                                      val_tokens=_bin(tmp_path / "val.bin", val), vocab_size=1000))
    assert s.resolved_model()["vocab_size"] == 1000  # the model takes the data's vocabulary
    got = load_tokens(s)
    assert got.ids.tolist() == train.tolist() and got.held_out.tolist() == val.tolist()
    assert got.unit == "nats per token (token ids of a vocabulary of 1000)" and got.bytes_per_token is None
    # the run folder: copies of the bytes read at validation, named relative to it; the originals are not read again
    run = tmp_path / "run"
    run.mkdir()
    text, follows = dump_for_run(s, run)
    (tmp_path / "train.bin").write_bytes(b"\0\0" * 10)
    (run / "scenario.yaml").write_text(text)
    again = load_tokens(load_resolved(run / "scenario.yaml"))
    assert follows and again.ids.tolist() == train.tolist() and again.held_out.tolist() == val.tolist()


def test_uint32_token_files_say_their_dtype(tmp_path):
    from distro_bench.train.data import load_tokens

    ids = [0, 70000, 99999, 5] * 200
    s = load_scenario(_token_scenario(tmp_path, tokens=_bin(tmp_path / "t.bin", ids, "uint32"), dtype="uint32",
                                      vocab_size=100000))
    assert load_tokens(s).ids.tolist() == ids
    with pytest.raises(ScenarioError, match=re.escape("uint16 holds ids below 65536, not a vocabulary of 100000; say dtype: uint32")):
        load_scenario(_token_scenario(tmp_path, tokens="t.bin", vocab_size=100000))


@pytest.mark.parametrize(("make", "expected"), [
    (lambda p: p.write_bytes(b"\1\0\2"), "not a whole number of uint16 tokens"),
    (lambda p: _bin(p, [1, 2, 5000]), "holds token id 5000, not below data.vocab_size 1000"),
    (lambda p: None, "no such file"),
])
def test_bad_token_files_are_named(tmp_path, make, expected):
    make(tmp_path / "t.bin")
    with pytest.raises(ScenarioError) as e:
        load_scenario(_token_scenario(tmp_path, tokens="t.bin", vocab_size=1000))
    assert any(p.startswith("data.tokens") and expected in p for p in e.value.problems), e.value.problems


@pytest.mark.parametrize(("data", "expected"), [
    ({"tokens": "t.bin"}, "vocab_size: required with tokens"),
    ({"tokens": "t.bin", "corpus": "builtin:pydoc", "vocab_size": 10}, "give corpus (text) or tokens"),
    ({"tokens": "t.bin", "tokenizer": "tok.json", "vocab_size": 10}, "token files are tokenised already"),
    ({"val_tokens": "v.bin"}, "val_tokens: belongs to `tokens`"),
])
def test_token_fields_that_do_not_go_together_are_named(data, expected):
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(tiny_scenario_dict(data=data))
    assert any(expected in p for p in e.value.problems), e.value.problems


def test_a_token_file_outside_the_scenarios_folder_is_refused(tmp_path):
    (tmp_path / "sc").mkdir()
    _bin(tmp_path / "t.bin", list(range(500)))
    with pytest.raises(ScenarioError, match=re.escape("outside the scenario's folder")):
        load_scenario(_token_scenario(tmp_path / "sc", tokens="../t.bin", vocab_size=1000))


def test_parquet_and_save_to_disk_input_ids_are_joined_in_order(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from distro_bench.train.data import load_tokens

    rows = [[1, 2, 3] * 50, [4, 5] * 100, [6] * 300]
    pq.write_table(pa.table({"input_ids": rows, "n": [1, 2, 3]}), tmp_path / "t.parquet")
    s = load_scenario(_token_scenario(tmp_path, tokens="t.parquet", vocab_size=10))
    assert load_tokens(s).ids.tolist() == [i for r in rows for i in r]
    pq.write_table(pa.table({"ids": rows}), tmp_path / "bad.parquet")
    with pytest.raises(ScenarioError, match=re.escape("has no `input_ids` column")):
        load_scenario(_token_scenario(tmp_path, tokens="bad.parquet", vocab_size=10))
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"input_ids": rows}).save_to_disk(str(tmp_path / "ds"))
    s = load_scenario(_token_scenario(tmp_path, tokens="ds", vocab_size=10))
    run = tmp_path / "run"
    run.mkdir()
    text, _ = dump_for_run(s, run)  # the run folder holds the flat array the workers read
    (run / "scenario.yaml").write_text(text)
    assert load_tokens(load_resolved(run / "scenario.yaml")).ids.tolist() == [i for r in rows for i in r]


# ---- tokenizers --------------------------------------------------------------------------------------------

@pytest.fixture
def tokenizer_file(tmp_path):
    if not HAS_TOKENIZERS:
        pytest.skip("the optional tokenizers library is not installed (pip install 'distro-bench[hf]')")
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers import models as tm

    tok = Tokenizer(tm.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(["the cat sat on the mat " * 50, "def f(x): return x + 1\n" * 50],
                            trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                show_progress=False))
    tok.save(str(tmp_path / "tokenizer.json"))
    return tmp_path / "tokenizer.json", tok.get_vocab_size()


def test_a_text_corpus_through_a_tokenizer_json(tmp_path, tokenizer_file):
    from distro_bench.train.data import load_tokens

    _path, vocab = tokenizer_file
    (tmp_path / "c.txt").write_text("the cat sat on the mat. def f(x): return x + 1\n" * 400)
    s = load_scenario(_token_scenario(tmp_path, corpus="c.txt", tokenizer="tokenizer.json"))
    assert s.data_vocab() == vocab and s.resolved_model()["vocab_size"] == vocab
    got = load_tokens(s)
    assert int(got.ids.max()) < vocab and len(got.ids) < len((tmp_path / "c.txt").read_bytes()) / 2
    assert got.unit == f"nats per token (tokenizer tokenizer.json, vocabulary {vocab})"
    assert got.bytes_per_token is not None and got.bytes_per_token > 2  # merges: more than one byte a token
    with pytest.raises(ScenarioError, match=re.escape(f"data.vocab_size: 999, but the tokenizer 'tokenizer.json' has {vocab}")):
        load_scenario(_token_scenario(tmp_path, corpus="c.txt", tokenizer="tokenizer.json", vocab_size=999))


def test_a_file_that_is_not_a_tokenizer_is_named(tmp_path):
    if not HAS_TOKENIZERS:
        pytest.skip("the optional tokenizers library is not installed")
    (tmp_path / "tok.json").write_text('{"not": "a tokenizer"}')
    with pytest.raises(ScenarioError, match=re.escape("data.tokenizer: not a tokenizers tokenizer.json")):
        load_scenario(_token_scenario(tmp_path, tokenizer="tok.json"))


# ---- transformers configs ----------------------------------------------------------------------------------

@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="the optional transformers library is not installed "
                    "(pip install 'distro-bench[hf]')")
def test_a_transformers_config_model_trains_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "config.json").write_text(json.dumps(GPT2))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny_scenario_dict(model={"hf_config": "config.json"})))
    s = load_scenario(tmp_path / "s.yaml")
    spec = s.resolved_model()
    assert spec == {"hf_config": GPT2, "vocab_size": 256}  # the content, as validation read it
    model = models.build(spec, seed=0)
    shapes = models.model_shapes(spec)
    assert shapes == {n: tuple(p.shape) for n, p in model.named_parameters()} and "lm.transformer.wte.weight" in shapes
    assert models.check(spec, 32)["flops_basis"] == "6 x parameters (estimate)"
    x = torch.randint(0, 256, (4, 16), generator=torch.Generator().manual_seed(0))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    first = models.lm_loss(model, x[:, :-1], x[:, 1:]).item()
    for _ in range(10):
        opt.zero_grad()
        models.lm_loss(model, x[:, :-1], x[:, 1:]).backward()
        opt.step()
    assert models.lm_loss(model, x[:, :-1], x[:, 1:]).item() < first - 0.5
    # the run folder's scenario holds the config itself: no path to read again at run time
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "config.json").unlink()
    text, _ = dump_for_run(s, run)
    (run / "scenario.yaml").write_text(text)
    assert load_resolved(run / "scenario.yaml").resolved_model() == spec


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="the optional transformers library is not installed")
def test_a_config_transformers_cannot_build_is_named():
    with pytest.raises(InputError, match=re.escape("model.hf_config: transformers cannot build a causal LM")):
        models.build({"hf_config": {**GPT2, "model_type": "no-such-model"}, "vocab_size": 256}, seed=0)


def test_a_config_that_is_not_one_is_named(tmp_path):
    (tmp_path / "config.json").write_text('{"vocab_size": 256}')
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(tiny_scenario_dict(model={"hf_config": "config.json"})))
    with pytest.raises(ScenarioError, match=re.escape("model.hf_config: a transformers config.json is an object with `model_type`")):
        load_scenario(tmp_path / "s.yaml")


# ---- hub datasets offline ----------------------------------------------------------------------------------

def test_an_uncached_hub_dataset_offline_is_exit_2_at_validate_naming_the_caches(cli, write_scenario, tmp_path,
                                                                                  monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("DISTRO_BENCH_CACHE", str(tmp_path / "db"))
    r = _validate(cli, write_scenario, data={"corpus": "hf:roneneldan/TinyStories"})
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and "not in the caches looked in" in said and str(tmp_path / "hf") in r.output.replace("\n", "")
    assert "Traceback" not in r.output


def test_a_hub_dataset_in_our_cache_passes_offline(cli, write_scenario, tmp_path, monkeypatch):
    from distro_bench.scenario import hfcorpus

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("DISTRO_BENCH_CACHE", str(tmp_path / "db"))
    cached = hfcorpus.cached_path("hf:roneneldan/TinyStories")
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"once upon a time " * 100)
    r = _validate(cli, write_scenario, data={"corpus": "hf:roneneldan/TinyStories"})
    assert r.exit_code == 0 or "datasets library" in r.output, r.output


# ---- the loss's unit in the summary ---------------------------------------------------------------------------

def test_the_summary_says_the_loss_unit_and_bits_per_byte():
    from distro_bench.results.build import model_and_loss

    starts = [{"type": "start", "params": 10, "flops_per_token": 60.0, "flops_basis": "6 x parameters (estimate)",
               "loss_unit": "nats per token (tokenizer t.json, vocabulary 300)", "val_bytes_per_token": 3.0}]
    out = model_and_loss(starts, {"adamw": {"final_val_loss": 3.0}, "distro": {"final_val_loss": None}})
    assert out["model"] == {"parameters": 10, "flops_per_token": 60.0, "flops_basis": "6 x parameters (estimate)"}
    assert out["loss"]["unit"].startswith("nats per token")
    assert out["loss"]["final_val_bits_per_byte"] == {"adamw": pytest.approx(3.0 / math.log(2) / 3.0), "distro": None}
    assert model_and_loss([{"type": "start"}], {}) == {}  # records from before: no block rather than a guess


# ---- a run, end to end -------------------------------------------------------------------------------------

@pytest.mark.slow  # two workers train a few steps (~15 s on 2 cores)
def test_a_factory_model_from_a_third_party_package_trains_and_its_folder_describes_it(plugin, tmp_path):
    from distro_bench import api
    from distro_bench.report.load import load_run

    s = scenario_from_dict(tiny_scenario_dict(model={"factory": "byomodels:bigram"},
                                              train={"steps": 12, "eval_every": 6, "seed": 0},
                                              optimizers={"adamw": {"lr": 3e-2}}))
    result = api.run(s, backend="local", out=tmp_path / "out")
    summary = json.loads((result.run_dir / "summary.json").read_text())
    adamw = summary["optimizers"]["adamw"]
    assert adamw["final_val_loss"] < adamw["first_val_loss"] - 0.1 and adamw["replicas_identical"]
    assert summary["model"] == {"parameters": 256 * 256, "flops_per_token": 6.0 * 256 * 256,
                                "flops_basis": "6 x parameters (estimate)"}
    assert summary["loss"]["unit"] == "nats per byte" and summary["loss"]["bytes_per_token"] == 1.0
    assert summary["loss"]["final_val_bits_per_byte"]["adamw"] == pytest.approx(adamw["final_val_loss"] / math.log(2))
    sys.modules.pop("byomodels", None)  # the report reads the folder alone
    text = (result.run_dir / "report.md").read_text()
    assert "Model: factory byomodels:bigram" in text and "Losses in nats per byte" in text
    assert load_run(result.run_dir).scenario["model"]["factory"] == "byomodels:bigram"


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="the optional transformers library is not installed")
def test_a_config_with_fewer_positions_than_the_sequence_is_exit_2(cli, write_scenario, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**GPT2, "n_positions": 16}))
    r = _validate(cli, write_scenario, model={"hf_config": "config.json"})  # seq_len 32
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and "model.hf_config: the transformers model of this config failed on token ids of shape [2, 32]" in said


def test_another_hosts_local_copy_of_the_run_folder_gets_the_data_files(tmp_path):
    """A multi-host run's other hosts read node 0's scenario.yaml (which names data/) from a local folder: joining
    writes data/ there from that host's own validated scenario, and leaves a shared folder's alone."""
    from distro_bench.run.lifecycle import RunLifecycle

    _bin(tmp_path / "t.bin", list(range(1000)))
    s = load_scenario(_token_scenario(tmp_path, tokens="t.bin", vocab_size=1000))
    local = tmp_path / "host1-run"
    local.mkdir()
    RunLifecycle(s, "local").join(local)
    assert np.fromfile(local / "data" / "tokens.bin", dtype=np.uint16).tolist() == list(range(1000))
    (local / "data" / "tokens.bin").write_bytes(b"node 0's")
    RunLifecycle(s, "local").join(local)  # a folder with data/ (shared, or joined before) is not written again
    assert (local / "data" / "tokens.bin").read_bytes() == b"node 0's"


def test_rows_that_are_not_token_ids_are_named(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"input_ids": [["a", "b"], ["c"]]}), tmp_path / "t.parquet")
    with pytest.raises(ScenarioError, match=re.escape("`input_ids` rows are not lists of integers")):
        load_scenario(_token_scenario(tmp_path, tokens="t.parquet", vocab_size=10))


def test_an_hf_field_of_token_ids_points_at_data_tokens(tmp_path, monkeypatch):
    pytest.importorskip("datasets")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from distro_bench.train.data import load_corpus

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("DISTRO_BENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "ds" / "data").mkdir(parents=True)
    pq.write_table(pa.table({"input_ids": [[1, 2, 3]] * 20}), tmp_path / "ds" / "data" / "train-00000-of-00001.parquet")
    with pytest.raises(InputError, match=re.escape("holds token ids, not text; give them as data.tokens")):
        load_corpus(f"hf:{tmp_path / 'ds'}:train:input_ids")


def test_an_unprivileged_worker_must_reach_the_models_package_and_the_data_copies(plugin, tmp_path):
    from distro_bench.backends.base import worker_modules, worker_reads

    s = scenario_from_dict(tiny_scenario_dict(model={"factory": "byomodels.sub:build"}))
    assert worker_modules(s) == ["module:byomodels"]
    _bin(tmp_path / "t.bin", list(range(500)))
    t = load_scenario(_token_scenario(tmp_path, tokens="t.bin", vocab_size=1000))
    assert worker_reads(t, []) == [str(tmp_path / "t.bin")]
