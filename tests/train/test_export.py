"""models/iter_0/merged/: a plain model equal to base + adapter, sharded, with the base's tokenizer."""

from __future__ import annotations

import json

import pytest

from burnqed.data.prompt import format_prompt
from burnqed.train.examples import TrainingDataError
from burnqed.train.export import MergeError, merge_adapter


@pytest.fixture(scope="module")
def merged(tmp_path_factory, tiny_base, lora_adapter):
    out = tmp_path_factory.mktemp("iter_0") / "merged"
    # A tiny shard limit, so the sharded path (index + several files) is the one exercised.
    check = merge_adapter(base=tiny_base, adapter=lora_adapter, out=out, max_shard_size="100KB")
    return out, check


def test_merged_model_equals_base_plus_adapter(merged, tiny_base, lora_adapter, pairs):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from burnqed.train.examples import read_examples

    out, _ = merged
    model = AutoModelForCausalLM.from_pretrained(out)
    assert not hasattr(model, "peft_config")  # a plain model, not a PeftModel
    reference = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_base), lora_adapter
    )
    # The adapter must matter, or the comparison below would be vacuous.
    base = AutoModelForCausalLM.from_pretrained(tiny_base)
    tokenizer = AutoTokenizer.from_pretrained(out)
    tokenizer.padding_side = "left"
    prompts = [e["prompt"] for e in read_examples(pairs["val"])[:4]]
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        got = model(**enc).logits
        want = reference(**enc).logits
        unadapted = base(**enc).logits
    assert (got - want).abs().max() < 1e-4
    assert (unadapted - want).abs().max() > 1e-3


def test_merged_directory_is_sharded_with_the_base_tokenizer(merged, tiny_base, lora_adapter):
    out, check = merged
    shards = sorted(p.name for p in out.glob("*.safetensors"))
    assert len(shards) > 1 and (out / "model.safetensors.index.json").exists()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (out / name).read_bytes() == (tiny_base / name).read_bytes(), name
    assert not out.with_name("merged.tmp").exists()

    info = json.loads((out / "burnqed_merge.json").read_text(encoding="utf-8"))
    assert info["shards"] == shards
    assert info["adapter"] == str(lora_adapter) and info["dtype"] == "float32"
    assert info["check"]["tactic"] == check.tactic
    assert info["check"]["max_logit_diff"] < 1e-4
    assert info["versions"]["peft"]


def test_the_check_tactic_is_what_the_merged_model_generates(merged):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from burnqed.data.prompt import parse_completion
    from burnqed.train.export import SAMPLE_STATE

    out, check = merged
    model = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    enc = tokenizer(format_prompt(SAMPLE_STATE), return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        ids = model.generate(**enc, max_new_tokens=32, do_sample=False,
                             pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    text = tokenizer.decode(ids[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    assert parse_completion(text) == check.tactic


def test_merge_of_a_qlora_adapter_is_unquantized(tmp_path, tiny_base, pairs):
    from transformers import AutoModelForCausalLM

    from burnqed.train.sft import train_sft
    from tests.train.conftest import SFT

    pytest.importorskip("bitsandbytes")
    adapter = tmp_path / "adapter"
    cfg = {**SFT, "quantization": "nf4", "max_steps": 1, "eval_steps": 1}
    train_sft(base=tiny_base, train=pairs["train"], val=pairs["val"], out=adapter, cfg=cfg, seed=0)
    out = tmp_path / "merged"
    check = merge_adapter(base=tiny_base, adapter=adapter, out=out)
    assert check.max_logit_diff < 1e-4
    model = AutoModelForCausalLM.from_pretrained(out)
    assert type(model.model.layers[0].self_attn.q_proj).__name__ == "Linear"
    assert "quantization_config" not in json.loads((out / "config.json").read_text())


def test_missing_inputs_fail_before_anything_is_written(tmp_path, tiny_base):
    with pytest.raises(TrainingDataError, match=r"no adapter_config\.json"):
        merge_adapter(base=tiny_base, adapter=tmp_path / "none", out=tmp_path / "merged")
    with pytest.raises(TrainingDataError, match=r"no config\.json"):
        merge_adapter(base=tmp_path, adapter=tmp_path, out=tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_a_merge_that_does_not_match_fails_and_publishes_nothing(
    tmp_path, tiny_base, lora_adapter, monkeypatch
):
    # Corrupt the saved weights between save and check: the check must catch it.
    import burnqed.train.export as export

    real = export.copy_tokenizer_files

    def copy_and_corrupt(src, dst):
        names = real(src, dst)
        from safetensors.torch import load_file, save_file

        for shard in dst.glob("*.safetensors"):
            tensors = load_file(shard)
            save_file({k: v + 1.0 for k, v in tensors.items()}, shard, metadata={"format": "pt"})
        return names

    monkeypatch.setattr(export, "copy_tokenizer_files", copy_and_corrupt)
    out = tmp_path / "merged"
    with pytest.raises(MergeError, match="differ from base"):
        merge_adapter(base=tiny_base, adapter=lora_adapter, out=out)
    assert not out.exists() and (tmp_path / "merged.tmp").exists()
