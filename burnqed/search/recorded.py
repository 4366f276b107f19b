"""Answers from a recorded search: its trees, read back as an answer source (``burnqed replay``).

A search's trajectory directory (:mod:`burnqed.trajectory`) records every expanded node's children
in creation order — tactic, ``llm_logprob``, the child's printed state, error or ``duplicate_of``
(whose state is its target's) — and the expansion's ``tokens`` and ``num_candidates``.  Candidates
are seeded per (theorem, attempt, state) (:func:`burnqed.policy.candidate_seeds`) and Lean is
deterministic, so those rows *are* the answers any search of the same theorems with the same model,
seeds and sampling would get, in whatever order it visits the states.  :class:`Recording` indexes
them; :class:`RecordedSource` serves them on the engine's answer-source interface
(:mod:`burnqed.search.sources`):

- **candidates** of (theorem, attempt, state hash): the recorded children of that state's
  expansion.  A state the recording never expanded goes to the live source under ``--live`` (the
  recording's model and seeds: the same answer a live search gets), else it is **unexpanded**: it
  gets no candidates (the pop still spends the budget, as it would live), is counted, and its
  attempt is marked inexact;
- **Lean outcomes** of (theorem, state, tactic): the recorded child (the same attempt's record,
  else any attempt's: Lean does not depend on the attempt); a tactic the recording never ran goes
  to live (only a live expansion's candidates can be such);
- **verdicts** on a proof (its whole tactic list): the recording's, where it accepted or rejected
  that proof; otherwise live, else *assumed accepted* (Lean already said "no goals"), counted and
  the attempt marked inexact.

**Live state after recorded answers.**  A recorded answer leaves no state in any REPL.  The first
live question below a chain of recorded answers starts the theorem live and rebuilds the chain
(:mod:`burnqed.search.answered`, shared with the expansion cache): with a ``LeanPool`` session by
:meth:`~burnqed.lean.pool.ProofSession.adopt` (the pool rebuilds an adopted state on first use —
``goal.load`` of a saved ancestor, replay of the tactics below it — and counts ``rebuilds`` and
``disagreements``: a rebuilt state Lean prints differently; the live one stands); with an
environment that cannot adopt (a test fake) by applying the path's tactics itself, counted the same
way.

Energies: :class:`RecordedValue` gives back the recording's own energies (a replay with the
recording's own priority), :class:`OracleValue` ranks the states on a recorded proof path first
(the oracle ceiling).

Example::

    rec = Recording.read(Path("results/iter_0/eval"))
    source = RecordedSource(rec)                       # or RecordedSource(rec, live=LiveSource(…))
    results = asyncio.run(search_from_source(theorems, source, cfg, sampling=…, seed=…))
    source.stats()["expansions"]                       # {'recorded': 812, 'unexpanded': 3}
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from burnqed.lean.errors import ReplError, StartError
from burnqed.lean.pool import TacticFailure
from burnqed.lean.verify import Verdict
from burnqed.policy import Candidate, Generation, SamplingParams
from burnqed.search.answered import AnsweredSession, AnsweredState, AnsweredSuccess
from burnqed.search.engine import NOT_VERIFIED_ENDED, NOT_VERIFIED_LATER
from burnqed.search.sources import ExpandRequest, LiveSource
from burnqed.search.tree import state_hash
from burnqed.search.value import ValueModel
from burnqed.theorems import Theorem
from burnqed.trajectory import MANIFEST, read_nodes, read_summary, search_part_dirs

log = logging.getLogger(__name__)

# The node columns a recording is read from (burnqed.trajectory.NODE_SCHEMA).
_COLUMNS = (
    "theorem", "attempt", "node_id", "parent_id", "state", "tactic", "llm_logprob", "ebm_energy",
    "status", "on_proof_path", "solved", "error", "duplicate_of", "expansion_index", "lean_s",
    "tokens", "num_candidates",
)  # fmt: skip
_UNVERIFIED = {f"verification: {NOT_VERIFIED_ENDED}", f"verification: {NOT_VERIFIED_LATER}"}
ORACLE_ENERGY = -1.0e6  # an on-path state's energy under the oracle: ahead of any log-prob


@dataclass(frozen=True)
class Outcome:
    """One recorded tactic application."""

    text: str | None  # the printed state (a duplicate edge's: its target's); None: it failed
    error: str | None  # "kind: message" of a failed tactic
    lean_s: float  # what the call cost in the recording


@dataclass(frozen=True)
class Recording:
    """The answers a recorded search holds, indexed by what decides them (module docstring)."""

    path: Path
    manifest: dict  # the search's manifest (a sharded search's: its first shard's)
    # (theorem, attempt, state hash) → the candidates its expansion got
    expansions: dict[tuple[str, int, str], Generation]
    # (theorem, attempt, parent state hash, tactic) → outcome; and the same across attempts
    outcomes: dict[tuple[str, int, str, str], Outcome]
    any_outcomes: dict[tuple[str, str, str], Outcome]
    # (theorem, whole tactic list) → (accepted, the verifier's reason when rejected)
    verdicts: dict[tuple[str, tuple[str, ...]], tuple[bool, str]]
    roots: dict[str, str]  # theorem → its root state's printed form
    start_errors: dict[tuple[str, int], str]  # attempts whose statement Lean rejected → why
    energies: dict[tuple[str, str], float]  # (root text, state text) → the recorded energy
    proof_states: dict[str, frozenset[str]]  # root text → states on a recorded proof path

    @classmethod
    def read(cls, path: str | Path) -> Recording:
        """Index the trajectory directory ``path`` (a search output, sharded or not)."""
        path = Path(path)
        dirs = search_part_dirs(path)
        if not dirs:
            raise FileNotFoundError(f"{path}: no trajectory parts to replay")
        tables = [read_nodes(d).table for d in dirs]
        cols: dict[str, list] = {c: [] for c in _COLUMNS}
        for t in tables:
            for c in _COLUMNS:
                cols[c].extend(t.column(c).to_pylist())
        start_errors = {}
        for d in dirs:
            for r in read_summary(d).table.to_pylist():
                if r["ended_by"] == "statement" and r["reasons"]:
                    reason = r["reasons"][0]
                    start_errors[r["theorem"], r["attempt"]] = reason.removeprefix("statement: ")
        rec = cls(
            path=path,
            manifest=recording_manifest(path),
            expansions={},
            outcomes={},
            any_outcomes={},
            verdicts={},
            roots={},
            start_errors=start_errors,
            energies={},
            proof_states={},
        )
        rec._index(cols)
        log.info(
            "recording %s: %d expansions, %d tactic outcomes, %d verdicts, %d theorems",
            path, len(rec.expansions), len(rec.outcomes), len(rec.verdicts), len(rec.roots),
        )  # fmt: skip
        return rec

    def _index(self, cols: Mapping[str, list]) -> None:
        attempts: dict[tuple[str, int], list[int]] = {}
        for i, key in enumerate(zip(cols["theorem"], cols["attempt"], strict=True)):
            attempts.setdefault(key, []).append(i)
        on_path: dict[str, set[str]] = {}
        for (theorem, attempt), rows in attempts.items():
            row_of = {cols["node_id"][i]: i for i in rows}
            children: dict[int, list[int]] = {}
            for nid in sorted(row_of):
                parent = cols["parent_id"][row_of[nid]]
                if parent is not None:
                    children.setdefault(parent, []).append(row_of[nid])

            def text(i: int, row_of: dict[int, int] = row_of) -> str | None:
                dup = cols["duplicate_of"][i]
                return cols["state"][i] if dup is None else cols["state"][row_of[dup]]

            def tactics(i: int, row_of: dict[int, int] = row_of) -> tuple[str, ...]:
                path = []
                while cols["parent_id"][i] is not None:
                    path.append(cols["tactic"][i])
                    i = row_of[cols["parent_id"][i]]
                return tuple(reversed(path))

            root_text = cols["state"][row_of[0]]
            self.roots.setdefault(theorem, root_text)
            for i in rows:
                st = cols["state"][i]
                if cols["on_proof_path"][i] and st is not None:
                    on_path.setdefault(root_text, set()).add(st)
                if cols["ebm_energy"][i] is not None and st is not None:
                    self.energies[root_text, st] = float(cols["ebm_energy"][i])
                if cols["solved"][i] and cols["parent_id"][i] is not None:
                    verdict = _verdict(cols["status"][i], cols["error"][i])
                    if verdict is not None:
                        self.verdicts.setdefault((theorem, tactics(i)), verdict)
                if cols["expansion_index"][i] is None:
                    continue
                kids = children.get(cols["node_id"][i], [])
                parent_hash = state_hash(cols["state"][i])
                self.expansions[theorem, attempt, parent_hash] = Generation(
                    candidates=tuple(
                        Candidate(cols["tactic"][c], cols["llm_logprob"][c], 0) for c in kids
                    ),
                    raw_count=cols["num_candidates"][i],
                    tokens=cols["tokens"][i],
                )
                for c in kids:
                    t = text(c)
                    outcome = Outcome(
                        text=t, error=None if t is not None else cols["error"][c],
                        lean_s=cols["lean_s"][c],
                    )  # fmt: skip
                    self.outcomes[theorem, attempt, parent_hash, cols["tactic"][c]] = outcome
                    self.any_outcomes.setdefault((theorem, parent_hash, cols["tactic"][c]), outcome)
        self.proof_states.update({g: frozenset(s) for g, s in on_path.items()})

    def outcome(self, theorem: str, attempt: int, parent_hash: str, tactic: str) -> Outcome | None:
        """The recorded outcome of ``tactic`` on the state: this attempt's, else any attempt's."""
        o = self.outcomes.get((theorem, attempt, parent_hash, tactic))
        return o if o is not None else self.any_outcomes.get((theorem, parent_hash, tactic))

    @property
    def has_energies(self) -> bool:
        return bool(self.energies)


def _verdict(status: str, error: str | None) -> tuple[bool, str] | None:
    """A solved node's recorded verdict: accepted, rejected with the verifier's reason, or None
    (never checked: an earlier proof was accepted, or the attempt ended first)."""
    if status == "proved":
        return True, ""
    if error is None or error in _UNVERIFIED or not error.startswith("verification: "):
        return None
    return False, error.removeprefix("verification: ")


def recording_manifest(path: str | Path) -> dict:
    """The manifest of the search recorded in ``path``: its own, or (a sharded search's gathered
    manifest) its first shard's — sampling, config, model and seed are the same in every shard."""
    path = Path(path)
    m = path / MANIFEST
    if not m.is_file():
        raise FileNotFoundError(f"{m}: the recording has no manifest (an unfinished search)")
    manifest = json.loads(m.read_text(encoding="utf-8"))
    if "sampling" not in manifest and manifest.get("per_shard"):
        manifest = next(iter(manifest["per_shard"].values()))
    return manifest


