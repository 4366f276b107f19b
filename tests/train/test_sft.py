"""models/iter_0/adapter/: trl + peft LoRA / QLoRA, completion-only loss, best checkpoint, records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnqed.config import ConfigError, SFTConfig
from burnqed.train.examples import TrainingDataError, read_examples
from burnqed.train.sft import (
    build_trainer,
    load_base_model,
    plan_sft,
    train_sft,
)
from tests.train.conftest import SFT


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def adapter_weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(path / "adapter_model.safetensors")


def test_lora_adapter_and_its_records(lora_adapter, tiny_base, pairs):
    assert not lora_adapter.with_name("adapter.tmp").exists()
    names = {p.name for p in lora_adapter.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "training_summary.json",
            "hyperparameters.json", "metrics.jsonl", "run_info.json"} <= names  # fmt: skip
    assert "checkpoints" not in names and "training_args.bin" not in names

    config = read_json(lora_adapter / "adapter_config.json")
    assert config["r"] == SFT["lora_r"] and config["lora_alpha"] == SFT["lora_alpha"]
    assert sorted(config["target_modules"]) == sorted(SFT["target_modules"])
    assert config["task_type"] == "CAUSAL_LM"

    # LoRA B starts at zero: non-zero B matrices mean the adapter was trained.
    weights = adapter_weights(lora_adapter)
    b = [t for n, t in weights.items() if "lora_B" in n]
    assert len(b) == 2 * len(SFT["target_modules"])  # 2 layers
    assert all(t.abs().sum() > 0 for t in b)

    summary = read_json(lora_adapter / "training_summary.json")
    assert summary["steps"] == SFT["max_steps"]
    assert [s for s, _ in summary["eval_loss"]] == [3, 6]
    best_step, best_loss = min(summary["eval_loss"], key=lambda e: e[1])
    assert summary["best_step"] == best_step
    assert summary["best_eval_loss"] == pytest.approx(best_loss)
    assert len(summary["train_loss"]) == SFT["max_steps"]
    assert 0 < summary["trainable_parameters"] < summary["total_parameters"]
    assert summary["data"]["train_examples"] == len(read_examples(pairs["train"]))
    assert summary["versions"]["trl"] and summary["versions"]["peft"]
    assert summary["determinism"]["seed"] == 0 and "wall_seconds" not in summary
    run = read_json(lora_adapter / "run_info.json")  # what a rerun does not repeat
    assert run["wall_s"] > 0 and run["created_at"] >= run["started_at"]

    hp = read_json(lora_adapter / "hyperparameters.json")
    assert hp["base_model"] == "tiny" and hp["base_path"] == str(tiny_base)
    assert hp["sft"] == SFTConfig.from_dict(SFT).to_dict()
    assert hp["iteration"] == 0 and hp["seed"] == 0
    assert hp["effective"]["learning_rate"] == SFT["learning_rate"]
    assert hp["effective"]["warm_start"] is None

    records = [json.loads(x) for x in (lora_adapter / "metrics.jsonl").read_text().splitlines()]
    # Step 0: the evaluation before training (the "before" of the summary's validation losses).
    assert [r["step"] for r in records if "eval_pairs_loss" in r] == [0, 3, 6]
    assert any("loss" in r and "learning_rate" in r for r in records)


def eval_loss(model_dir: Path, adapter: Path, val: Path, batch_size: int) -> float:
    """The trainer's eval loss: per-batch token-mean losses, averaged weighted by batch size."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from burnqed.train.base import collate, encode_examples

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), adapter)
    model.eval()
    seqs, lens, _ = encode_examples(tokenizer, read_examples(val), 256)
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(seqs), batch_size):
            batch = collate(
                seqs[i : i + batch_size], lens[i : i + batch_size], tokenizer.pad_token_id
            )
            total += model(**batch).loss.item() * len(seqs[i : i + batch_size])
    return total / len(seqs)


