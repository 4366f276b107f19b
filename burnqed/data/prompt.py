"""The one step-prompt format, used by training and inference alike (SPEC §4.2).

DeepSeek-native: the proof state is a Lean comment inside a ``lean4`` code fence — the way
DeepSeek-Prover-V1.5 writes ``/- tactic state: … -/`` comments — and the tactic is the completion
after the closing fence.  The prompt ends with ``"\\n"`` so it ends at a token boundary (trl tokenizes
prompt and prompt+completion separately; ``reference/training-stack.md`` §2.2).

Example::

    >>> print(format_prompt("p q : Prop\\nh : p ∧ q\\n⊢ q ∧ p"), end="")
    ```lean4
    /- tactic state:
      p q : Prop
      h : p ∧ q
      ⊢ q ∧ p
    -/
    ```
    >>> format_example("p : Prop\\n⊢ p → p", "intro h")["completion"]
    'intro h'

A state is **embedded** as this same prompt (the value model reads the policy's embeddings where
the policy reads the state, not the raw text it never saw alone): :func:`embed_states` is the one
call for every backend, :func:`state_ids` the token ids joint training pools from.

    >>> import numpy as np
    >>> class Echo:  # a backend that embeds a text as its length
    ...     def embed(self, texts):
    ...         return np.array([[len(t)] for t in texts], np.float32)
    >>> embed_states(Echo(), ["⊢ p"]).tolist() == [[len(format_prompt("⊢ p"))]]
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from burnqed.policy.embedding import embedding_ids

OPEN_FENCE = "```lean4\n"
CLOSE_FENCE = "```\n"
# Sent to servers as stop strings: a completion is one tactic, never a new fence.
STOP = ("```",)


def format_prompt(state: str) -> str:
    """The prompt for proposing the next tactic in ``state`` (Lean-printed, see lean.goals)."""
    body = "\n".join("  " + line if line else "" for line in state.split("\n"))
    return f"{OPEN_FENCE}/- tactic state:\n{body}\n-/\n{CLOSE_FENCE}"


def format_example(state: str, tactic: str) -> dict[str, str]:
    """A prompt/completion training example (loss on the completion only)."""
    return {"prompt": format_prompt(state), "completion": tactic.strip()}


def parse_completion(text: str) -> str:
    """The tactic in a raw completion: cut at a fence a server did not trim, strip whitespace."""
    cut = text.find("```")
    return (text[:cut] if cut >= 0 else text).strip()


# What the embedding-model digest records of the text embedded (burnqed.ebm.embeddings.model_digest).
EMBEDDED_TEXT = "prompt"


def embedding_text(state: str) -> str:
    """The text embedded for ``state`` (Lean-printed): the policy's prompt for it."""
    return format_prompt(state)


def embed_states(generator: Any, states: Sequence[str]) -> np.ndarray:
    """``(len(states), d)`` float32 embeddings of ``states`` by ``generator`` (any backend's
    ``embed``: in-process, SGLang ``/encode``, vLLM pooling), each embedded as its prompt."""
    return np.asarray(generator.embed([embedding_text(s) for s in states]), dtype=np.float32)


def state_ids(tokenizer: Any, state: str, limit: int | None) -> list[int]:
    """The token ids the in-process backend embeds for ``state``
    (:func:`burnqed.policy.embedding.embedding_ids` of its prompt, cut at ``limit``)."""
    return embedding_ids(tokenizer, embedding_text(state), limit)
