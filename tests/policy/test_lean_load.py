"""A plain Llama loaded from its files without transformers (burnqed.policy.lean_load) is the model
transformers loads, bit for bit — weights, forward, tokenizer — and the backend's samples and
embeddings do not depend on which loaded it: the demo's numbers must not move with it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from burnqed.data.prompt import STOP, format_prompt
from burnqed.policy import SamplingParams, candidate_seeds, lean_load
from burnqed.policy.decoder import LlamaDecoder
from burnqed.policy.lean_load import FastTokenizer, load_tokenizer, load_weights, why_not
from burnqed.policy.transformers_backend import TransformersGenerator

CPU = torch.device("cpu")

TEXTS = [
    "",
    "p q : Prop\nh : p ∧ q\n⊢ q ∧ p",
    "p q r : Prop\nh₁ : p → q\nh₂ : q → r\n⊢ p → r",
    "  leading and trailing spaces  ",
    "intro h\nexact ⟨h.2, h.1⟩```",
    "<|endoftext|>special<|pad|> tokens in the text",
    "émoji 🧪 and ∀ x, ¬(x ∨ ¬x) → False",
    "a" * 700,
]


@pytest.fixture(scope="module")
def hf_tokenizer(tiny_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model, local_files_only=True)


@pytest.fixture(scope="module")
def hf_model(tiny_model):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model, local_files_only=True).eval()


def test_the_tiny_model_loads_lean_on_cpu_and_float32_only(tiny_model):
    assert why_not(tiny_model, device=CPU, dtype=torch.float32) is None
    assert "CPU only" in why_not(tiny_model, device=torch.device("cuda"), dtype=torch.float32)
    assert "float32" in why_not(tiny_model, device=CPU, dtype=torch.bfloat16)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"architectures": ["MistralForCausalLM"]}, "not LlamaForCausalLM"),
        ({"num_attention_heads": 4, "num_key_value_heads": 2}, "grouped-query"),
        ({"attention_bias": True}, "biases"),
        ({"hidden_act": "gelu"}, "activation"),
        ({"rope_parameters": {"rope_theta": 1e4, "rope_type": "linear", "factor": 2.0}}, "rotary"),
        ({"dtype": "bfloat16"}, "not float32"),
        ({"attn_implementation": "eager"}, "attention implementation"),
    ],
)
def test_anything_else_goes_through_transformers(tiny_model, tmp_path, change, reason):
    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    cfg = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**cfg, **change}))
    assert reason in why_not(model, device=CPU, dtype=torch.float32)


def test_another_tokenizer_class_goes_through_transformers(tiny_model, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    cfg = json.loads((model / "tokenizer_config.json").read_text())
    (model / "tokenizer_config.json").write_text(
        json.dumps({**cfg, "tokenizer_class": "LlamaTokenizerFast", "add_bos_token": True})
    )
    assert "tokenizer class" in why_not(model, device=CPU, dtype=torch.float32)
    assert not isinstance(load_tokenizer(model), FastTokenizer)


def test_a_weights_file_that_does_not_match_its_config_names_the_tensor(tiny_model, tmp_path):
    from safetensors.torch import load_file, save_file

    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    tensors = load_file(model / "model.safetensors")
    tensors["model.layers.0.self_attn.q_proj.bias"] = torch.zeros(4)
    save_file(tensors, model / "model.safetensors")
    with pytest.raises(
        ValueError, match=r"unexpected tensor model\.layers\.0\.self_attn\.q_proj\.bias"
    ):
        load_weights(model)
    del tensors["model.layers.0.self_attn.q_proj.bias"], tensors["model.norm.weight"]
    save_file(tensors, model / "model.safetensors")
    with pytest.raises(ValueError, match=r"no tensor model\.norm\.weight"):
        load_weights(model)


def test_weights_are_the_models(tiny_model, hf_model):
    weights = load_weights(tiny_model)
    params = dict(hf_model.named_parameters())
    assert torch.equal(weights.embed, params["model.embed_tokens.weight"])
    assert torch.equal(weights.lm_head, hf_model.lm_head.weight)
    assert torch.equal(weights.norm.weight, params["model.norm.weight"])
    assert weights.norm.variance_epsilon == hf_model.model.norm.variance_epsilon
    for i, layer in enumerate(weights.layers):
        hf = hf_model.model.layers[i]
        assert layer[5] == hf.self_attn.scaling
        assert layer[0].variance_epsilon == hf.input_layernorm.variance_epsilon
        assert torch.equal(layer[1], hf.self_attn.q_proj.weight)
        assert torch.equal(layer[9], hf.mlp.down_proj.weight)
    assert torch.equal(weights.rotary.inv_freq, hf_model.model.rotary_emb.inv_freq)
    positions = torch.arange(40).unsqueeze(0) + 7
    h = torch.zeros(1, 40, 8)
    for mine, theirs in zip(
        weights.rotary(h, positions), hf_model.model.rotary_emb(h, positions), strict=True
    ):
        assert torch.equal(mine, theirs)


def test_the_decoder_from_files_is_the_models_forward_bitwise(tiny_model, hf_model, hf_tokenizer):
    dec = LlamaDecoder.from_weights(load_weights(tiny_model))
    torch.manual_seed(0)
    with torch.inference_mode():
        for rows, text in zip((1, 8, 16), TEXTS[1:4], strict=True):
            ids = hf_tokenizer(format_prompt(text), return_tensors="pt").input_ids
            ids = ids.expand(rows, -1).contiguous()
            out = hf_model(input_ids=ids, use_cache=True)
            logits, cache = dec.forward(ids)
            assert torch.equal(out.logits, logits)
            state = dec.begin(cache, ids.shape[1] + 4)
            hf_cache = out.past_key_values
            for _ in range(4):
                nxt = torch.randint(2, hf_model.config.vocab_size, (rows, 1))
                out = hf_model(input_ids=nxt, past_key_values=hf_cache, use_cache=True)
                hf_cache = out.past_key_values
                assert torch.equal(out.logits, dec.step(nxt, state))
            hidden = hf_model.base_model(input_ids=ids[:1]).last_hidden_state
            assert torch.equal(hidden, dec.hidden(ids[:1]))


def test_the_tokenizer_is_transformers_own(tiny_model, hf_tokenizer):
    tok = FastTokenizer.from_dir(tiny_model)
    assert len(tok) == len(hf_tokenizer)
    for name in ("bos_token_id", "eos_token_id", "pad_token_id", "eos_token", "pad_token"):
        assert getattr(tok, name) == getattr(hf_tokenizer, name), name
    for text in TEXTS:
        assert tok(text).input_ids == hf_tokenizer(text).input_ids
        assert tok(text)["input_ids"] == hf_tokenizer(text)["input_ids"]
        plain = hf_tokenizer(text, add_special_tokens=False).input_ids
        assert tok(text, add_special_tokens=False).input_ids == plain
        pt = hf_tokenizer(format_prompt(text), return_tensors="pt").input_ids
        assert torch.equal(tok(format_prompt(text), return_tensors="pt").input_ids, pt)
        for limit in (1, 5, 64, 512):
            want = hf_tokenizer(text, truncation=True, max_length=limit).input_ids
            assert tok(text, truncation=True, max_length=limit).input_ids == want, limit
    gen = torch.Generator().manual_seed(0)
    seqs = [torch.randint(0, len(tok), (n,), generator=gen).tolist() for n in range(0, 40, 3)]
    seqs += [[0, 5, 0, 1, 70], [1], [200, 201, 202]]  # special tokens, partial bytes
    for skip in (False, True):
        assert tok.batch_decode(seqs, skip_special_tokens=skip) == hf_tokenizer.batch_decode(
            seqs, skip_special_tokens=skip
        )
        for ids in seqs:
            assert tok.decode(ids, skip_special_tokens=skip) == hf_tokenizer.decode(
                ids, skip_special_tokens=skip
            )
    assert tok.decode(70) == hf_tokenizer.decode(70)


def test_a_batch_or_padding_names_the_tokenizer_that_does_them(tiny_model):
    """What the lean tokenizer does not do fails at the call, naming transformers' loader."""
    tok = FastTokenizer.from_dir(tiny_model)
    with pytest.raises(TypeError, match=r"\(a batch\).*burnqed\.train\.loop\.load_tokenizer"):
        tok(TEXTS[:2])
    with pytest.raises(TypeError, match=r"\(padding: unsupported\).*load_tokenizer"):
        tok(TEXTS[0], padding=True)


