"""How a text is embedded in process: its token ids and its pooled vector.

A proof state is embedded as the policy's prompt for it (:func:`burnqed.data.prompt.embed_states`,
the one call for every backend); the vector is the final layer's hidden state at the prompt's
**last token**, L2-normalised — what SGLang ``/encode`` and vLLM's pooling runner return for a
prompt, and what the in-process backend's ``pooling="last"`` computes.  This module holds the two
in-process halves that the backend's ``embed`` and joint training share, so joint training's pooled
row for a state, taken from a right-padded batch, is ``embed()``'s for the same weights
(``tests/train/test_joint.py`` checks it):

- :func:`embedding_ids` — the token ids fed to the model for a text (the tokenizer's own BOS,
  truncated at the model's context, :func:`context_limit`);
- :func:`pool_hidden` — one text's vector from its final-layer states.

The embedding cache key (:func:`burnqed.ebm.embeddings.embedding_settings`) carries this module's
code digest and the prompt format's.

Example::

    >>> import torch
    >>> pool_hidden(torch.tensor([[1.0, 0.0], [3.0, 4.0]]), "last").tolist()
    [0.6000000238418579, 0.800000011920929]
"""

from __future__ import annotations

from typing import Any

POOLINGS = ("last", "mean")


def context_limit(model_config: Any) -> int | None:
    """The longest sequence the model takes (``max_position_embeddings``; None when unknown)."""
    return getattr(model_config, "max_position_embeddings", None)


def embedding_ids(tokenizer: Any, text: str, limit: int | None) -> list[int]:
    """The token ids embedded for ``text``: the tokenizer's own special tokens (BOS) included, cut
    at ``limit`` tokens (:func:`context_limit`) — the in-process backend's ``embed`` and joint
    training's state rows both come from here."""
    return list(tokenizer(text, truncation=limit is not None, max_length=limit).input_ids)


def pool_hidden(hidden: Any, pooling: str) -> Any:
    """One text's embedding from its final-layer states ``hidden`` ``(T, d)`` (a torch tensor, real
    tokens only): the last token's, L2-normalised (``last``), or the mean over tokens (``mean``).
    The one pooling function: the in-process backend's ``embed``, the scorer through it, and joint
    training use it."""
    import torch

    if pooling == "last":
        return torch.nn.functional.normalize(hidden[-1], dim=-1)
    if pooling == "mean":
        return hidden.mean(0)
    raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
