"""Policy layer: one tactic-generation interface, several backends.

Every backend (in-process transformers, SGLang native HTTP, OpenAI-compatible HTTP) implements
:class:`TacticGenerator`: ``generate`` takes a *batch* of prompts and returns, per prompt, up to ``n``
de-duplicated candidates, each with its summed token logprob and token count; ``embed`` returns one
vector per text.  Callers (search, eval, EBM) depend only on this module, which imports nothing heavy.

Example (with any backend ``gen``)::

    params = SamplingParams(n=4, temperature=0.8, max_new_tokens=64)
    groups = gen.generate([prompt_a, prompt_b], params)   # 2 groups, same order as the prompts
    best = groups[0].candidates[0]                          # sorted best logprob first
    best.text, best.logprob, best.num_tokens, best.mean_logprob
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class SamplingParams:
    """Explicit sampling parameters, always sent (a server's defaults silently change results)."""

    n: int = 4  # candidates per prompt
    temperature: float = 0.8
    top_p: float = 1.0
    max_new_tokens: int = 64
    stop: tuple[str, ...] = ()  # stop strings, trimmed from the returned text
    seed: int | None = None  # per-request seed where the backend supports one

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"SamplingParams.n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"SamplingParams.temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingParams.top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(
                f"SamplingParams.max_new_tokens must be >= 1, got {self.max_new_tokens}"
            )


@dataclass(frozen=True)
class Candidate:
    """One generated tactic."""

    text: str  # stripped of surrounding whitespace and stop strings
    logprob: float  # sum of the generated tokens' logprobs under the model (<= 0)
    num_tokens: int  # generated tokens, so callers can length-normalise
    finish_reason: str = "stop"  # "stop" | "length" | "abort"

    @property
    def mean_logprob(self) -> float:
        return self.logprob / max(self.num_tokens, 1)


@dataclass(frozen=True)
class Generation:
    """The candidates for one prompt, best logprob first, after whitespace de-duplication."""

    candidates: tuple[Candidate, ...]
    raw_count: int  # candidates before de-duplication (== n unless some were empty/aborted)
    tokens: int = field(default=0)  # generated tokens over all raw candidates (for accounting)


def normalise_tactic(text: str) -> str:
    """Whitespace-normalised form used as the de-duplication key."""
    return " ".join(text.split())


def trim_completion(text: str, stop: Sequence[str]) -> str:
    """A candidate's text: cut at the first stop string a server did not trim, strip whitespace."""
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return (text[: min(cuts)] if cuts else text).strip()


def dedup_candidates(raw: Iterable[Candidate]) -> Generation:
    """Drop empty candidates and whitespace duplicates (keeping the best logprob); sort best first."""
    raw = list(raw)
    best: dict[str, Candidate] = {}
    for c in raw:
        key = normalise_tactic(c.text)
        if not key:
            continue
        if key not in best or c.logprob > best[key].logprob:
            best[key] = c
    ordered = sorted(best.values(), key=lambda c: -c.logprob)
    return Generation(
        candidates=tuple(ordered), raw_count=len(raw), tokens=sum(c.num_tokens for c in raw)
    )


@runtime_checkable
class TacticGenerator(Protocol):
    """What search, eval and the EBM need from a policy model. Implementations are synchronous;
    async callers run them in a worker thread (``asyncio.to_thread``)."""

    model_id: str  # identifies the weights (path or served name); keys the embedding cache

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[Generation]:
        """One :class:`Generation` per prompt, in prompt order."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), hidden_size)`` float32 embeddings."""
        ...

    def close(self) -> None:
        """Release servers, sessions or memory held by the backend."""
        ...
