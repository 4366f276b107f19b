"""The tiny-model factory: a normal HF directory that round-trips exactly through save/load."""

from __future__ import annotations

import json

import pytest
import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from burnqed.policy.tiny import EOS_TOKEN, PAD_TOKEN, build_tiny_model, train_tokenizer
from tests.policy.corpus import corpus, prompts

TEXTS = [*prompts(), "intro h\nexact h", "unseen ∀ x, ∃ y 🙂 text"]


def test_saved_directory_is_a_normal_llama(tiny_model):
    names = {p.name for p in tiny_model.iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"} <= names
    config = json.loads((tiny_model / "config.json").read_text())
    assert config["model_type"] == "llama"
    assert config["head_dim"] == 32 and config["hidden_size"] == 64
    # The transformers 4 inside a server's environment must know the tokenizer class.
    tok_cfg = json.loads((tiny_model / "tokenizer_config.json").read_text())
    assert tok_cfg["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_tokenizer_round_trips_with_identical_ids(tiny_model):
    trained = train_tokenizer(corpus(), vocab_size=512)  # the same training, in memory
    raw = Tokenizer.from_file(str(tiny_model / "tokenizer.json"))
    loaded = AutoTokenizer.from_pretrained(tiny_model)
    assert loaded.eos_token == EOS_TOKEN and loaded.bos_token == EOS_TOKEN
    assert loaded.pad_token == PAD_TOKEN and loaded.pad_token_id != loaded.eos_token_id
    for text in TEXTS:
        ids = trained(text).input_ids
        assert loaded(text).input_ids == ids == raw.encode(text).ids
        assert loaded.decode(ids) == text  # byte-level: any text, Unicode included, round-trips


def test_model_round_trips_with_identical_logits(tiny_model):
    loaded = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    # The same seed and config rebuild the in-memory model the factory saved.
    torch.manual_seed(0)
    fresh = LlamaForCausalLM(LlamaConfig.from_pretrained(tiny_model)).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model)
    ids = torch.tensor([tok(TEXTS[0]).input_ids])
    with torch.inference_mode():
        a, b = loaded(ids).logits, fresh(ids).logits
    assert a.shape == (1, ids.shape[1], len(tok))
    assert torch.equal(a, b)


def test_seed_decides_the_weights(tmp_path):
    text = corpus()[:20]
    a = build_tiny_model(tmp_path / "a", text, seed=1)
    b = build_tiny_model(tmp_path / "b", text, seed=1)
    c = build_tiny_model(tmp_path / "c", text, seed=2)
    wa, wb, wc = (
        AutoModelForCausalLM.from_pretrained(p).model.embed_tokens.weight for p in (a, b, c)
    )
    assert torch.equal(wa, wb)
    assert not torch.equal(wa, wc)


def test_demo_size_is_about_point_four_million_parameters(tmp_path):
    path = build_tiny_model(
        tmp_path / "demo",
        corpus(),
        vocab_size=900,
        hidden_size=128,
        heads=4,
        kv_heads=2,
        intermediate_size=336,
    )
    model = AutoModelForCausalLM.from_pretrained(path)
    assert model.config.head_dim == 32 and model.config.num_key_value_heads == 2
    assert model.config.vocab_size < 1000
    assert 0.25e6 < sum(p.numel() for p in model.parameters()) < 0.6e6


@pytest.mark.parametrize(("hidden", "heads", "match"), [(64, 4, "head_dim"), (64, 3, "divisible")])
def test_rejects_shapes_servers_cannot_serve(tmp_path, hidden, heads, match):
    with pytest.raises(ValueError, match=match):
        build_tiny_model(tmp_path / "bad", corpus()[:5], hidden_size=hidden, heads=heads)
    assert not (tmp_path / "bad").exists()


def test_rejects_empty_corpus(tmp_path):
    with pytest.raises(ValueError, match="corpus is empty"):
        build_tiny_model(tmp_path / "empty", [])
    assert not (tmp_path / "empty").exists()