# --------------------------------------------------------------------------------------------
# The source


class RecordedSource:
    """The engine's answer source over a :class:`Recording`, reading through to ``live`` (a
    :class:`~burnqed.search.sources.LiveSource`) where it has no answer (module docstring)."""

    kind = "recorded"

    def __init__(self, recording: Recording, live: LiveSource | None = None) -> None:
        self.recording = recording
        self.live = live
        self.counts: dict[str, Counter[str]] = {
            k: Counter() for k in ("expansions", "lean", "verifications", "starts", "states")
        }
        # (theorem, attempt) → state hashes the replay expanded without an answer
        self.unexpanded: dict[tuple[str, int], list[str]] = {}
        # (theorem, attempt) → proofs whose verdict was assumed (tactic lists)
        self.assumed: dict[tuple[str, int], list[tuple[str, ...]]] = {}
        self.inexact: set[tuple[str, int]] = set()  # attempts with an answer made up

    def lookup(self, request: ExpandRequest, params: SamplingParams) -> Generation | None:
        g = self.recording.expansions.get((request.theorem, request.attempt, request.state_hash))
        if g is not None:
            self.counts["expansions"]["recorded"] += 1
            return g
        if self.live is not None:
            self.counts["expansions"]["live"] += 1
            return None
        # Never expanded in the recording, no live policy: no candidates.  The pop spends its
        # budget as it would live, but what it would have found is unknown.
        self.counts["expansions"]["unexpanded"] += 1
        self.unexpanded.setdefault((request.theorem, request.attempt), []).append(
            request.state_hash
        )
        self.inexact.add((request.theorem, request.attempt))
        return Generation(candidates=(), raw_count=0, tokens=0)

    def generate(
        self, requests: Sequence[ExpandRequest], params: SamplingParams
    ) -> list[Generation]:
        if self.live is None:  # lookup answers every request without live
            raise RuntimeError("a recorded source without live was asked to generate")
        return self.live.generate(requests, params)

    async def start(self, theorem: Theorem, attempt: int) -> RecordedSession:
        rec = self.recording
        why = rec.start_errors.get((theorem.key, attempt))
        if why is not None:
            self.counts["starts"]["recorded"] += 1
            raise StartError(why)
        root = rec.roots.get(theorem.key)
        if root is not None:
            self.counts["starts"]["recorded"] += 1
            return RecordedSession(self, theorem, attempt, root)
        if self.live is None:
            raise ReplError(
                f"{theorem.key}: attempt {attempt} is not in the recording {rec.path} "
                "(replay with --live to search it live)"
            )
        session = RecordedSession(self, theorem, attempt, None)
        await session.start_live()
        return session

    async def verify(self, theorem: Theorem, tactics: Sequence[str], *, attempt: int) -> Verdict:
        verdict = self.recording.verdicts.get((theorem.key, tuple(tactics)))
        if verdict is not None:
            self.counts["verifications"]["recorded"] += 1
            ok, reason = verdict
            return Verdict(ok=ok, reasons=() if ok else (reason,), file="", axioms=())
        if self.live is not None:
            self.counts["verifications"]["live"] += 1
            return await self.live.verify(theorem, tactics, attempt=attempt)
        # Lean said "no goals" step by step; only the whole-file check is missing.
        self.counts["verifications"]["assumed"] += 1
        self.assumed.setdefault((theorem.key, attempt), []).append(tuple(tactics))
        self.inexact.add((theorem.key, attempt))
        return Verdict(ok=True, reasons=(), file="", axioms=())

    def stats(self) -> dict:
        """Per kind of question, what answered it; ``states``: adopted (handed to Lean without
        running it), rebuilt on first live use, and disagreements (rebuilt states Lean printed
        differently, live roots that differ from the recorded ones)."""
        states = Counter(self.counts["states"])
        env = getattr(self.live, "env", None)
        pool = env.stats() if callable(getattr(env, "stats", None)) else {}
        for k in ("rebuilds", "disagreements"):
            states[k] += int(pool.get(k, 0))
        return {
            "source": self.kind,
            "recording": str(self.recording.path),
            "live": self.live is not None,
            **{k: dict(sorted(self.counts[k].items())) for k in self.counts if k != "states"},
            "states": {k: states[k] for k in ("adopted", "rebuilds", "disagreements")},
            "inexact_attempts": len(self.inexact),
        }


