"""Policy layer: one tactic-generation interface, several backends.

Every backend (in-process transformers, SGLang native HTTP, OpenAI-compatible HTTP) implements
:class:`TacticGenerator`: ``generate`` takes a *batch* of prompts and returns, per prompt, up to ``n``
de-duplicated candidates, each with its summed token logprob and token count; ``embed`` returns one
vector per text.  Callers (search, eval, EBM) depend only on this module, which imports nothing heavy.

**Reproducible sampling.**  Every candidate has its own seed (``seeds[i][j]``: prompt ``i``,
candidate ``j``), derived by :func:`candidate_seeds` from what is being sampled — run seed, theorem,
attempt, the node's state, candidate index — and never from how prompts happen to be batched.  Each
backend makes a candidate a function of (model, prompt, its seed) alone: in process by
construction (one forward per prompt, one random stream per candidate), SGLang by one request item
per candidate with its own ``sampling_seed`` in deterministic mode, vLLM by one request per
candidate with its own ``seed`` (``reference/inference-servers.md`` §3.3).  So a search does not
depend on the concurrency, batch size or timing of a run, and two evals of the same theorems draw
the same random numbers (paired comparisons).  Without seeds a backend samples freshly.

Example (with any backend ``gen``)::

    params = SamplingParams(n=4, temperature=0.8, max_new_tokens=64)
    seeds = [candidate_seeds(0, "thm", 0, "root", 4), candidate_seeds(0, "thm", 0, "s1", 4)]
    groups = gen.generate([prompt_a, prompt_b], params, seeds=seeds)   # 2 groups, prompt order
    best = groups[0].candidates[0]                          # sorted best logprob first
    best.text, best.logprob, best.num_tokens, best.mean_logprob
"""

from __future__ import annotations

import hashlib
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


SEED_BITS = 63  # seeds are non-negative and fit a signed 64-bit integer (torch, SGLang, vLLM)


def candidate_seeds(
    run_seed: int, theorem: str, attempt: int, node: str, n: int
) -> tuple[int, ...]:
    """The seeds of the ``n`` candidates sampled for one node: a hash of (run seed, theorem key,
    attempt, the node's identity in its tree, candidate index) — nothing that depends on batching
    or timing.  Search uses the node's state hash as its identity, so the same state of the same
    (theorem, attempt) gets the same draws in every run and in every eval compared with it.

    >>> candidate_seeds(0, "t", 0, "root", 2) == candidate_seeds(0, "t", 0, "root", 3)[:2]
    True
    >>> len(set(candidate_seeds(0, "t", 0, "root", 4)))
    4
    """
    base = f"{int(run_seed)}\x00{theorem}\x00{int(attempt)}\x00{node}\x00".encode()
    out = []
    for j in range(n):
        digest = hashlib.blake2b(base + str(j).encode(), digest_size=8).digest()
        out.append(int.from_bytes(digest, "big") >> (64 - SEED_BITS))
    return tuple(out)


def salted_seed(run_seed: int, salt: str | None) -> int:
    """The seed a search hands :func:`candidate_seeds` as its run seed: ``run_seed`` itself without a
    salt — every eval (pairs of evals depend on drawing the same numbers) and iteration 0's pool
    search — else a hash of (run seed, salt).  A search with a salt of its own (the noise search,
    a later iteration's search of the theorems the last one failed: ``rules/common.smk``) draws
    samples independent of every other search of the same theorems and states, where the same
    draws again would correlate them (one uniform per token, at another temperature or under a
    slightly changed model, picks much the same tokens).

    >>> salted_seed(7, None)
    7
    >>> salted_seed(7, "search_noise/iter_0") != salted_seed(7, "search/iter_1")
    True
    """
    if salt is None:
        return int(run_seed)
    digest = hashlib.blake2b(f"{int(run_seed)}\x00{salt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> (64 - SEED_BITS)


def check_seeds(seeds: Sequence[Sequence[int]] | None, prompts: int, n: int) -> None:
    """``seeds`` is None or holds ``n`` seeds for each of ``prompts`` prompts (else ValueError)."""
    if seeds is None:
        return
    if len(seeds) != prompts or any(len(s) != n for s in seeds):
        shape = [len(s) for s in seeds]
        raise ValueError(
            f"seeds must be {prompts} lists of {n} seeds (one per candidate), got {shape}"
        )


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


def generation_of(raw: Iterable[Candidate | None]) -> Generation:
    """The :class:`Generation` of one prompt's raw candidates (a backend's ``raw_candidates``, one
    per seed; None: an aborted sample, dropped): what ``generate`` returns for that prompt.

    >>> generation_of([Candidate("a", -1.0, 2), None, Candidate(" a", -0.5, 3)]).raw_count
    2
    """
    return dedup_candidates(c for c in raw if c is not None)


@runtime_checkable
class TacticGenerator(Protocol):
    """What search, eval and the EBM need from a policy model. Implementations are synchronous;
    async callers run them in a worker thread (``asyncio.to_thread``)."""

    model_id: str  # identifies the weights (path or served name); keys the embedding cache

    def generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        seeds: Sequence[Sequence[int]] | None = None,
    ) -> list[Generation]:
        """One :class:`Generation` per prompt, in prompt order.  ``seeds[i][j]`` seeds candidate
        ``j`` of prompt ``i`` (module docstring); with the same seed a backend returns the same
        candidate whatever else is in the call."""
        ...

    # Every backend also has ``raw_candidates(prompts, params, seeds)``: per prompt, its ``n`` raw
    # candidates in seed order, before de-duplication (None: a sample the server aborted), so that
    # ``generate`` is ``[generation_of(raw) for raw in raw_candidates(...)]`` — the per-seed answers
    # the expansion cache keys one by one (burnqed.search.cache) — and the class attribute
    # ``candidates_independent_of_n``: whether candidate ``j`` depends on its seed but not on how
    # many candidates the call asks for (HTTP: one request item per candidate; in process: no,
    # the ``n`` candidates are one batch whose shape decides the kernels' rounding).  Not part of
    # the protocol: test fakes need not have them (the cache then leaves the policy alone).

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), hidden_size)`` float32 embeddings."""
        ...

    def close(self) -> None:
        """Release servers, sessions or memory held by the backend."""
        ...
