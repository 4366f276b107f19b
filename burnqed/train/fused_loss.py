"""The SFT loss without its logits: ``lm_head`` and cross-entropy fused, a chunk of tokens at a time.

A micro-batch's SFT logits over the 102,400-token vocabulary, in float32 with their gradient, are
6.25 GiB at ``config/a100-7b.yaml``'s shape (``docs/cloud.md`` §9).  :func:`linear_cross_entropy`
never holds them whole:

- **on CUDA, Liger Kernel's** fused linear cross-entropy (``liger-kernel`` 0.8.5, Triton; carried
  as a wheel to the GPU machine by ``bench/gpu-device.sh``): per chunk of tokens the bf16 logits,
  their float32 softmax and the gradient with respect to the hidden states, computed in the forward
  pass; imported here lazily, on CUDA only, so CPU installs and CI never need it;
- **otherwise** (the CPU, or CUDA without Liger) :func:`chunked_linear_cross_entropy`: the same
  loss in chunks of :data:`CHUNK` tokens, each chunk's logits recomputed in the backward pass
  (activation checkpointing), so one chunk's logits exist at a time.

Both take only the **scored positions** (the hidden state before each completion token): the
prompt's positions never reach ``lm_head``.  The logits and the softmax are float32 in both (the
loss's precision); the matrix product runs in the weight's dtype (bf16 on the GPU path).

Example::

    >>> import torch
    >>> h, w, t = torch.randn(5, 4), torch.randn(7, 4), torch.tensor([0, 3, 6, 1, 2])
    >>> full = torch.nn.functional.cross_entropy(h @ w.T, t)
    >>> bool(torch.allclose(chunked_linear_cross_entropy(h, w, t, chunk=2), full))
    True
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

CHUNK = 2048  # tokens a chunk: 2,048 × 102,400 float32 logits are 0.8 GiB
_liger: dict[str, Any] = {}


def _chunk_loss(hidden: Any, weight: Any, targets: Any) -> Any:
    """Summed cross-entropy of one chunk, logits in float32 (or wider)."""
    import torch
    import torch.nn.functional as F

    logits = hidden @ weight.T
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    return F.cross_entropy(logits, targets, reduction="sum")


def chunked_linear_cross_entropy(hidden: Any, weight: Any, targets: Any, chunk: int = CHUNK) -> Any:
    """Mean cross-entropy of ``hidden @ weight.T`` ``(M, V)`` against ``targets`` ``(M,)``, chunk by
    chunk; each chunk's logits are recomputed for the backward pass instead of kept."""
    import torch
    from torch.utils.checkpoint import checkpoint

    total = hidden.new_zeros((), dtype=torch.promote_types(hidden.dtype, torch.float32))
    for s in range(0, hidden.shape[0], chunk):
        part = (hidden[s : s + chunk], weight, targets[s : s + chunk])
        if torch.is_grad_enabled() and hidden.requires_grad:
            total = total + checkpoint(_chunk_loss, *part, use_reentrant=False)
        else:
            total = total + _chunk_loss(*part)
    return total / hidden.shape[0]


def liger() -> Any | None:
    """Liger Kernel's fused linear cross-entropy, or None where it is not installed (logged once)."""
    if "fn" not in _liger:
        try:
            from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy
        except ImportError as e:
            log.warning("Liger Kernel not importable (%s): the chunked SFT loss runs instead", e)
            liger_fused_linear_cross_entropy = None
        _liger["fn"] = liger_fused_linear_cross_entropy
    return _liger["fn"]


def kernel(device: Any) -> str:
    """Which loss :func:`linear_cross_entropy` runs on ``device``: ``liger`` or ``chunked``."""
    import torch

    return "liger" if torch.device(device).type == "cuda" and liger() is not None else "chunked"


def linear_cross_entropy(hidden: Any, weight: Any, targets: Any) -> Any:
    """Mean cross-entropy of ``hidden`` ``(M, d)`` through ``weight`` ``(V, d)`` (``lm_head``'s,
    no bias) against ``targets`` ``(M,)`` (every one scored), never materialising ``(M, V)``
    logits: Liger Kernel on CUDA, :func:`chunked_linear_cross_entropy` otherwise.  Run it outside
    autocast: ``hidden`` is cast to the weight's dtype here."""
    import torch

    if hidden.shape[0] == 0:  # no scored token: the mean is undefined, as F.cross_entropy's is
        return hidden.sum() * float("nan")
    hidden = hidden.to(weight.dtype)
    if kernel(hidden.device) == "liger":
        with torch.autocast("cuda", enabled=False):
            return liger()(hidden, weight, targets, reduction="mean")
    return chunked_linear_cross_entropy(hidden, weight, targets)
