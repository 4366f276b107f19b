"""The joint step's memory plan for DeepSeek-Prover-V2-7B, from real module shapes on ``meta``."""

from __future__ import annotations

import itertools

from burnqed.train.memory import DEEPSEEK_PROVER_V2_7B, GIB, NF4_BITS, joint_step_plan, plan_table

# bench/gpu.py --configfile config/a100-7b.yaml on one H200 (2026-11-26): max_memory_allocated of
# the joint steps (docs/cloud.md §9).
MEASURED_JOINT_PEAK_GIB = 51.43


def test_the_7b_plan_counts_the_real_modules():
    a = DEEPSEEK_PROVER_V2_7B
    r, heads = 64, (2048, 1024, 512)
    plan = joint_step_plan(
        a, lora_r=r, head_sizes=heads, sft_batch=8, sft_length=1024, groups=4, group_size=8,
        state_length=512,
    )  # fmt: skip
    h, f, v, n = a.hidden, a.ffn, a.vocab, a.layers
    p = plan["params"]
    # LLaMA: untied embeddings and head; attention 4·h² (no biases), SwiGLU 3·h·f, two RMSNorms.
    assert p["base"] == 2 * v * h + n * (4 * h * h + 3 * h * f + 2 * h) + h
    assert abs(p["base"] - 6.91e9) < 0.01e9  # the model card's "7B" (6.9B parameters)
    assert p["base_quantised_linear"] == n * (4 * h * h + 3 * h * f)
    # LoRA r on q, k, v, o (h → h), gate, up (h → f), down (f → h): r·(in + out) each.
    assert p["lora"] == n * r * (4 * 2 * h + 2 * (h + f) + (f + h))
    # The head: [z; g; z ⊙ g] (3h) → 2048 → 1024 → 512 → 1, with biases, its temperature and its
    # remaining-steps level.
    sizes = [3 * h, *heads, 1]
    assert p["head"] == sum(i * o + o for i, o in itertools.pairwise(sizes)) + 2
    assert p["trainable"] == p["lora"] + p["head"]
    b = plan["bytes"]
    assert b["optimizer_states"] == 8 * p["trainable"] and b["gradients"] == 4 * p["trainable"]
    assert b["base_weights_nf4"] == p["base_quantised_linear"] * NF4_BITS / 8
    assert plan["total_bytes"] == sum(b.values())
    # Rows padded to the longest (1,024) and a float32 residual stream, as training runs today.
    assert plan["shape"]["positions_per_step"] == (8 + 4 * 9) * 1024
    assert b["activations_checkpointed_inputs"] == n * (8 + 4 * 9) * 1024 * 4 * h
    # Against the measurement (bench/gpu.py on one H200, docs/cloud.md §9): the step peaked at
    # 51.43 GiB allocated; the plan is an estimate of the same step within 15 %.
    assert abs(plan["total_gib"] - MEASURED_JOINT_PEAK_GIB) < 0.15 * MEASURED_JOINT_PEAK_GIB
    # ... which is over the reproduced system's 36 GB target (reference/value-model-v2.md §3).
    assert not plan["fits_36gb"]
    table = plan_table(plan)
    assert "| total |" in table and "exact" in table and "estimate" in table


def test_longer_sequences_cost_activations_not_parameters():
    kw = dict(lora_r=64, head_sizes=(2048, 1024, 512), groups=4, group_size=8, state_length=512)
    short = joint_step_plan(DEEPSEEK_PROVER_V2_7B, sft_batch=8, sft_length=512, **kw)
    long = joint_step_plan(DEEPSEEK_PROVER_V2_7B, sft_batch=8, sft_length=2048, **kw)
    assert short["params"] == long["params"]
    assert long["bytes"]["logits_and_grad"] == 4 * short["bytes"]["logits_and_grad"]
    assert not joint_step_plan(DEEPSEEK_PROVER_V2_7B, sft_batch=32, sft_length=4096, **kw)[
        "fits_36gb"
    ]