def test_samples_and_embeddings_do_not_depend_on_the_loader(tiny_model, monkeypatch):
    lean = TransformersGenerator(tiny_model)
    assert lean._model is None and isinstance(lean.tokenizer, FastTokenizer)
    monkeypatch.setattr(lean_load, "why_not", lambda *a, **k: "forced for the test")
    monkeypatch.setattr(lean_load, "tokenizer_unsupported", lambda *a: "forced for the test")
    hf = TransformersGenerator(tiny_model)
    assert hf._model is not None and not isinstance(hf.tokenizer, FastTokenizer)
    assert hf.decoder is not None and lean.eos_ids == hf.eos_ids
    assert lean.hidden_size == hf.hidden_size and lean._context_limit == hf._context_limit
    prompts = [format_prompt(s) for s in TEXTS[1:4]]
    for n in (8, 16):
        params = SamplingParams(n=n, temperature=1.2, max_new_tokens=24, stop=STOP)
        seeds = [candidate_seeds(3, "t", 0, p, n) for p in prompts]
        assert lean.sample(prompts, params, seeds) == hf.sample(prompts, params, seeds)
    assert (lean.embed(TEXTS[1:]) == hf.embed(TEXTS[1:])).all()
    lean.close()
    assert lean.model is None  # closed: never loaded afterwards
    hf.close()


def test_a_job_on_the_lean_path_never_imports_transformers(tiny_model):
    """The point of the module: the ~3 s of transformers' imports are not paid."""
    code = (
        "import sys\n"
        "from burnqed.policy.transformers_backend import TransformersGenerator\n"
        "from burnqed.policy import SamplingParams\n"
        f"g = TransformersGenerator({str(tiny_model)!r})\n"
        "g.generate(['p'], SamplingParams(n=2, temperature=1.0, max_new_tokens=4), [[1, 2]])\n"
        "g.embed(['p'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'transformers'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path.cwd()
    )
    assert out.stdout.strip() == "[]", out.stdout[-500:]
