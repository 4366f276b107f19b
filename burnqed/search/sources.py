"""Where a search's answers come from: one interface, interchangeable sources.

A best-first search asks three kinds of question, and nothing else decides its tree:

- **candidates** for a node: an :class:`ExpandRequest` — theorem key, attempt, the node's state
  hash, the exact prompt and the per-candidate seeds (everything a recording or a cache keys on) —
  answered by a :class:`~burnqed.policy.Generation`;
- **Lean outcomes**: ``start(theorem, attempt)`` gives a session whose ``apply(state, tactic)``
  returns a success (``.state``: ``.text``, ``.solved``) or a failure (``.kind``, ``.message``);
- **verdicts**: ``verify(theorem, tactics, attempt=…)``, the whole-file check of a proof (``.ok``,
  ``.reasons``).

An :class:`AnswerSource` answers all three.  The engine (:mod:`burnqed.search.engine`) first offers
each request to :meth:`AnswerSource.lookup` — an answer known without the model (a recording, a
cache hit) comes back at once, on the event loop — and sends the rest, batched with every other
search's requests, to :meth:`AnswerSource.generate` on the generator's thread (continuous batching:
:class:`~burnqed.search.engine._Scheduler`).  Sources:

- :class:`LiveSource` — the policy and Lean (today's search; ``lookup`` never answers, so batches,
  trees and results are exactly what they were before the interface existed);
- :class:`~burnqed.search.recorded.RecordedSource` — a recorded search's tree (``burnqed replay``),
  reading through to a live source where the recording has no answer (``--live``);
- the expansion cache (issue 31) — reads through to live on a miss and stores what live returned.

Each source reports what answered what in :meth:`AnswerSource.stats` (a JSON-able dict a manifest
or an eval JSON carries: hits, misses, unexpanded nodes, rebuilt states, disagreements).  A source
may also have ``redo(theorem, attempt) -> bool``, which the engine asks after each attempt: True
when an answer the attempt went on from proved wrong (the expansion cache: Lean refuted a cached
answer), and the attempt is searched again.  With such a source the engine holds a theorem's
attempts until its last one ends and asks again about each before writing any (an answer one
attempt refutes may have been served to another), then tells the source ``settled(theorem,
attempt)`` as it writes each.

Example (with a policy ``gen`` and a ``LeanPool`` or fake environment ``env``)::

    source = LiveSource(gen, env)
    results = asyncio.run(search_from_source(theorems, source, SearchConfig(max_nodes=16)))
    source.stats()   # {'source': 'live', 'expansions': {'live': …}, 'lean': …}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from burnqed.policy import Generation, SamplingParams, TacticGenerator
from burnqed.theorems import Theorem

# --------------------------------------------------------------------------------------------
# What a live source needs from Lean (burnqed.lean.pool.LeanPool provides it; tests use fakes)


class ProofStateLike(Protocol):
    sid: int
    text: str  # Lean-printed goals (render_goals), "no goals" when solved
    depth: int

    @property
    def solved(self) -> bool: ...


class ProofSessionLike(Protocol):
    root: Any  # ProofStateLike

    async def apply(self, state: Any, tactic: str) -> Any:
        """``TacticSuccess`` (has ``.state``, ``.lean_time_s``) or ``TacticFailure`` (``.kind``,
        ``.message``, ``.lean_time_s``)."""
        ...

    async def close(self) -> None: ...


class ProofEnvironment(Protocol):
    """``LeanPool``'s surface the engine uses; raises ``StartError`` for a bad statement."""

    async def start(self, theorem: Theorem) -> ProofSessionLike: ...

    async def verify(self, theorem: Theorem, tactics: Sequence[str]) -> Any:
        """A verdict with ``.ok`` and ``.reasons`` (whole-file check in a fresh worker)."""
        ...


# --------------------------------------------------------------------------------------------
# The interface


@dataclass(frozen=True)
class ExpandRequest:
    """One node's generation request, with everything that decides its answer.

    The candidates of a node are a function of (model, prompt, seeds) and the seeds of (run seed,
    theorem, attempt, state hash) (:func:`burnqed.policy.candidate_seeds`): a recording is keyed by
    (theorem, attempt, state hash), a cache by the prompt bytes and each candidate's seed.
    """

    theorem: str  # the theorem's key (unique in its benchmark)
    attempt: int  # 0-based attempt (pass@N)
    state_hash: str  # burnqed.search.tree.state_hash of the node's Lean-printed state
    prompt: str  # the exact prompt the policy is sent (burnqed.data.prompt.format_prompt)
    seeds: tuple[int, ...] | None  # one per candidate; None for an unseeded (irreproducible) run


class AnswerSource(Protocol):
    """Candidate lists, Lean outcomes and verdicts for the search (module docstring)."""

    def lookup(self, request: ExpandRequest, params: SamplingParams) -> Generation | None:
        """The candidates of ``request`` if known without asking the model (a recorded or cached
        answer), else None: the request then goes to :meth:`generate`.  Cheap; on the event loop."""
        ...

    def generate(
        self, requests: Sequence[ExpandRequest], params: SamplingParams
    ) -> list[Generation]:
        """One :class:`~burnqed.policy.Generation` per request, in order (synchronous: the engine
        calls it from the generator's thread, with a batch of every search's misses)."""
        ...

    async def start(self, theorem: Theorem, attempt: int) -> ProofSessionLike:
        """A proof session of ``theorem`` for one attempt (``StartError``: the statement's defect)."""
        ...

    async def verify(self, theorem: Theorem, tactics: Sequence[str], *, attempt: int) -> Any:
        """The whole-file verdict on a proof (``.ok``, ``.reasons``) found by ``attempt``."""
        ...

    def stats(self) -> dict:
        """What answered what (JSON-able): per kind of question, hits / misses / … of this source."""
        ...


class LiveSource:
    """Every answer from the policy ``generator`` and the Lean ``env`` (a ``LeanPool`` or a fake).

    ``lookup`` never answers, so every request is batched to the generator exactly as the engine
    did before sources existed: the live search's trees, results and batches are unchanged.
    """

    kind = "live"

    def __init__(self, generator: TacticGenerator, env: ProofEnvironment) -> None:
        self.generator = generator
        self.env = env
        self._expansions = 0  # requests the policy answered
        self._verifications = 0

    def lookup(self, request: ExpandRequest, params: SamplingParams) -> Generation | None:
        return None

    def generate(
        self, requests: Sequence[ExpandRequest], params: SamplingParams
    ) -> list[Generation]:
        self._expansions += len(requests)
        prompts = [r.prompt for r in requests]
        if requests and requests[0].seeds is None:  # an unseeded run
            return self.generator.generate(prompts, params)
        return self.generator.generate(prompts, params, [r.seeds for r in requests])

    async def start(self, theorem: Theorem, attempt: int) -> ProofSessionLike:
        return await self.env.start(theorem)

    async def verify(self, theorem: Theorem, tactics: Sequence[str], *, attempt: int) -> Any:
        self._verifications += 1
        return await self.env.verify(theorem, tactics)

    def stats(self) -> dict:
        return {
            "source": self.kind,
            "expansions": {"live": self._expansions},
            "verifications": {"live": self._verifications},
        }


__all__ = [
    "AnswerSource",
    "ExpandRequest",
    "LiveSource",
    "ProofEnvironment",
    "ProofSessionLike",
    "ProofStateLike",
]
