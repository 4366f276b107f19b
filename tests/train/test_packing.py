"""Packed micro-batches are exact: the same losses, embeddings and gradients as padded ones.

CUDA training packs each joint micro-batch padding-free (burnqed/train/packing.py, flex attention)
and takes the SFT loss through a fused linear cross-entropy (burnqed/train/fused_loss.py); the CPU
keeps the padded layout.  On the tiny model, in float32: per-token SFT losses, pooled state and goal
embeddings, both losses and every LoRA and head gradient agree between the two layouts to 1e-5
(relative 1e-4 for gradients: the only differences are the summation orders of SDPA over a padded
row and over a packed one); flex attention with the block mask built from the sequences'
boundaries gives SDPA's block-diagonal result (eager flex attention on the CPU; the device script
checks the compiled kernel on CUDA).
"""

from __future__ import annotations

import random

import pytest
import torch

from burnqed.config import EBMConfig, SFTConfig
from burnqed.ebm.train import build_head
from burnqed.train import packing
from burnqed.train.fused_loss import chunked_linear_cross_entropy, linear_cross_entropy
from burnqed.train.joint import (
    LossScales,
    _to,
    accumulate,
    collate,
    collate_packed,
    joint_forward,
    packed_width,
    tokenize_example,
)

ATOL = 1e-5  # losses and embeddings, float32
GRAD_RTOL = 1e-4  # gradients, relative to each tensor's largest entry


@pytest.fixture(scope="module")
def model_and_tokenizer(tiny_base, lora_adapter):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32)
    model = PeftModel.from_pretrained(model, str(lora_adapter), is_trainable=True)
    packing.enable(model)  # padded batches still run SDPA through it
    tok = AutoTokenizer.from_pretrained(tiny_base)
    tok.pad_token = tok.pad_token or tok.eos_token
    return model, tok


STATES = [
    "p q : Prop\n⊢ p ∧ q → q",
    "p q : Prop\nh : p ∧ q\n⊢ q",
    "p : Prop\n⊢ p",
    "q : Prop\n⊢ q ∨ p",
    "p q r : Prop\nh : p → q\nh' : q → r\n⊢ p → r",
    "⊢ True",
]
GOALS = ["p q : Prop\n⊢ p ∧ q → q ∧ p", "p q r : Prop\n⊢ (p → q) → (q → r) → p → r"]
EXAMPLES = [
    ("p : Prop\n⊢ p → p", "intro h"),
    ("p q : Prop\nhp : p\nhq : q\n⊢ p ∧ q", "exact ⟨hp, hq⟩"),
    ("⊢ True", "trivial"),
]


def _rows(tok):
    sft = [
        tokenize_example(tok, {"prompt": f"```lean4\n/- tactic state:\n{p}\n-/\n```\n",
                               "completion": c}, 128)
        for p, c in EXAMPLES
    ]  # fmt: skip
    states = [tok(s).input_ids for s in STATES]
    goals = [tok(g).input_ids for g in GOALS]
    return sft, states, goals


def _both(tok, width=None):
    sft, states, goals = _rows(tok)
    args = (tok, sft, states, goals, 3, [2.0, 1.0])
    total = sum(len(r) for r in [*(i for i, _ in sft), *states, *goals])
    return collate(*args), collate_packed(*args, width=width or packing.round_width(total))


def _token_losses(model, out):
    lm_head = model.get_base_model().lm_head
    logits = lm_head(out["scored_hidden"]).float()
    return torch.nn.functional.cross_entropy(logits, out["scored_targets"], reduction="none")


