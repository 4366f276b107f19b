"""Fakes for search tests: a toy proof environment, deterministic policies and a value model.

The toy logic ("countdown"): a state is a tuple of positive numbers, one per goal, printed as
``⊢ reach n`` blocks.  Tactics act on the first goal: ``step k`` (1 ≤ k ≤ 3) lowers it by k and closes
it at 0 (error when k > n); ``split a`` (0 < a < n) replaces n by the goals a and n − a; ``noop``
returns the same state (a transposition the engine must merge); anything else is an unknown tactic.
``cheat`` closes every goal step by step but whole-file verification rejects it — the analogue of a
tactic the REPL accepts that the file check refuses — so tests can see that such proofs never count.

Example::

    >>> env = ToyEnv()
    >>> import asyncio
    >>> s = asyncio.run(env.start(toy_theorem("t", 2)))
    >>> r = asyncio.run(s.apply(s.root, "step 2"))
    >>> r.state.solved, asyncio.run(env.verify(toy_theorem("t", 2), ["step 2"])).ok
    (True, True)
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from burnqed.lean.errors import ReplError, StartError
from burnqed.lean.pool import TacticFailure, Verdict
from burnqed.policy import Candidate, Generation, SamplingParams, check_seeds, dedup_candidates
from burnqed.theorems import Theorem


def _seed(*parts: object) -> int:
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "big")


def render(goals: tuple[int, ...]) -> str:
    return "\n\n".join(f"x : Nat\n⊢ reach {g}" for g in goals) if goals else "no goals"


def toy_theorem(name: str, n: int) -> Theorem:
    return Theorem(name=name, formal_statement=f"theorem {name} : reach {n} := by\n")


def toy_theorems(count: int, *, seed: int = 0, low: int = 3, high: int = 12) -> list[Theorem]:
    rng = random.Random(seed)
    return [toy_theorem(f"toy{i:04d}", rng.randint(low, high)) for i in range(count)]


@dataclass(frozen=True)
class ToyState:
    sid: int
    goals: tuple[int, ...]
    text: str
    depth: int

    @property
    def solved(self) -> bool:
        return not self.goals


@dataclass(frozen=True)
class ToySuccess:
    state: ToyState
    messages: tuple[str, ...]
    lean_time_s: float


def step(goals: tuple[int, ...], tactic: str) -> tuple[int, ...] | str:
    """The toy logic: new goals, or an error message."""
    if not goals:
        return "no goals to be proved"
    first, rest = goals[0], goals[1:]
    if tactic == "noop":
        return goals
    if tactic == "cheat":
        return ()
    if m := re.fullmatch(r"step (\d+)", tactic):
        k = int(m.group(1))
        if not 1 <= k <= 3 or k > first:
            return f"step {k}: cannot lower {first}"
        return ((first - k,) if first > k else ()) + rest
    if m := re.fullmatch(r"split (\d+)", tactic):
        a = int(m.group(1))
        if not 0 < a < first:
            return f"split {a}: out of range for {first}"
        return (a, first - a, *rest)
    return f"unknown tactic '{tactic}'"


def goal_of(theorem: Theorem) -> int:
    m = re.search(r"reach (\d+)", theorem.formal_statement)
    if not m:
        raise StartError(f"{theorem.name}: statement does not elaborate")
    return int(m.group(1))


class ToySession:
    def __init__(self, env: ToyEnv, theorem: Theorem) -> None:
        self.env = env
        self.theorem = theorem
        self.root = ToyState(0, (goal_of(theorem),), render((goal_of(theorem),)), 0)
        self._next = 1
        self.closed = False

    async def apply(self, state: ToyState, tactic: str) -> ToySuccess | TacticFailure:
        assert not self.closed, "apply after close"
        await self.env._lean_call()
        self.env.applies += 1
        out = step(state.goals, tactic)
        if isinstance(out, str):
            return TacticFailure("error", out, self.env.lean_time_s)
        self._next += 1
        st = ToyState(self._next, out, render(out), state.depth + 1)
        return ToySuccess(st, (), self.env.lean_time_s)

    async def close(self) -> None:
        self.closed = True
        self.env.open_sessions -= 1


class ToyEnv:
    """The ``ProofEnvironment`` of the toy logic; optional per-call latency over ``workers``."""

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        workers: int = 6,
        lean_time_s: float = 0.001,
        crash_starts: dict[str, int] | None = None,
    ) -> None:
        self.latency_s = latency_s
        # theorem name → how many of its starts fail with an infrastructure error (a dying REPL)
        self.crash_starts = dict(crash_starts or {})
        self.lean_time_s = lean_time_s
        self._sem = asyncio.Semaphore(workers) if latency_s else None
        self.applies = 0
        self.verifications: list[tuple[str, tuple[str, ...], bool]] = []
        self.open_sessions = 0

    async def _lean_call(self) -> None:
        if self._sem is not None:
            async with self._sem:
                await asyncio.sleep(self.latency_s)

    def stats(self) -> dict:
        """What ``LeanPool.stats`` reports, as far as the toy logic has it."""
        return {"applies": self.applies, "verifications": len(self.verifications)}

    async def start(self, theorem: Theorem) -> ToySession:
        if self.crash_starts.get(theorem.name, 0) > 0:
            self.crash_starts[theorem.name] -= 1
            raise ReplError(
                f"worker0: pid 1 exited (code -9) during frontend.process ({theorem.name})"
            )
        session = ToySession(self, theorem)
        self.open_sessions += 1
        return session

    async def verify(self, theorem: Theorem, tactics: Sequence[str]) -> Verdict:
        """Whole-proof check: replay the file from scratch; ``cheat`` is refused."""
        goals: tuple[int, ...] = (goal_of(theorem),)
        reasons: list[str] = []
        for t in tactics:
            if t == "cheat":
                reasons.append("declaration uses 'sorryAx'")
                break
            out = step(goals, t)
            if isinstance(out, str):
                reasons.append(out)
                break
            goals = out
        if not reasons and goals:
            reasons.append(f"unsolved goals: {render(goals)}")
        ok = not reasons
        self.verifications.append((theorem.name, tuple(tactics), ok))
        return Verdict(ok=ok, reasons=tuple(reasons), file=theorem.lean_file(tactics), axioms=())


TOY_TACTICS = ("step 1", "step 2", "step 3", "split 2", "split 3", "noop", "bogus", "cheat")


@dataclass
class RandomToyPolicy:
    """A deterministic policy: candidate ``j`` of a prompt depends only on (seed, prompt, the
    candidate's own seed) — the contract of a real backend (``burnqed.policy``).

    Proposes ``n`` tactics drawn from :data:`TOY_TACTICS` (``cheat`` only if ``allow_cheat``) with
    random logprobs; records every batch it is called with.  Unseeded calls depend on (seed, prompt).
    """

    seed: int = 0
    allow_cheat: bool = True
    tactics: tuple[str, ...] = TOY_TACTICS
    model_id: str = "fake-random"
    batch_sizes: list[int] = field(default_factory=list)
    calls: list[SamplingParams] = field(default_factory=list)
    seeds_seen: list[Sequence[int]] = field(default_factory=list)

    def generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        seeds: Sequence[Sequence[int]] | None = None,
    ) -> list[Generation]:
        check_seeds(seeds, len(prompts), params.n)
        self.batch_sizes.append(len(prompts))
        self.calls.append(params)
        self.seeds_seen.extend(seeds or [])
        pool = [t for t in self.tactics if self.allow_cheat or t != "cheat"]
        out = []
        for i, p in enumerate(prompts):
            if seeds is None:
                rng = random.Random(_seed(self.seed, p))
                rngs = [rng] * params.n
            else:
                rngs = [random.Random(_seed(self.seed, p, s)) for s in seeds[i]]
            raw = [Candidate(r.choice(pool), -r.random() * 3, r.randint(1, 5)) for r in rngs]
            out.append(dedup_candidates(raw))
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.zeros((len(texts), 4), dtype=np.float32)

    def close(self) -> None:
        pass


@dataclass
class FixedPolicy:
    """Proposes the same tactics with the same logprobs for every state (best-first order tests)."""

    logprobs: dict[str, float]
    model_id: str = "fake-fixed"
    batch_sizes: list[int] = field(default_factory=list)

    def generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        seeds: Sequence[Sequence[int]] | None = None,
    ) -> list[Generation]:
        self.batch_sizes.append(len(prompts))
        return [
            dedup_candidates(Candidate(t, lp, 1) for t, lp in self.logprobs.items())
            for _ in prompts
        ]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.zeros((len(texts), 4), dtype=np.float32)

    def close(self) -> None:
        pass


@dataclass
class ToyValue:
    """Energy = the sum of the open goals' numbers (lower = closer to a proof); records batches."""

    batch_sizes: list[int] = field(default_factory=list)

    def energies(self, states: Sequence[str], goals: Sequence[str]) -> np.ndarray:
        assert len(states) == len(goals)
        self.batch_sizes.append(len(states))
        return np.array(
            [sum(int(x) for x in re.findall(r"reach (\d+)", s)) for s in states], dtype=np.float32
        )