def test_the_summary_records_trls_step(lora_adapter):
    """The SFT stage's summary says how its step ran (issue 62): trl's trainer, right-padded, the
    model's own loss over whole logits; on the CPU float32 throughout, no autocast."""
    summary = read_json(lora_adapter / "training_summary.json")
    assert "training_step" in summary, sorted(summary)
    step = summary["training_step"]
    assert step == {
        "gpu_layout": "packed_bf16", "device": "cpu", "layout": "padded", "attention": "sdpa",
        "residual_stream": "float32", "trainable_dtypes": ["float32"], "autocast": None,
        "loss_kernel": {"kernel": "materialised",
                        "why": "trl's SFTTrainer: the model's own loss over whole logits"},
    }  # fmt: skip


def test_the_best_checkpoint_is_the_one_saved(tiny_base, pairs, tmp_path):
    """Step 1 has learning rate 0 (warm-up), steps 2–3 a rate that wrecks the model: the saved
    adapter must be step 1's, not the last one."""
    out = tmp_path / "adapter"
    cfg = {**SFT, "learning_rate": 1.0, "lr_scheduler": "linear", "warmup_steps": 3,
           "max_steps": 3, "eval_steps": 1}  # fmt: skip
    train_sft(base=tiny_base, train=pairs["train"], val=pairs["val"], out=out, cfg=cfg, seed=0)
    summary = read_json(out / "training_summary.json")
    losses = dict(summary["eval_loss"])
    assert sorted(losses) == [1, 2, 3]
    assert summary["best_step"] == 1 and losses[3] > losses[1] * 1.1
    saved = eval_loss(tiny_base, out, pairs["val"], SFT["batch_size"])
    assert saved == pytest.approx(losses[1], rel=1e-3)
    assert all(t.abs().sum() == 0 for n, t in adapter_weights(out).items() if "lora_B" in n)