class RecordedSession(AnsweredSession):
    """One attempt's proof session over the recording (the engine's ``ProofSessionLike``): recorded
    outcomes where the recording has them, live below them (:mod:`burnqed.search.answered`)."""

    def __init__(
        self, source: RecordedSource, theorem: Theorem, attempt: int, root: str | None
    ) -> None:
        super().__init__(theorem, attempt, root, live=source.live, counts=source.counts)
        self.source = source

    async def apply(self, state: AnsweredState, tactic: str) -> Any:
        src = self.source
        o = src.recording.outcome(self.theorem.key, self.attempt, state_hash(state.text), tactic)
        if o is not None:
            src.counts["lean"]["recorded"] += 1
            if o.text is None:
                kind, _, message = (o.error or "error: ").partition(": ")
                return TacticFailure(kind, message, o.lean_s)  # type: ignore[arg-type]
            return AnsweredSuccess(self.add(state.sid, tactic, o.text, o.lean_s), (), o.lean_s)
        if src.live is None:  # cannot happen for recorded candidates: their outcomes are recorded
            src.counts["lean"]["unanswered"] += 1
            src.inexact.add((self.theorem.key, self.attempt))
            return TacticFailure("error", "no recorded answer (replay with --live)", 0.0)
        src.counts["lean"]["live"] += 1
        return await self.apply_live(state, tactic)


