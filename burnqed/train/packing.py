"""Padding-free attention for a packed micro-batch: every sequence end to end in one row.

Joint training's micro-batch mixes 1,024-token SFT examples with 512-token states and goals
(``config/a100-7b.yaml``); right-padded into one batch, 41 % of its positions are padding
(``docs/cloud.md`` §9).  Packed, the sequences lie one after another in a single row
(:func:`burnqed.train.joint.collate_packed`), each with its own positions (0, 1, … again at every
sequence's start) and a **per-sequence causal mask** (document masking): a token attends to the
earlier tokens of its own sequence only, so each sequence's hidden states are the ones it gets
alone.

**The row's width** is the micro-batch's real tokens rounded up to a bucket (:func:`bucket_width`):
a multiple of the 128-position block whose block count has at most four significant binary digits
(every count up to 15 blocks, then 16, 18, … 30, then 32, 36, … 60, …) — eight widths per doubling,
so the padding is under a ninth of the row, and no wider than the configured micro-batch's most
tokens (``joint.packed_width``).  Real tactic pairs are a few hundred tokens: a row of the most
tokens a micro-batch *could* hold (26,624 at ``config/a100-7b.yaml``) was mostly padding, and every
padding position goes through every linear layer.  Each width compiles flex attention once (about
8 s on an H200); real micro-batches vary by tens of percent, so a run meets a handful of widths, and
the compile cache is raised to the whole ladder (:data:`WIDTHS_COMPILED`) so that no width falls
back to eager flex attention (which materialises the scores).

**The padding** after the last sequence costs no attention: each padding position is a sequence of
its own (``doc`` one past the last real sequence and counting up), position 0, so it attends to
itself only — no block of padding is "full", and no real position ever sees one.

The mask, from each position's sequence index ``doc`` (``(W,)``):

- **on CUDA** a :class:`torch.nn.attention.flex_attention.BlockMask` for PyTorch's compiled
  ``flex_attention``: built directly from the sequences' boundaries at the 128-position block level
  (:func:`block_mask`; blocks that cross no boundary and lie under the diagonal are "full",
  skipping the per-element mask, blocks of other sequences are skipped entirely), so the kernel's
  work is the sequences' own causal triangles (and the padding's diagonal blocks), not the row's;
- **on the CPU** a dense boolean ``(1, 1, W, W)`` mask for SDPA (:func:`dense_mask`; the
  equivalence tests: the two masks describe the same attention, ``tests/train/test_packing.py``).

:func:`enable` registers :func:`attention` with transformers as the model's attention
implementation (``burnqed_packed``): a ``BlockMask`` goes to ``flex_attention``, anything else —
the dense mask, or the 2-D padding mask of the padded batches that evaluation and the monitor still
build — to transformers' own SDPA path, unchanged.

Example::

    >>> import torch
    >>> doc = torch.tensor([0, 0, 0, 1, 1, 2, 3])     # sequences of 3 and 2, then two of padding
    >>> [row[:7] for row in dense_mask(doc)[0, 0].int().tolist()][4:]
    [[0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 0, 1]]
    >>> bucket_width(3_300, most=26_624), bucket_width(26_000, most=26_624)
    (3328, 26624)
"""

from __future__ import annotations

from typing import Any

ATTENTION = "burnqed_packed"  # the attention implementation's name in transformers' registry
BLOCK = 128  # flex attention's block: a packed row's width is a multiple of it
SIGNIFICANT_BITS = 4  # a row's block count is rounded up to this many binary digits: 8 per doubling
# Widths flex attention may compile for: dynamo's default of 8 recompiles would send the ninth width
# to eager flex attention (scores materialised); 64 covers every width of the ladder up to 65,536
# positions (56; 45 up to config/a100-7b.yaml's 26,624).
WIDTHS_COMPILED = 64
_compiled: dict[str, Any] = {}  # the compiled flex_attention, made on first use


