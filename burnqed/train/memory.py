"""The GPU memory of one joint training step of a 7B prover, planned from the real module shapes.

Joint training (``sft.mode: joint``) runs one forward pass of the policy on a mixed batch — the SFT
examples and the contrastive groups' states and goals — and back-propagates SFT cross-entropy plus
λ·InfoNCE through LoRA into the backbone and the energy head.  Whether a step fits the GPU is the
first question of a real run; this module answers it before one is rented:

- **from the real modules** (exact): the architecture is built on PyTorch's ``meta`` device (shapes,
  no memory), the LoRA adapter applied with peft exactly as training does, and the energy head
  built by :func:`burnqed.ebm.train.build_head`; parameter counts, trainable counts and their
  optimizer state are read off those modules;
- **estimated** (documented, not measured here): the 4-bit weight storage and the activations at the
  configured sequence lengths and batch.

What each figure assumes, in the two layouts (:data:`PADDED_FP32`, the branch point of issue 47 and
the plan's defaults; :data:`PACKED_BF16`, what training on CUDA runs since):

- the decoder's linear layers in NF4 with double quantisation: 4 bits per weight plus 8-bit block
  constants per 64 weights and 32-bit second-level constants per 256 blocks (bitsandbytes) —
  ``4 + 8/64 + 32/(64·256)`` ≈ 4.127 bits;
- everything else of the base (embeddings, ``lm_head``, norms): float32 in the padded layout
  (``prepare_model_for_kbit_training`` casts them up), bf16 as saved in the packed one
  (:func:`burnqed.train.loop.prepare_bf16_training`) — ``base_bytes``;
- trainable parameters (LoRA A/B, the head) in float32 with float32 gradients and AdamW's two
  float32 moments: 16 bytes each;
- positions: padded, every row of a micro-batch as long as its longest (:func:`burnqed.train.joint.
  collate`: a 512-token state occupies 1,024 positions beside 1,024-token SFT rows, ``rows ×
  width``); packed, the real tokens end to end (:func:`burnqed.train.joint.collate_packed`, rounded
  up to flex attention's 128-position block);
- the residual stream (``activation_bytes``): float32 in the padded layout (the float32 embeddings
  make it so; the 4-bit layers compute in bf16 and hand float32 back), bf16 in the packed one;
- activations with gradient checkpointing at every decoder layer (what training turns on with a
  GPU): the checkpointed layer inputs (``activation_bytes·h`` bytes per position per layer), and one
  layer's activations during recomputation — ≈ ``34·h`` bytes per position in 16-bit with a fused
  attention kernel (Korthikanti et al. 2022 without the ``5·a·s²`` attention-score term, which
  SDPA/flash/flex attention never materialise) scaled by ``activation_bytes / 2``; with a 16-bit
  stream, the float32 copy each of the layer's two RMSNorms normalises (``8·h``); with
  ``sft.lora_dropout`` > 0, each adapted layer's dropped-out input and its mask
  (``(activation_bytes + 1)·(6·h + ffn)``: six layers read an ``h``-wide input, ``down_proj`` an
  ``ffn``-wide one);
- the SFT loss: float32 logits of every SFT position with their gradient (``2·4·V`` bytes per
  token), or with the fused loss one chunk's bf16 logits and float32 softmax (Liger's chunk of
  ≈ ``sft_tokens / ⌈V/h⌉`` tokens, a power of 2) beside the scored hidden states and their
  gradient; the contrastive sequences need hidden states only (pooled embeddings), no logits.

Measured (``bench/gpu-device.sh compare``, one H200, 2026-11-27; ``docs/cloud.md`` §9), at
``config/a100-7b.yaml``'s shape and ``lora_dropout`` 0.05: the padded float32 step peaked at 51.4 GiB
allocated (63.4 GiB reserved), this plan says 54.7 GiB (+6 %); the packed bf16 step peaked at
20.9 GiB allocated (22.9 GiB reserved), the plan says 20.5 GiB (−2 %).  Earlier plans: 24.5 GiB
(bf16 activations over the real tokens only, before any measurement), then 47.3 GiB (padding and
the float32 stream, no dropout term).

Example::

    >>> from burnqed.train.memory import DEEPSEEK_PROVER_V2_7B, PACKED_BF16, joint_step_plan
    >>> plan = joint_step_plan(DEEPSEEK_PROVER_V2_7B, lora_r=64, head_sizes=(2048, 1024, 512),
    ...                        sft_batch=8, sft_length=1024, groups=4, group_size=8,
    ...                        state_length=512, lora_dropout=0.05,
    ...                        **PACKED_BF16)                            # doctest: +SKIP
    >>> round(plan["params"]["base"] / 1e9, 2), round(plan["total_gib"], 1)  # doctest: +SKIP
    (6.91, 20.5)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

NF4_BITS = 4 + 8 / 64 + 32 / (64 * 256)  # bitsandbytes NF4 with double quantisation
GIB = 2**30
TARGET_GB = 36  # the reproduced system's target for one joint step (reference/value-model-v2.md §3)
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# The two layouts of a training step (joint_step_plan's keywords): the branch point of issue 47
# (rows right-padded, everything float32 after prepare_model_for_kbit_training, whole float32
# logits), and what training on CUDA runs since (packed, a bf16 residual stream, the fused loss).
PADDED_FP32 = {"padded": True, "activation_bytes": 4, "base_bytes": 4, "fused_loss": False}
PACKED_BF16 = {"padded": False, "activation_bytes": 2, "base_bytes": 2, "fused_loss": True}


@dataclass(frozen=True)
class Architecture:
    """A LLaMA-style decoder (what ``LlamaConfig`` needs)."""

    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int
    tied_embeddings: bool = False


# DeepSeek-Prover-V2-7B is built on DeepSeek-Prover-V1.5-Base (DeepSeekMath 7B, LLaMA-style).  Check
# against the model's config.json at the first real run (num_hidden_layers, hidden_size,
# intermediate_size, num_attention_heads, num_key_value_heads, vocab_size, tie_word_embeddings).
DEEPSEEK_PROVER_V2_7B = Architecture(
    layers=30, hidden=4096, ffn=11008, heads=32, kv_heads=32, vocab=102400
)


def meta_modules(arch: Architecture, *, lora_r: int, lora_alpha: int, head_sizes: Sequence[int]):
    """The base model with its LoRA adapter (peft) and the energy head, on the ``meta`` device."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from burnqed.config import EBMConfig
    from burnqed.ebm.train import build_head

    config = LlamaConfig(
        num_hidden_layers=arch.layers,
        hidden_size=arch.hidden,
        intermediate_size=arch.ffn,
        num_attention_heads=arch.heads,
        num_key_value_heads=arch.kv_heads,
        vocab_size=arch.vocab,
        tie_word_embeddings=arch.tied_embeddings,
    )
    with torch.device("meta"):
        base = LlamaForCausalLM(config)
        model = get_peft_model(
            base,
            LoraConfig(
                r=lora_r,
                lora_alpha=lora_alpha,
                target_modules=list(TARGET_MODULES),
                lora_dropout=0.0,
                task_type="CAUSAL_LM",
            ),
        )
        head = build_head(arch.hidden, EBMConfig(hidden_sizes=tuple(head_sizes)))
    return model, head