def test_packing_lays_the_sequences_end_to_end_with_their_own_positions(model_and_tokenizer):
    _, tok = model_and_tokenizer
    padded, packed = _both(tok, width=512)
    lengths = padded.lengths.tolist()
    assert [e - s for s, e in packed.spans] == lengths
    assert packed.input_ids.shape == (1, 512) and packed.position_ids.shape == (1, 512)
    for r, (s, e) in enumerate(packed.spans):
        assert packed.input_ids[0, s:e].tolist() == padded.input_ids[r, : lengths[r]].tolist()
        assert packed.position_ids[0, s:e].tolist() == list(range(e - s))  # restart per sequence
        assert set(packed.doc[s:e].tolist()) == {r}
    end = packed.spans[-1][1]
    # The padding (issue 62): each position a sequence of its own after the last, at position 0.
    assert packed.doc[end:].tolist() == list(range(len(lengths), len(lengths) + 512 - end))
    assert set(packed.position_ids[0, end:].tolist()) == {0}
    # The scored positions are the padded batch's: each completion token, predicted one before.
    keep = padded.labels[:, 1:] != -100
    assert packed.targets.tolist() == padded.labels[:, 1:][keep].tolist()
    assert len(packed.scored) == int(keep.sum()) > 0
    for p, t in zip(packed.scored.tolist(), packed.targets.tolist(), strict=True):
        assert packed.input_ids[0, p + 1] == t  # the next token of the same sequence
    with pytest.raises(ValueError, match="does not fit its width 128"):
        _both(tok, width=128)


def test_the_packed_width_is_the_configured_micro_batchs_most_tokens():
    sft = SFTConfig(batch_size=8, max_length=1024, joint_groups_per_step=4,
                    joint_state_max_length=512)  # fmt: skip
    assert packed_width(sft, 8) == 8 * 1024 + 4 * 9 * 512  # 26,624: a multiple of 128 already
    assert packed_width(sft, 8, groups=False) == 8 * 1024
    small = SFTConfig(batch_size=3, max_length=100, joint_groups_per_step=1,
                      joint_state_max_length=50)  # fmt: skip
    assert packed_width(small, 4) == 640  # 300 + 5 × 50 = 550 → 5 blocks of 128


def test_packed_and_padded_batches_give_the_same_losses_embeddings_and_gradients(
    model_and_tokenizer,
):
    model, tok = model_and_tokenizer
    torch.manual_seed(0)
    head = build_head(model.get_base_model().config.hidden_size, EBMConfig(hidden_sizes=(32, 16)))
    model.eval()  # no dropout: the two forwards must see the same function
    head.eval()
    lora = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    results = []
    for batch in _both(tok):
        model.zero_grad(set_to_none=True)
        head.zero_grad(set_to_none=True)
        out = joint_forward(model, head, batch, "last", remaining_weight=0.5)
        (out["sft"] + 0.3 * out["value"]).backward()
        grads = {n: p.grad.detach().clone() for n, p in lora}
        grads |= {f"head.{n}": p.grad.detach().clone() for n, p in head.named_parameters()
                  if p.grad is not None}  # fmt: skip
        results.append((out, _token_losses(model, out).detach(), grads))
    (padded, tok_padded, g_padded), (packed, tok_packed, g_packed) = results
    torch.testing.assert_close(tok_packed, tok_padded, atol=ATOL, rtol=0)
    assert tok_padded.numel() > 10 and float(tok_padded.std()) > 0.1  # real, varied tokens
    for key in ("sft", "nce", "value", "remaining_error"):
        torch.testing.assert_close(packed[key], padded[key], atol=ATOL, rtol=0)
    torch.testing.assert_close(packed["pooled"], padded["pooled"], atol=ATOL, rtol=0)
    torch.testing.assert_close(packed["energies"], padded["energies"], atol=ATOL, rtol=0)
    assert g_packed.keys() == g_padded.keys() and len(g_padded) > len(lora) > 0
    for name, want in g_padded.items():
        scale = float(want.abs().max())
        assert scale > 0, f"{name}: no gradient"
        torch.testing.assert_close(g_packed[name], want, atol=GRAD_RTOL * scale, rtol=0,
                                   msg=lambda m, n=name: f"{n}: {m}")  # fmt: skip