def test_training_labels_mask_the_prompt(tiny_base, pairs, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    examples = read_examples(pairs["train"])[:8]
    sft = SFTConfig.from_dict(SFT)
    model = load_base_model(tiny_base, quantization="none", cuda=False)
    trainer = build_trainer(model, tokenizer, examples, examples[:2], sft, plan_sft(sft, 0, None),
                            output_dir=tmp_path / "ck", cuda=False, seed=0)  # fmt: skip
    for ex, row in zip(examples, trainer.train_dataset, strict=True):
        prompt_ids = tokenizer(ex["prompt"], add_special_tokens=False)["input_ids"]
        labels = row["labels"]
        assert labels[: len(prompt_ids)] == [-100] * len(prompt_ids)
        supervised = [t for t in labels if t != -100]
        assert tokenizer.decode(supervised) == ex["completion"] + tokenizer.eos_token


def test_qlora_nf4_trains_on_cpu(tiny_base, pairs, tmp_path):
    pytest.importorskip("bitsandbytes")
    model = load_base_model(tiny_base, quantization="nf4", cuda=False)
    assert type(model.model.layers[0].self_attn.q_proj).__name__ == "Linear4bit"

    out = tmp_path / "adapter"
    cfg = {**SFT, "quantization": "nf4", "max_steps": 2, "eval_steps": 2}
    train_sft(base=tiny_base, train=pairs["train"], val=pairs["val"], out=out, cfg=cfg, seed=0)
    summary = read_json(out / "training_summary.json")
    assert summary["steps"] == 2 and summary["best_step"] == 2
    assert read_json(out / "hyperparameters.json")["sft"]["quantization"] == "nf4"
    assert all(t.abs().sum() > 0 for n, t in adapter_weights(out).items() if "lora_B" in n)
    # trl casts a 4-bit model's adapter to bf16 (its QLoRA recipe): the summary measures it.
    assert summary["training_step"]["trainable_dtypes"] == ["bfloat16"]


def test_iteration_1_warm_starts_from_the_previous_adapter(
    lora_adapter, tiny_base, pairs, tmp_path
):
    out = tmp_path / "iter_1" / "adapter"
    train_sft(base=tiny_base, train=pairs["train"], val=pairs["val"], out=out, cfg=SFT,
              iteration=1, previous_adapter=lora_adapter, seed=0)  # fmt: skip
    hp = read_json(out / "hyperparameters.json")
    assert hp["iteration"] == 1
    assert hp["effective"]["learning_rate"] == pytest.approx(SFT["learning_rate"] * SFT["lr_decay"])
    assert hp["effective"]["max_steps"] == SFT["later_max_steps"]
    assert hp["effective"]["warm_start"] == str(lora_adapter)
    summary = read_json(out / "training_summary.json")
    assert summary["steps"] == SFT["later_max_steps"]
    assert summary["data"]["train_examples"] == SFT["base_pair_subsample"]
    # Continued, not restarted: the B matrices moved a little from the previous adapter's,
    # far less than their own size (a fresh adapter would start them at zero).
    prev, new = adapter_weights(lora_adapter), adapter_weights(out)
    for name, b in prev.items():
        if "lora_B" in name:
            assert 0 < (new[name] - b).norm() < 0.5 * b.norm(), name


def test_plan_sft():
    cfg = SFTConfig.from_dict(SFT)
    assert plan_sft(cfg, 0, None).learning_rate == cfg.learning_rate
    p2 = plan_sft(cfg, 2, Path("models/iter_1/adapter"))
    assert p2.learning_rate == pytest.approx(cfg.learning_rate * 0.25)
    assert p2.max_steps == cfg.later_max_steps and p2.base_pair_limit == cfg.base_pair_subsample
    with pytest.raises(ValueError, match="previous_adapter is required"):
        plan_sft(cfg, 1, None)
    with pytest.raises(ValueError, match="fresh adapter"):
        plan_sft(cfg, 0, Path("x"))


def test_bad_inputs_are_refused_by_name(tiny_base, pairs, tmp_path):
    out = tmp_path / "adapter"
    with pytest.raises(ConfigError, match=r"sft\.target_modules: \['qkv_proj'\]"):
        train_sft(base=tiny_base, train=pairs["train"], val=pairs["val"], out=out,
                  cfg={**SFT, "target_modules": ["q_proj", "qkv_proj"]}, seed=0)  # fmt: skip
    with pytest.raises(TrainingDataError, match=r"missing_val\.parquet"):
        train_sft(base=tiny_base, train=pairs["train"], val=tmp_path / "missing_val.parquet",
                  out=out, cfg=SFT, seed=0)  # fmt: skip
    with pytest.raises(TrainingDataError, match=r"no config\.json"):
        train_sft(base=tmp_path, train=pairs["train"], val=pairs["val"], out=out, cfg=SFT, seed=0)
    with pytest.raises(ConfigError, match=r"sft: unknown key"):
        train_sft(base=tiny_base, train=pairs["train"], val=pairs["val"], out=out,
                  cfg={**SFT, "epochs": 3}, seed=0)  # fmt: skip
    assert not out.exists()


def _bos_tokenizer(tiny_base):
    """The tiny tokenizer with a post-processor that writes BOS before every text (as Llama's)."""
    from tokenizers.processors import TemplateProcessing
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_base)
    tok.backend_tokenizer.post_processor = TemplateProcessing(
        single=f"{tok.bos_token} $A", special_tokens=[(tok.bos_token, tok.bos_token_id)]
    )
    return tok


def _edge_examples(examples, eos: str) -> list[dict[str, str]]:
    """Real examples and the cases trl's preparation treats apart: a completion that already ends
    with EOS, a prompt that does not end at a token boundary, a prompt longer than the cut."""
    return [
        *examples,
        {"prompt": examples[0]["prompt"], "completion": examples[0]["completion"] + eos},
        {"prompt": examples[1]["prompt"] + "intr", "completion": "o h"},
        {"prompt": examples[2]["prompt"] * 8, "completion": "intro h"},
        *examples[:3],  # repeated texts
    ]