def _count(params) -> int:
    return sum(p.numel() for p in params)


def joint_step_plan(
    arch: Architecture,
    *,
    lora_r: int,
    head_sizes: Sequence[int],
    sft_batch: int,
    sft_length: int,
    groups: int,
    group_size: int,
    state_length: int,
    lora_alpha: int | None = None,
    padded: bool = True,
    activation_bytes: int = 4,
    base_bytes: int = 4,
    fused_loss: bool = False,
    lora_dropout: float = 0.0,
) -> dict:
    """Memory of one joint step (module docstring), in bytes, with the counts behind it.

    ``groups`` contrastive groups of ``group_size`` states (1 positive + negatives) each, plus each
    group's goal, every sequence ``state_length`` tokens; ``sft_batch`` SFT sequences of
    ``sft_length`` tokens.  The layout (defaults: the padded float32 one, :data:`PADDED_FP32`;
    :data:`PACKED_BF16` is what training on CUDA runs): ``padded``, every row occupies the longest
    row's positions (:func:`burnqed.train.joint.collate`), else the real tokens, packed
    (:func:`burnqed.train.joint.collate_packed`, rounded up to flex attention's 128-position
    block); ``activation_bytes``, 4 for a float32 residual stream, 2 for bf16; ``base_bytes``, the
    non-quantised base weights' (embeddings, ``lm_head``, norms: 4 upcast to float32, 2 as saved);
    ``fused_loss``, the SFT loss without whole logits (:mod:`burnqed.train.fused_loss`);
    ``lora_dropout`` (``sft.lora_dropout``): above 0 each adapted layer keeps its dropped-out
    input and the dropout mask for the backward pass (peft applies the dropout before LoRA's A).
    """
    import torch

    model, head = meta_modules(
        arch, lora_r=lora_r, lora_alpha=lora_alpha or 2 * lora_r, head_sizes=head_sizes
    )
    lora = _count(p for n, p in model.named_parameters() if "lora_" in n)
    base = _count(p for n, p in model.named_parameters() if "lora_" not in n)
    # The decoder's own linear layers (peft wraps each in a LoRA layer around `base_layer`).
    quantised = _count(
        m.weight
        for n, m in model.named_modules()
        if type(m) is torch.nn.Linear and ".layers." in n and "lora_" not in n
    )
    head_params = _count(head.parameters())
    trainable = lora + head_params
    h, v = arch.hidden, arch.vocab
    sft_tokens = sft_batch * sft_length
    contrastive_rows = groups * (group_size + 1)  # states + each group's goal
    tokens = sft_tokens + contrastive_rows * state_length
    rows = sft_batch + contrastive_rows
    positions = rows * max(sft_length, state_length) if padded else -(-tokens // 128) * 128
    if fused_loss:
        # Liger's chunks: ~sft_tokens / (V / h) tokens (a power of 2) of bf16 logits and their
        # float32 softmax at a time, beside the scored hidden states and their gradient (bf16).
        chunk = 2 ** math.ceil(math.log2(max(1, sft_tokens / math.ceil(v / h))))
        loss = chunk * v * (2 + 4) + 2 * sft_tokens * h * 2
    else:
        loss = sft_tokens * v * 4 * 2  # float32 logits of every SFT position and their gradient
    memory = {
        "base_weights_nf4": quantised * NF4_BITS / 8,
        f"base_weights_{'fp32' if base_bytes == 4 else 'bf16'}": (base - quantised) * base_bytes,
        "trainable_weights": trainable * 4,
        "gradients": trainable * 4,
        "optimizer_states": trainable * 8,
        "activations_checkpointed_inputs": arch.layers * positions * activation_bytes * h,
        "activations_one_layer_recompute": positions * 34 * h * activation_bytes // 2,
    }
    if activation_bytes < 4:  # each RMSNorm normalises a float32 copy of a 16-bit input: 2 × 4·h
        memory["activations_norms_fp32"] = positions * 8 * h
    if lora_dropout > 0:  # q, k, v, o, gate, up drop an h-wide input, down an ffn-wide one
        memory["activations_lora_dropout"] = positions * (activation_bytes + 1) * (6 * h + arch.ffn)
    memory |= {
        "logits_and_grad" if not fused_loss else "fused_loss_chunk": loss,
    }
    exact = ("base_weights_fp32", "base_weights_bf16", "trainable_weights", "gradients",
             "optimizer_states")  # fmt: skip
    total = sum(memory.values())
    return {
        "architecture": asdict(arch),
        "lora_r": lora_r,
        "head_sizes": list(head_sizes),
        "shape": {
            "sft_batch": sft_batch,
            "sft_length": sft_length,
            "groups": groups,
            "group_size": group_size,
            "state_length": state_length,
            "tokens_per_step": tokens,
            "positions_per_step": positions,
            "padded": padded,
            "activation_bytes": activation_bytes,
            "base_bytes": base_bytes,
            "fused_loss": fused_loss,
            "lora_dropout": lora_dropout,
        },
        "params": {
            "base": base,
            "base_quantised_linear": quantised,
            "lora": lora,
            "head": head_params,
            "trainable": trainable,
        },
        "bytes": memory,
        "exact_from_modules": [k for k in exact if k in memory],
        "estimated": [k for k in memory if k not in exact],
        "total_bytes": total,
        "total_gib": total / GIB,
        "target_gb": TARGET_GB,
        "fits_36gb": total < TARGET_GB * 1e9,
    }


def plan_table(plan: dict) -> str:
    """The plan as a markdown table (``docs/cloud.md`` shows one)."""
    rows = [
        (name, f"{b / GIB:.2f}", "exact" if name in plan["exact_from_modules"] else "estimate")
        for name, b in plan["bytes"].items()
    ]
    rows.append(("total", f"{plan['total_gib']:.2f}", f"target < {plan['target_gb']} GB"))
    lines = ["| part | GiB | how |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)