def test_a_packed_step_accumulates_as_a_padded_one(model_and_tokenizer):
    """accumulate() over packed micro-batches: the same raw losses and LoRA gradients."""
    model, tok = model_and_tokenizer
    torch.manual_seed(1)
    head = build_head(model.get_base_model().config.hidden_size, EBMConfig(hidden_sizes=(32, 16)))
    model.eval()
    head.eval()
    got = []
    for batch in _both(tok):
        model.zero_grad(set_to_none=True)
        values = accumulate(model, head, [batch, batch], LossScales(), lam=0.1, pooling="last",
                            grad_accum=2, remaining_weight=0.5)  # fmt: skip
        grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        got.append((values, grad))
    (v_pad, g_pad), (v_pack, g_pack) = got
    assert v_pack == pytest.approx(v_pad, abs=ATOL)
    torch.testing.assert_close(g_pack, g_pad, atol=GRAD_RTOL * float(g_pad.abs().max()), rtol=0)


def test_flex_attention_with_the_boundary_block_mask_is_sdpa_with_the_block_diagonal_mask(
    monkeypatch, model_and_tokenizer
):
    """The BlockMask built from the sequences' boundaries (full blocks skip the element mask, other
    sequences' blocks are skipped) attends exactly as the dense block-diagonal causal mask."""
    from torch.nn.attention.flex_attention import flex_attention

    rng = random.Random(3)
    for lengths in ([128, 128, 256], [5, 300, 1, 77, 129], [512], [40] * 12):
        w = packing.round_width(sum(lengths) + rng.randrange(0, 100))
        doc = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])
        doc = torch.cat([doc, torch.full((w - len(doc),), len(lengths))])
        q, k, v = (torch.randn(1, 2, w, 16, dtype=torch.float64) for _ in range(3))
        want = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=packing.dense_mask(doc)
        )
        bm = packing.block_mask(doc)
        got = flex_attention(q, k, v, block_mask=bm)
        torch.testing.assert_close(got, want, atol=1e-10, rtol=0)
        n = w // packing.BLOCK
        visible = int(bm.kv_num_blocks.sum() + bm.full_kv_num_blocks.sum())
        assert visible <= n * (n + 1) // 2
        if len(lengths) > 2 and max(lengths) < w // 2:
            assert visible < n * (n + 1) // 2  # other sequences' blocks skipped
    # ... and through the model: the packed forward with flex attention is the dense-mask one.
    model, tok = model_and_tokenizer
    model.eval()
    _, packed = _both(tok)
    head = build_head(model.get_base_model().config.hidden_size, EBMConfig(hidden_sizes=(32, 16)))
    head.eval()
    with torch.no_grad():
        dense = joint_forward(model, head, packed, "last")
        monkeypatch.setattr(packing, "attention_mask", packing.block_mask)
        flex = joint_forward(model, head, packed, "last")
    torch.testing.assert_close(flex["pooled"], dense["pooled"], atol=ATOL, rtol=0)
    torch.testing.assert_close(flex["sft"], dense["sft"], atol=ATOL, rtol=0)


def test_the_chunked_loss_is_cross_entropy_over_the_whole_logits():
    torch.manual_seed(0)
    h = torch.randn(37, 8, dtype=torch.float64, requires_grad=True)
    w = torch.randn(50, 8, dtype=torch.float64)
    t = torch.randint(0, 50, (37,))
    want = torch.nn.functional.cross_entropy(h @ w.T, t)
    (g_want,) = torch.autograd.grad(want, h)
    got = chunked_linear_cross_entropy(h, w, t, chunk=5)  # 8 chunks, the last of 2
    (g_got,) = torch.autograd.grad(got, h)
    torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    torch.testing.assert_close(g_got, g_want, atol=1e-12, rtol=0)
    # On the CPU linear_cross_entropy is the chunked loss; no scored token gives NaN, as
    # F.cross_entropy's mean over nothing does.
    torch.testing.assert_close(linear_cross_entropy(h, w, t), want, atol=1e-12, rtol=0)
    assert torch.isnan(linear_cross_entropy(h[:0], w, t[:0]))


def test_the_packed_batch_moves_to_the_device_whole(model_and_tokenizer):
    _, tok = model_and_tokenizer
    _, packed = _both(tok)
    moved = _to(packed, torch.device("meta"))
    for key in ("input_ids", "position_ids", "doc", "scored", "targets", "remaining"):
        assert getattr(moved, key).device.type == "meta", key
    assert moved.spans == packed.spans