def test_padding_and_float32_activations_are_what_separates_the_old_plan_from_the_measured_step():
    kw = dict(lora_r=64, head_sizes=(2048, 1024, 512), sft_batch=8, sft_length=1024, groups=4,
              group_size=8, state_length=512)  # fmt: skip
    today = joint_step_plan(DEEPSEEK_PROVER_V2_7B, **kw)
    old = joint_step_plan(DEEPSEEK_PROVER_V2_7B, padded=False, activation_bytes=2, **kw)
    # The first plan: bf16 activations over the real tokens only, under the 36 GB target.
    assert old["shape"]["positions_per_step"] == 8 * 1024 + 4 * 9 * 512
    # (24.5 GiB then; the plan now also counts the float32 copies a 16-bit stream's RMSNorms make)
    first = old["total_gib"] - old["bytes"]["activations_norms_fp32"] / GIB
    assert old["fits_36gb"] and 24 < first < 25
    assert old["params"] == today["params"]
    unchanged = ("base_weights_nf4", "base_weights_fp32", "trainable_weights", "gradients",
                 "optimizer_states", "logits_and_grad")  # fmt: skip
    assert all(old["bytes"][k] == today["bytes"][k] for k in unchanged)
    ratio = (8 + 4 * 9) * 1024 / (8 * 1024 + 4 * 9 * 512) * 2  # positions x bytes per element
    got = today["bytes"]["activations_checkpointed_inputs"]
    assert got == ratio * old["bytes"]["activations_checkpointed_inputs"]


# bench/gpu-device.sh compare on one H200 (2026-11-27, docs/cloud.md §8–9): max_memory_allocated of
# the joint and SFT-only steps, the branch point's padded float32 layout and the packed bf16 one.
MEASURED = {"padded": {"joint": 51.43, "sft": 21.97}, "packed": {"joint": 20.89, "sft": 11.02}}


def test_the_plan_of_each_layout_is_within_10_percent_of_its_measured_step():
    from burnqed.train.memory import PACKED_BF16, PADDED_FP32

    kw = dict(lora_r=64, head_sizes=(2048, 1024, 512), sft_batch=8, sft_length=1024,
              group_size=8, state_length=512, lora_dropout=0.05)  # fmt: skip
    for name, layout in (("padded", PADDED_FP32), ("packed", PACKED_BF16)):
        for step, groups in (("joint", 4), ("sft", 0)):
            plan = joint_step_plan(DEEPSEEK_PROVER_V2_7B, groups=groups, **kw, **layout)
            measured = MEASURED[name][step]
            assert abs(plan["total_gib"] / measured - 1) < 0.10, (name, step, plan["total_gib"])
    packed = joint_step_plan(DEEPSEEK_PROVER_V2_7B, groups=4, **kw, **PACKED_BF16)
    padded = joint_step_plan(DEEPSEEK_PROVER_V2_7B, groups=4, **kw, **PADDED_FP32)
    # Packed: the real tokens only (26,624 of 45,056 positions); the step fits the 36 GB target.
    assert packed["shape"]["positions_per_step"] == 8 * 1024 + 4 * 9 * 512
    assert packed["fits_36gb"] and not padded["fits_36gb"]
    b = packed["bytes"]
    assert "logits_and_grad" not in b and b["fused_loss_chunk"] < 0.5 * GIB
    assert b["base_weights_bf16"] * 2 == padded["bytes"]["base_weights_fp32"]
    assert b["activations_checkpointed_inputs"] * 2 * 45056 == (
        padded["bytes"]["activations_checkpointed_inputs"] * 26624
    )
    # Without dropout the adapted layers keep no dropped-out copies of their inputs.
    no_dropout = joint_step_plan(DEEPSEEK_PROVER_V2_7B, groups=4, **{**kw, "lora_dropout": 0.0},
                                 **PACKED_BF16)  # fmt: skip
    assert "activations_lora_dropout" not in no_dropout["bytes"]
    assert no_dropout["total_bytes"] == packed["total_bytes"] - b["activations_lora_dropout"]
