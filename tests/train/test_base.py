"""models/base/: the tiny Llama trained from scratch, a local base copied, bad inputs refused."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from burnqed.config import ConfigError
from burnqed.data.benchmarks import sha256_file
from burnqed.data.prompt import format_example
from burnqed.train.artifacts import staged_dir
from burnqed.train.base import (
    TinyBaseConfig,
    build_base,
    collate,
    encode_examples,
    train_from_scratch,
)
from burnqed.train.examples import TrainingDataError, read_examples
from tests.train.conftest import TINY


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_tiny_base_is_a_trained_hf_directory_with_its_record(tiny_base, pairs):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert not tiny_base.with_name("base.tmp").exists()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "generation_config.json", "burnqed_model.json", "metrics.jsonl"):  # fmt: skip
        assert (tiny_base / name).is_file(), name
    info = json.loads((tiny_base / "burnqed_model.json").read_text(encoding="utf-8"))
    assert info["base"] == "tiny"
    assert info["seed"] == 0
    assert info["sizes"]["hidden_size"] == 64 and info["sizes"]["layers"] == 2
    assert info["sizes"]["head_dim"] == 32
    assert info["sizes"]["vocab_size"] <= TINY["vocab_size"]
    assert info["tiny"]["steps"] == TINY["steps"]
    assert info["training"]["steps"] == TINY["steps"]
    assert info["training"]["stopped_by"] == "steps"
    assert info["training"]["examples"] == pq.read_metadata(pairs["train"]).num_rows
    loss = info["training"]["loss"]
    # From scratch the loss starts near ln(vocab) and a few dozen steps at least halve it.
    assert loss["initial"] > 4.0
    assert loss["final"] < 0.5 * loss["initial"]
    assert loss["curve"][0][0] == 1 and loss["curve"][-1][0] == TINY["steps"]
    assert info["data"]["pairs_sha256"] == sha256_file(pairs["train"])
    assert info["data"]["val_sha256"] == sha256_file(pairs["val"])
    assert info["versions"]["torch"] and info["versions"]["transformers"]
    assert "commit" in info["git"]
    held = info["held_out"]
    assert held["pairs"] == TINY["eval_pairs"]
    assert 0.0 <= held["top1"] <= 1.0 and 0.0 <= held["any_of_4"] <= 1.0
    assert held["loss"] < loss["initial"]

    records = read_jsonl(tiny_base / "metrics.jsonl")
    steps = [r["step"] for r in records if "loss" in r]
    assert steps == sorted(steps) and steps[0] == 1 and steps[-1] == TINY["steps"]
    assert any("val_top1" in r for r in records)

    model = AutoModelForCausalLM.from_pretrained(tiny_base)
    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    assert model.config.vocab_size == len(tokenizer)
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params == info["parameters"]


def test_training_from_scratch_moves_every_parameter_and_lowers_the_loss(tmp_path, pairs):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from burnqed.policy.tiny import build_tiny_model

    examples = read_examples(pairs["train"])[:256]
    path = build_tiny_model(tmp_path / "m", [e["prompt"] + e["completion"] for e in examples],
                            vocab_size=300, hidden_size=64, heads=2, intermediate_size=128)  # fmt: skip
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    cfg = TinyBaseConfig(**{**TINY, "steps": 30, "warmup_steps": 3, "log_every": 5})
    result = train_from_scratch(model, tokenizer, examples, cfg, seed=0)
    unchanged = [n for n, p in model.named_parameters() if torch.equal(p, before[n])]
    assert unchanged == []
    assert result.steps == 30 and result.stopped_by == "steps"
    assert result.final_loss < result.initial_loss - 1.0
    assert result.tokens > 0


def test_labels_supervise_exactly_the_completion_and_eos(tiny_base):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    examples = [format_example("p q : Prop\nh : p ∧ q\n⊢ q ∧ p", "obtain ⟨h1, h2⟩ := h"),
                format_example("p : Prop\n⊢ p → p", "intro h")]  # fmt: skip
    seqs, prompt_lens, skipped = encode_examples(tokenizer, examples, max_length=256)
    assert skipped == 0
    batch = collate(seqs, prompt_lens, tokenizer.pad_token_id)
    for i, ex in enumerate(examples):
        labels = batch["labels"][i]
        supervised = labels[labels != -100].tolist()
        assert tokenizer.decode(supervised) == ex["completion"] + tokenizer.eos_token
        assert (labels[: prompt_lens[i]] == -100).all()
        # Separate tokenization equals tokenizing the joined text (the prompt ends at "\n").
        joined = tokenizer(ex["prompt"] + ex["completion"], add_special_tokens=False)["input_ids"]
        assert seqs[i][:-1] == joined
    # The shorter example is right-padded; padding is neither attended nor supervised.
    short = 1 if len(seqs[1]) < len(seqs[0]) else 0
    n = len(seqs[short])
    assert batch["attention_mask"][short, n:].sum() == 0
    assert (batch["labels"][short, n:] == -100).all()


def test_too_long_examples_are_skipped_and_counted(tiny_base):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    examples = [format_example("p : Prop\n⊢ p → p", "intro h"),
                format_example("p : Prop\n⊢ " + " ∧ ".join(["p"] * 200), "constructor")]  # fmt: skip
    seqs, _, skipped = encode_examples(tokenizer, examples, max_length=64)
    assert skipped == 1 and len(seqs) == 1


def test_wall_clock_cap_stops_training(tmp_path, tiny_base, pairs):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_base)
    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    cfg = TinyBaseConfig(**{**TINY, "steps": 100_000, "max_seconds": 0.3})
    result = train_from_scratch(model, tokenizer, read_examples(pairs["train"])[:64], cfg, seed=0)
    assert result.stopped_by == "time"
    assert 1 <= result.steps < 100_000
    assert result.curve[-1][0] == result.steps


def test_a_local_base_directory_is_copied(tmp_path, tiny_base):
    out = tmp_path / "models" / "base"
    build_base(out=out, cfg={"base": str(tiny_base)}, pairs=None, seed=0)
    assert (out / "model.safetensors").read_bytes() == (
        tiny_base / "model.safetensors"
    ).read_bytes()
    info = json.loads((out / "burnqed_model.json").read_text(encoding="utf-8"))
    assert info["kind"] == "local directory" and info["base"] == str(tiny_base)
    assert "model.safetensors" in info["files"]


def test_an_unreachable_hub_model_fails_and_leaves_no_output(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "base"
    with pytest.raises(Exception):  # noqa: B017 - whichever error the hub client raises offline
        build_base(out=out, cfg={"base": "burnqed-tests/no-such-model"}, pairs=None, seed=0)
    assert not out.exists()


def test_tiny_needs_pairs_and_names_bad_files(tmp_path):
    with pytest.raises(TrainingDataError, match="tactic pairs"):
        build_base(out=tmp_path / "b", cfg={"base": "tiny"}, pairs=None, seed=0)
    missing = tmp_path / "nope.parquet"
    with pytest.raises(TrainingDataError, match=r"nope\.parquet"):
        build_base(out=tmp_path / "b", cfg={"base": "tiny"}, pairs=missing, seed=0)
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"state": ["⊢ p"], "tactic": ["exact h"]}), bad)
    with pytest.raises(TrainingDataError, match=r"bad\.parquet: missing column 'source'"):
        build_base(out=tmp_path / "b", cfg={"base": "tiny"}, pairs=bad, seed=0)
    assert not (tmp_path / "b").exists()


def test_tiny_config_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"model\.tiny: unknown key\(s\) \['hiden_size'\]"):
        TinyBaseConfig.from_dict({"hiden_size": 64})
    with pytest.raises(ConfigError, match=r"model\.tiny\.heads"):
        TinyBaseConfig.from_dict({"hidden_size": 100, "heads": 3})
    with pytest.raises(ConfigError, match=r"model\.tiny\.max_seconds"):
        TinyBaseConfig.from_dict({"max_seconds": 0})
    assert TinyBaseConfig.from_dict(None) == TinyBaseConfig()
    with pytest.raises(ConfigError, match=r"model: unknown key"):
        build_base(out=Path("unused"), cfg={"base": "tiny", "size": 1}, pairs=None, seed=0)


def test_staged_dir_publishes_only_complete_output(tmp_path):
    out = tmp_path / "adapter"
    with staged_dir(out) as tmp:
        (tmp / "weights").write_text("v1")
    assert (out / "weights").read_text() == "v1"
    with pytest.raises(RuntimeError), staged_dir(out) as tmp:
        (tmp / "weights").write_text("half")
        raise RuntimeError("crash mid-write")
    # The complete previous result survives; the partial one keeps the .tmp name.
    assert (out / "weights").read_text() == "v1"
    assert (tmp_path / "adapter.tmp" / "weights").read_text() == "half"
    with staged_dir(out) as tmp:
        (tmp / "weights").write_text("v2")
    assert (out / "weights").read_text() == "v2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adapter"]