@pytest.mark.parametrize("truncation_mode", ["keep_start", "keep_end"])
@pytest.mark.parametrize("bos", [False, True])
def test_completion_only_rows_are_trls_own_preparation(
    tiny_base, pairs, tmp_path, truncation_mode, bos
):
    """The rows build_trainer hands trl are the ones trl's own preparation makes of the examples
    (datasets' map, one example at a time), for a tokenizer with and without special tokens."""
    import trl
    from datasets import Dataset
    from transformers import AutoTokenizer

    from burnqed.train.loop import TokenIds, adds_no_special_tokens
    from burnqed.train.sft import completion_only_rows

    tokenizer = _bos_tokenizer(tiny_base) if bos else AutoTokenizer.from_pretrained(tiny_base)
    assert adds_no_special_tokens(tokenizer) is not bos
    examples = _edge_examples(read_examples(pairs["train"])[:30], tokenizer.eos_token)
    model = load_base_model(tiny_base, quantization="none", cuda=False)
    args = trl.SFTConfig(output_dir=str(tmp_path / "ck"), max_length=48, completion_only_loss=True,
                         truncation_mode=truncation_mode, use_cpu=True, report_to="none")  # fmt: skip
    trainer = trl.SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(examples),
                             processing_class=tokenizer)  # fmt: skip
    expected = {k: trainer.train_dataset[k] for k in ("input_ids", "labels")}
    # The cut means something here: rows are cut, and (keeping the start) some left with no label.
    assert max(len(r) for r in expected["input_ids"]) == 48
    assert (len(expected["input_ids"]) < len(examples)) is (truncation_mode == "keep_start")

    # Shared with the boundary check's cache (no special tokens) as train_sft shares it.
    ids = TokenIds(tokenizer, add_special_tokens=False).with_special_tokens(True)
    assert (ids.add_special_tokens is False) is not bos
    rows = completion_only_rows(tokenizer, examples, max_length=48,
                                truncation_mode=truncation_mode, ids=ids)  # fmt: skip
    assert rows == expected
    if bos and truncation_mode == "keep_start":  # the test means something: the ids have BOS
        assert all(r[0] == tokenizer.bos_token_id for r in rows["input_ids"])


def test_token_ids_are_one_call_per_text(tiny_base, pairs):
    from transformers import AutoTokenizer

    from burnqed.train.loop import TokenIds

    for tok in (AutoTokenizer.from_pretrained(tiny_base), _bos_tokenizer(tiny_base)):
        texts = [e["prompt"] for e in read_examples(pairs["train"])[:20]] * 2
        for special in (True, False):
            ids = TokenIds(tok, add_special_tokens=special)
            got = ids(texts[:10]) + ids(texts[10:])  # the second call tokenises only new texts
            assert got == [tok(t, add_special_tokens=special)["input_ids"] for t in texts]
            assert len(ids.ids) == len(set(texts))


def test_build_trainer_rows_and_the_boundary_check_share_one_tokenisation(
    tiny_base, pairs, tmp_path
):
    from transformers import AutoTokenizer

    from burnqed.train.loop import TokenIds
    from burnqed.train.sft import check_prompt_boundaries, completion_only_rows

    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    calls = []
    examples = read_examples(pairs["train"])[:12]

    class Counting(TokenIds):
        def __call__(self, texts):
            calls.append(len([t for t in dict.fromkeys(texts) if t not in self.ids]))
            return super().__call__(texts)

    ids = Counting(tokenizer, add_special_tokens=False)
    assert check_prompt_boundaries(tokenizer, examples, ids=ids) == 0
    sft = SFTConfig.from_dict(SFT)
    model = load_base_model(tiny_base, quantization="none", cuda=False)
    trainer = build_trainer(model, tokenizer, examples, examples[:2], sft, plan_sft(sft, 0, None),
                            output_dir=tmp_path / "ck", cuda=False, seed=0,
                            ids=ids.with_special_tokens(True))  # fmt: skip
    assert sum(calls[2:]) == 0  # the trainer's texts were all in the check's cache
    rows = completion_only_rows(tokenizer, examples, max_length=SFT["max_length"])
    assert trainer.train_dataset[:] == rows
    assert trainer.eval_dataset["pairs"][:] == completion_only_rows(
        tokenizer, examples[:2], max_length=SFT["max_length"]
    )
