"""The SFT loss without its logits: ``lm_head`` and cross-entropy fused, a chunk of tokens at a time.

A micro-batch's SFT logits over the 102,400-token vocabulary, in float32 with their gradient, are
6.25 GiB at ``config/a100-7b.yaml``'s shape (``docs/cloud.md`` §9).  :func:`linear_cross_entropy`
never holds them whole:

- **on CUDA, Liger Kernel's** fused linear cross-entropy (``liger-kernel``, pinned in
  ``constraints.txt`` and installed by burnqed's ``gpu`` extra; Triton): per chunk of tokens the
  bf16 logits, their float32 softmax and the gradient with respect to the hidden states, computed
  in the forward pass; imported here lazily, on CUDA only, so CPU installs and CI never need it;
- **otherwise** (the CPU, or CUDA without Liger) :func:`chunked_linear_cross_entropy`: the same
  loss in chunks of :data:`CHUNK` tokens, each chunk's logits recomputed in the backward pass
  (activation checkpointing), so one chunk's logits exist at a time.

Only a **missing** Liger falls back (logged, and recorded in every training summary by
:func:`kernel_record`); a Liger that is installed but does not import — its Triton missing or of
another torch — is a :class:`FusedKernelError`, and an error inside the kernel propagates as it is:
a GPU run never quietly changes its speed, memory and numerics.

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

import importlib.util
import logging
from importlib import metadata
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


LIGER = "liger-kernel"  # the distribution (pyproject.toml's gpu extra)


class FusedKernelError(RuntimeError):
    """Liger Kernel is installed but cannot run: fix or uninstall it (a missing Liger falls back to
    the chunked loss; a broken one never does)."""


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def liger() -> Any | None:
    """Liger Kernel's fused linear cross-entropy, or None where ``liger-kernel`` is not installed
    (logged once).  Installed but not importable raises :class:`FusedKernelError`."""
    if "fn" not in _liger:
        if importlib.util.find_spec("liger_kernel") is None:
            log.warning("%s is not installed: the chunked SFT loss runs instead (install burnqed's "
                        "gpu extra for the fused kernel)", LIGER)  # fmt: skip
            _liger["fn"] = None
            return None
        try:
            from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy
        except Exception as e:  # its Triton missing, built for another torch, …
            raise FusedKernelError(
                f"{LIGER} {_version(LIGER)} is installed but does not import "
                f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}): fix its "
                f"triton ({_version('triton')}) and torch, or uninstall it to train with the "
                "chunked loss"
            ) from e
        _liger["fn"] = liger_fused_linear_cross_entropy
    return _liger["fn"]


def kernel(device: Any) -> str:
    """Which loss :func:`linear_cross_entropy` runs on ``device``: ``liger`` or ``chunked``."""
    import torch

    return "liger" if torch.device(device).type == "cuda" and liger() is not None else "chunked"


def kernel_record(device: Any) -> dict[str, str | None]:
    """What :func:`linear_cross_entropy` runs on ``device``, as the training summaries record it:
    the kernel, Liger's and Triton's versions when it is Liger, else why not.

    >>> kernel_record("cpu")["kernel"], kernel_record("cpu")["why"]
    ('chunked', 'not CUDA')
    """
    import torch

    if torch.device(device).type != "cuda":
        return {"kernel": "chunked", "why": "not CUDA"}
    if liger() is None:
        return {"kernel": "chunked", "why": f"{LIGER} not installed (the gpu extra)"}
    return {"kernel": "liger", LIGER: _version(LIGER), "triton": _version("triton")}


def linear_cross_entropy(hidden: Any, weight: Any, targets: Any) -> Any:
    """Mean cross-entropy of ``hidden`` ``(M, d)`` through ``weight`` ``(V, d)`` (``lm_head``'s,
    no bias) against ``targets`` ``(M,)`` (every one scored), never materialising ``(M, V)``
    logits: Liger Kernel on CUDA, :func:`chunked_linear_cross_entropy` otherwise (module docstring:
    only a missing Liger falls back).  Run it outside autocast: ``hidden`` is cast to the weight's
    dtype here."""
    import torch

    if hidden.shape[0] == 0:  # no scored token: the mean is undefined, as F.cross_entropy's is
        return hidden.sum() * float("nan")
    hidden = hidden.to(weight.dtype)
    if kernel(hidden.device) == "liger":
        with torch.autocast("cuda", enabled=False):
            return liger()(hidden, weight, targets, reduction="mean")
    return chunked_linear_cross_entropy(hidden, weight, targets)
