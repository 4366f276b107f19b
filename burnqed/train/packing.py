"""Padding-free attention for a packed micro-batch: every sequence end to end in one row.

Joint training's micro-batch mixes 1,024-token SFT examples with 512-token states and goals
(``config/a100-7b.yaml``); right-padded into one batch, 41 % of its positions are padding
(``docs/cloud.md`` §9).  Packed, the sequences lie one after another in a single row of a fixed
width (:func:`burnqed.train.joint.collate_packed`), each with its own positions (0, 1, … again at
every sequence's start) and a **per-sequence causal mask** (document masking): a token attends to
the earlier tokens of its own sequence only, so each sequence's hidden states are the ones it gets
alone.  The positions after the last sequence (up to the fixed width) form one more sequence of
padding that nothing reads.

The mask, from each position's sequence index ``doc`` (``(W,)``):

- **on CUDA** a :class:`torch.nn.attention.flex_attention.BlockMask` for PyTorch's compiled
  ``flex_attention``: built directly from the sequences' boundaries at the 128-position block level
  (:func:`block_mask`; blocks that cross no boundary and lie under the diagonal are "full",
  skipping the per-element mask, blocks of other sequences are skipped entirely), so the kernel's
  work is the sequences' own causal triangles, not the row's;
- **on the CPU** a dense boolean ``(1, 1, W, W)`` mask for SDPA (:func:`dense_mask`; the
  equivalence tests: the two masks describe the same attention, ``tests/train/test_packing.py``).

:func:`enable` registers :func:`attention` with transformers as the model's attention
implementation (``burnqed_packed``): a ``BlockMask`` goes to ``flex_attention``, anything else —
the dense mask, or the 2-D padding mask of the padded batches that evaluation and the monitor still
build — to transformers' own SDPA path, unchanged.  The fixed width means ``flex_attention`` is
compiled once (on the first packed batch, ~17 s on an H200) and never again.

Example::

    >>> import torch
    >>> doc = torch.tensor([0, 0, 0, 1, 1, 2])          # sequences of 3 and 2, then padding
    >>> dense_mask(doc)[0, 0].int().tolist()[:5]
    [[1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 0, 0], [0, 0, 0, 1, 1, 0]]
"""

from __future__ import annotations

from typing import Any

ATTENTION = "burnqed_packed"  # the attention implementation's name in transformers' registry
BLOCK = 128  # flex attention's block: a packed row's width is a multiple of it
_compiled: dict[str, Any] = {}  # the compiled flex_attention, made on first use


def round_width(tokens: int) -> int:
    """The packed row's width for ``tokens`` positions: the next multiple of :data:`BLOCK`.

    >>> round_width(26624), round_width(1)
    (26624, 128)
    """
    return max(BLOCK, -(-tokens // BLOCK) * BLOCK)


def dense_mask(doc: Any) -> Any:
    """``(1, 1, W, W)`` bool: query ``q`` sees key ``k`` when both are in one sequence and
    ``k <= q`` (SDPA's boolean mask: True attends)."""
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
    """``flex_attention``: compiled on CUDA (once: the packed width is fixed), eager on the CPU
    (materialises the scores: tests only)."""
    from torch.nn.attention.flex_attention import flex_attention

    if "flex" not in _compiled:
        import torch

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