# --------------------------------------------------------------------------------------------
# Issue 62: rows sized to their tokens, padding that costs nothing


class _Pad:
    pad_token_id = 0


def _expanded(bm, w: int) -> torch.Tensor:
    """``(W, W)`` bool: the element-level attention a BlockMask describes — every pair of its full
    blocks, and its partial blocks' pairs that the mask_mod keeps; a block in both lists is an
    error."""
    b = packing.BLOCK
    pos = torch.arange(w)
    out = torch.zeros(w, w, dtype=torch.bool)
    for i in range(w // b):
        full = bm.full_kv_indices[0, 0, i, : int(bm.full_kv_num_blocks[0, 0, i])].tolist()
        partial = bm.kv_indices[0, 0, i, : int(bm.kv_num_blocks[0, 0, i])].tolist()
        assert not set(full) & set(partial), f"query block {i}: a key block both full and partial"
        rows = slice(i * b, (i + 1) * b)
        for j in full:
            out[rows, j * b : (j + 1) * b] = True
        for j in partial:
            q, k = pos[rows][:, None], pos[j * b : (j + 1) * b][None, :]
            out[rows, j * b : (j + 1) * b] = bm.mask_mod(0, 0, q, k)
    return out


@pytest.mark.parametrize(
    "lengths",
    [[128, 128, 256], [5, 300, 1, 77, 129], [40] * 12, [700], [1, 1, 1]],
    ids=["aligned", "unaligned", "many-short", "one-long", "tiny"],
)
@pytest.mark.parametrize("padding", [1, 130, 383])
def test_the_block_mask_expanded_is_each_sequences_causal_triangle_and_padding_sees_itself(
    lengths, padding
):
    """The BlockMask's indices, expanded to pairs, are exactly the sequences' own causal triangles
    (read off the packed batch's spans) plus each padding position on itself: no padding block is
    "full", and no real position sees padding or another sequence.  The CPU's dense mask is the
    same; padding positions sit at position 0."""
    rng = random.Random(sum(lengths) + padding)
    rows = [[rng.randrange(3, 400) for _ in range(n)] for n in lengths]
    total = sum(lengths)
    w = packing.round_width(total + padding)
    batch = collate_packed(_Pad, [(rows[0], [-100] * len(rows[0]))], rows[1:], [], 1, width=w)
    end = batch.spans[-1][1]
    want = torch.eye(w, dtype=torch.bool)  # padding: itself
    for s, e in batch.spans:
        want[s:e, s:e] = torch.ones(e - s, e - s, dtype=torch.bool).tril()
    got = _expanded(packing.block_mask(batch.doc), w)
    assert torch.equal(got[:end, :end], want[:end, :end]), "the real sequences' attention"
    assert not got[:end, end:].any(), "a real position sees padding"
    assert torch.equal(got[end:], want[end:]), (
        f"padding positions must see themselves only; {int(got[end:].sum())} pairs for "
        f"{w - end} padding positions"
    )
    assert torch.equal(packing.dense_mask(batch.doc)[0, 0], want), "the CPU's dense mask"
    assert set(batch.position_ids[0, end:].tolist()) <= {0}, "padding positions are at 0"


def _ladder(most: int) -> list[int]:
    """The row widths burnqed packs into, written out: every multiple of 128 up to 15 blocks,
    then 8 evenly spaced widths in each doubling (16, 18 … 30 blocks; 32, 36 … 60; …), and the
    configured micro-batch's most positions."""
    blocks = list(range(1, 16))
    octave = 16
    while octave * 128 < most:
        blocks += [octave + octave // 8 * m for m in range(8)]
        octave *= 2
    return sorted({b * 128 for b in blocks if b * 128 < most} | {most})


def test_each_packed_micro_batch_is_a_row_of_its_own_tokens_rounded_up_to_a_bucket():
    """At config/a100-7b.yaml's shape (8 SFT examples of at most 1,024 tokens, 4 groups of 8
    states and a goal of at most 512) with real-length sequences of a few hundred tokens, each
    micro-batch's row is the smallest bucket of the ladder that holds its tokens — padding under a
    ninth of the row — not the 26,624 positions the largest micro-batch could fill; a micro-batch
    of full-length sequences still fills exactly 26,624."""
    from types import SimpleNamespace

    import numpy as np

    from burnqed.train.joint import GroupTexts, micro_batches

    sft = SFTConfig(batch_size=8, max_length=1024, grad_accum=4, joint_groups_per_step=4,
                    joint_state_max_length=512)  # fmt: skip
    k1 = 8
    most = packed_width(sft, k1)
    assert most == 26_624
    rng = random.Random(62)

    def data(sft_len, state_len):
        sft_rows = []
        for _ in range(40):
            ids = [rng.randrange(3, 400) for _ in range(sft_len())]
            sft_rows.append((ids, [-100] * (len(ids) // 2) + ids[len(ids) // 2 :]))
        states = [[[rng.randrange(3, 400) for _ in range(state_len())] for _ in range(k1)]
                  for _ in range(20)]  # fmt: skip
        goals = [[rng.randrange(3, 400) for _ in range(state_len())] for _ in range(20)]
        gt = GroupTexts(states=states, goals=goals, state_hashes=[], goal_hashes=[], ids={})
        return SimpleNamespace(sft_rows=sft_rows, train_groups=list(range(20)), gt=gt,
                               group_size=k1, groups=SimpleNamespace(remaining=np.array([])))  # fmt: skip

    ladder = _ladder(most)
    real = data(lambda: rng.randrange(60, 400), lambda: rng.randrange(30, 250))
    widths = []
    for batch in micro_batches(real, _Pad, 0, sft, 0, torch.device("cpu"), most):
        tokens = batch.spans[-1][1]
        width = batch.input_ids.shape[1]
        widths.append(width)
        assert width == min(w for w in ladder if w >= tokens), (tokens, width)
        assert (width - tokens) / width < 1 / 9, (tokens, width)
        assert batch.position_ids.shape == batch.input_ids.shape == (1, width)
        assert batch.doc.shape == (width,)
    assert len(widths) == sft.grad_accum and max(widths) < most / 2
    full = data(lambda: 1024, lambda: 512)
    for batch in micro_batches(full, _Pad, 0, sft, 0, torch.device("cpu"), most):
        assert batch.input_ids.shape == (1, most) and batch.spans[-1][1] == most


def test_a_missing_liger_falls_back_recorded_and_a_broken_one_is_an_error(monkeypatch, tmp_path):
    """Only a *missing* liger-kernel lets the SFT loss fall back to the chunked loss (and the
    training summaries record why); one that is installed but does not import (its Triton missing,
    here) raises instead of quietly changing the GPU step's speed, memory and numerics."""
    import importlib
    import sys

    from burnqed.train import fused_loss

    package = tmp_path / "liger_kernel"
    (package / "transformers").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "transformers" / "__init__.py").write_text("")
    (package / "transformers" / "functional.py").write_text(
        "raise ImportError(\"No module named 'triton'\")\n"
    )
    monkeypatch.setattr(fused_loss, "_liger", {})
    modules = set(sys.modules)
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    try:
        with pytest.raises(
            RuntimeError, match=r"liger-kernel .*installed but does not import.*triton"
        ):
            fused_loss.liger()
    finally:  # the stand-in gone again, for this test's second half and every later test
        sys.path.remove(str(tmp_path))
        for name in set(sys.modules) - modules:
            if name.split(".")[0] == "liger_kernel":
                del sys.modules[name]
        importlib.invalidate_caches()
    fused_loss._liger.clear()
    assert fused_loss.liger() is None  # not installed: the chunked loss, logged
    record = fused_loss.kernel_record("cuda")
    assert record == {"kernel": "chunked", "why": "liger-kernel not installed (the gpu extra)"}
    assert fused_loss.kernel_record("cpu") == {"kernel": "chunked", "why": "not CUDA"}