# --------------------------------------------------------------------------------------------
# Values from the recording


class RecordedValue:
    """The energies the recording's value model gave each state (the recording's own priority).

    A state it never scored (first reached at the depth limit in the recording, or only in live
    answers) is scored by ``fallback`` (the live value model) when given, else gets energy 0 and is
    counted (``missing``).
    """

    def __init__(self, recording: Recording, fallback: ValueModel | None = None) -> None:
        self.recording = recording
        self.fallback = fallback
        self.counts: Counter[str] = Counter()

    def energies(self, states: Sequence[str], goals: Sequence[str]) -> np.ndarray:
        known = self.recording.energies
        out = np.array([known.get((g, s), np.nan) for s, g in zip(states, goals, strict=True)])
        miss = np.flatnonzero(np.isnan(out))
        self.counts["recorded"] += len(out) - len(miss)
        if len(miss) and self.fallback is not None:
            self.counts["live"] += len(miss)
            out[miss] = self.fallback.energies([states[i] for i in miss], [goals[i] for i in miss])
        elif len(miss):
            self.counts["missing"] += len(miss)
            out[miss] = 0.0
        return out

    def stats(self) -> dict:
        return {"value": "recorded energies", **dict(sorted(self.counts.items()))}


class OracleValue:
    """Knows the recorded proof paths: a state on one gets :data:`ORACLE_ENERGY` (far ahead of any
    log-prob at energy weight 1), every other state 0, so on-path states are popped first and the
    rest in log-prob order — the ceiling a value model could reach on these answers."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording

    def energies(self, states: Sequence[str], goals: Sequence[str]) -> np.ndarray:
        on = self.recording.proof_states
        return np.array(
            [
                ORACLE_ENERGY if s in on.get(g, ()) else 0.0
                for s, g in zip(states, goals, strict=True)
            ]
        )

    def stats(self) -> dict:
        return {"value": "oracle (recorded proof paths)"}


__all__ = [
    "ORACLE_ENERGY",
    "OracleValue",
    "RecordedSource",
    "RecordedValue",
    "Recording",
    "recording_manifest",
]
