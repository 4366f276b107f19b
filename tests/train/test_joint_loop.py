"""Joint training's step and optimiser, as the recipe and ``bench/gpu.py`` both run them: one step
converts no tensor that requires grad to a number (torch warns on that), the optimiser has the
LoRA, the head's layers and its scale in three groups on their own schedules."""

from __future__ import annotations

import warnings

import pytest
import torch

from burnqed.config import EBMConfig, SFTConfig
from burnqed.ebm.train import build_head
from burnqed.train.joint import (
    LossScales,
    accumulate,
    collate,
    optimizer,
    tokenize_example,
    train_step,
)

STATES = ["p q : Prop\n⊢ p ∧ q → q", "p q : Prop\nh : p ∧ q\n⊢ q", "p : Prop\n⊢ p"]
GOAL = "p q : Prop\n⊢ p ∧ q → q ∧ p"


@pytest.fixture(scope="module")
def peft_model(tiny_base, lora_adapter):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32)
    model = PeftModel.from_pretrained(model, str(lora_adapter), is_trainable=True)
    tok = AutoTokenizer.from_pretrained(tiny_base)
    tok.pad_token = tok.pad_token or tok.eos_token
    return model, tok


def _batch(tok, *, groups: bool):
    ex = {"prompt": "```lean4\n/- tactic state:\n  ⊢ p → p\n-/\n```\n", "completion": "intro h"}
    states = [tok(s).input_ids for s in STATES] if groups else []
    goals = [tok(GOAL).input_ids] if groups else []
    return collate(tok, [tokenize_example(tok, ex, 128)], states, goals, len(STATES))


def test_a_joint_step_warns_of_no_scalar_taken_from_a_tensor_requiring_grad(peft_model):
    """Two micro-batches of a step: no UserWarning (the losses are read detached), the returned
    losses are the micro-batches' means, and both the LoRA and the head got gradients."""
    model, tok = peft_model
    torch.manual_seed(0)
    head = build_head(model.get_base_model().config.hidden_size, EBMConfig(hidden_sizes=(32, 16)))
    sft = SFTConfig(grad_accum=2, warmup_steps=1, joint_lambda=0.5)
    opt, schedule = optimizer(model, head, sft, learning_rate=1e-3, max_steps=4)
    scales = LossScales()
    batch = _batch(tok, groups=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        record = train_step(model, head, opt, schedule, scales, [batch, batch], sft=sft,
                            pooling="last", step=0, seed=0)  # fmt: skip
    assert record["sft_loss"] > 0 and record["nce_loss"] > 0
    assert record["grad_norm_lora"] > 0 and record["grad_norm_head"] > 0
    assert scales.sft == pytest.approx(record["sft_loss"], rel=1e-5)  # two equal micro-batches
    assert record["lr_head_scale"] == sft.joint_scale_learning_rate  # constant, no warm-up


def test_an_sft_only_step_has_no_infonce_and_trains_the_lora_alone(peft_model):
    """Without groups (the SFT step ``bench/gpu.py`` times): one optimiser group, no InfoNCE."""
    model, tok = peft_model
    opt, _ = optimizer(model, None, SFTConfig(), learning_rate=1e-3, max_steps=4)
    assert [g["name"] for g in opt.param_groups] == ["lora"]
    scales = LossScales()
    opt.zero_grad(set_to_none=True)
    sft_v, nce_v, _ = accumulate(model, None, [_batch(tok, groups=False)], scales, lam=0.5,
                              pooling="last", grad_accum=1)  # fmt: skip
    assert sft_v > 0 and nce_v is None and scales.sft is None
    assert any(p.grad is not None for p in opt.param_groups[0]["params"])


def test_the_optimiser_puts_the_heads_scale_apart_from_its_layers(peft_model):
    """Three groups: the LoRA and the head's layers on the cosine (0 at step 0 with warm-up), the
    head's scale (``log_temperature`` and the remaining-steps level: names outside ``layers.``)
    constant from step 0."""
    model, _ = peft_model
    head = build_head(model.get_base_model().config.hidden_size, EBMConfig(hidden_sizes=(32, 16)))
    sft = SFTConfig(warmup_steps=2, joint_head_learning_rate=1e-3, joint_scale_learning_rate=1e-2)
    opt, schedule = optimizer(model, head, sft, learning_rate=5e-4, max_steps=10)
    assert [g["name"] for g in opt.param_groups] == ["lora", "head", "head_scale"]
    names = {id(p): n for n, p in head.named_parameters()}
    assert [names[id(p)] for p in opt.param_groups[2]["params"]] == [
        "log_temperature", "remaining_bias",
    ]  # fmt: skip
    assert all(names[id(p)].startswith("layers.") for p in opt.param_groups[1]["params"])
    assert schedule.get_last_lr() == [0.0, 0.0, 1e-2]
    opt.step()  # no gradients: nothing moves, the schedule advances as in training
    schedule.step()
    assert schedule.get_last_lr() == pytest.approx([2.5e-4, 5e-4, 1e-2])