def round_width(tokens: int) -> int:
    """The packed row's width for ``tokens`` positions: the next multiple of :data:`BLOCK`.

    >>> round_width(26624), round_width(1)
    (26624, 128)
    """
    return max(BLOCK, -(-tokens // BLOCK) * BLOCK)


def bucket_width(tokens: int, most: int) -> int:
    """The width of a packed row holding ``tokens`` real tokens: their blocks of :data:`BLOCK`
    rounded up to :data:`SIGNIFICANT_BITS` binary digits (module docstring), at most ``most`` (the
    configured micro-batch's most tokens, a multiple of the block).  A row that ``tokens`` do not
    fit is an error, as in :func:`burnqed.train.joint.collate_packed`.

    >>> [bucket_width(n, 10**6) for n in (1, 129, 1_920, 1_921, 4_100)]
    [128, 256, 1920, 2048, 4608]
    """
    if tokens > most:
        raise ValueError(f"a packed micro-batch of {tokens} tokens does not fit its width {most}")
    blocks = max(1, -(-tokens // BLOCK))
    step = 1 << max(0, blocks.bit_length() - SIGNIFICANT_BITS)
    return min(-(-blocks // step) * step * BLOCK, most)


def dense_mask(doc: Any) -> Any:
    """``(1, 1, W, W)`` bool: query ``q`` sees key ``k`` when both are in one sequence and
    ``k <= q`` (SDPA's boolean mask: True attends); a padding position, a sequence of its own, sees
    itself."""
    import torch

    w = doc.shape[0]
    pos = torch.arange(w, device=doc.device)
    same = doc[:, None] == doc[None, :]
    return (same & (pos[None, :] <= pos[:, None]))[None, None]


def mask_mod(doc: Any) -> Any:
    """The element-level rule of :func:`dense_mask` as flex attention's ``mask_mod``."""

    def within_sequence_causal(b, h, q, k):
        return (doc[q] == doc[k]) & (k <= q)

    return within_sequence_causal


def block_mask(doc: Any) -> Any:
    """The flex-attention ``BlockMask`` of :func:`dense_mask`, built from the sequences' boundaries
    (``doc`` non-decreasing, width a multiple of :data:`BLOCK`) without materialising ``W × W``.

    Blocks ``(i, j)`` of queries ``i`` and keys ``j``: with sequence indices non-decreasing along the
    row, a block holds a visible pair iff ``j <= i`` and key block ``j``'s last sequence reaches
    query block ``i``'s first; it is *full* (every pair visible, no per-element mask) iff ``j < i``
    and all of both blocks lie in one sequence.  The rest of the visible blocks are partial:
    :func:`mask_mod` decides each element there."""
    import torch
    from torch.nn.attention.flex_attention import BlockMask

    w = doc.shape[0]
    if w % BLOCK:
        raise ValueError(f"a packed row's width must be a multiple of {BLOCK}, got {w}")
    n = w // BLOCK
    blocks = doc.view(n, BLOCK)
    first, last = blocks[:, 0], blocks[:, -1]  # (n,): each block's first and last sequence
    i = torch.arange(n, device=doc.device)
    lower = i[None, :] <= i[:, None]  # (n q-blocks, n kv-blocks)
    visible = lower & (last[None, :] >= first[:, None])
    # j < i puts key block j wholly before query block i: one sequence from j's first to i's last
    full = (i[None, :] < i[:, None]) & (first[None, :] == last[:, None])
    partial = visible & ~full

    def indexed(sel):  # (n, n) bool → counts (1, 1, n) and indices (1, 1, n, n), selected first
        counts = sel.sum(1).to(torch.int32)
        order = torch.argsort((~sel).to(torch.int32), dim=1, stable=True).to(torch.int32)
        return counts[None, None], order[None, None]

    kv_num, kv_idx = indexed(partial)
    full_num, full_idx = indexed(full)
    return BlockMask.from_kv_blocks(
        kv_num_blocks=kv_num, kv_indices=kv_idx, full_kv_num_blocks=full_num,
        full_kv_indices=full_idx, BLOCK_SIZE=BLOCK, mask_mod=mask_mod(doc), seq_lengths=(w, w),
    )  # fmt: skip


def attention_mask(doc: Any) -> Any:
    """The mask a packed forward passes as ``attention_mask``: :func:`block_mask` on CUDA (flex
    attention), :func:`dense_mask` elsewhere (SDPA)."""
    return block_mask(doc) if doc.is_cuda else dense_mask(doc)


def _flex() -> Any:
    """``flex_attention``: compiled on CUDA (once per row width, :func:`bucket_width`), eager on the
    CPU (materialises the scores: tests only)."""
    from torch.nn.attention.flex_attention import flex_attention

    if "flex" not in _compiled:
        import torch
        import torch._dynamo.config

        # One compilation per row width (module docstring): room for every bucket a run meets.
        torch._dynamo.config.recompile_limit = max(
            torch._dynamo.config.recompile_limit, WIDTHS_COMPILED
        )
        _compiled["flex"] = torch.compile(flex_attention, dynamic=False)
    return _compiled["flex"]


def attention(
    module: Any, query: Any, key: Any, value: Any, attention_mask: Any, dropout: float = 0.0,
    scaling: float | None = None, **kwargs: Any,
) -> tuple[Any, None]:  # fmt: skip
    """transformers' attention interface: ``query`` ``(B, H, T, D)``, ``key``/``value``
    ``(B, H_kv, T, D)`` → ``(B, T, H, D)``.  A ``BlockMask`` runs flex attention; any other mask
    transformers' SDPA path."""
    from torch.nn.attention.flex_attention import BlockMask, flex_attention
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if not isinstance(attention_mask, BlockMask):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    if dropout:
        raise ValueError("packed attention has no attention dropout")
    run = _flex() if query.is_cuda else flex_attention
    out = run(query, key, value, block_mask=attention_mask, scale=scaling,
              enable_gqa=query.shape[1] != key.shape[1])  # fmt: skip
    return out.transpose(1, 2).contiguous(), None


def enable(model: Any) -> None:
    """Make :func:`attention` the attention of ``model`` (a transformers model, peft-wrapped or not):
    packed batches then run flex attention on CUDA; padded ones run SDPA as before."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(ATTENTION, attention)
    # A padded batch's 2-D mask is expanded as for SDPA (a packed one passes its own 4-D mask).
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION, sdpa_mask)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    base.config._attn_implementation = ATTENTION
