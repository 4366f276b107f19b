"""The engine against the real ``LeanPool`` running burnqed's propositional REPL (no Lean needed).

The fake policy knows each generated theorem's recorded proof steps (traced through the pool first)
and mixes them with wrong, banned and plausible-but-different tactics; every proof the search reports
must pass ``pool.verify`` again, as a whole file, in a fresh worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from burnqed.config import LeanConfig, SearchConfig
from burnqed.data.prompt import format_prompt
from burnqed.data.proplogic import generate_theorems
from burnqed.lean.pool import LeanPool
from burnqed.policy import Candidate, Generation, SamplingParams, dedup_candidates
from burnqed.search import search_all

WRONG = (
    "assumption",
    "constructor",
    "left",
    "right",
    "intro h9",
    "exact foo",
    "sorry",
    "contradiction",
    "trivial",
    "native_decide",
)


@dataclass
class TracedPolicy:
    """Proposes the recorded step for known states (if any) among wrong tactics, deterministically."""

    steps: dict[str, str]  # prompt → recorded tactic
    seed: int = 0
    model_id: str = "traced"
    batch_sizes: list[int] = field(default_factory=list)

    def generate(
        self, prompts: Sequence[str], params: SamplingParams, seeds=None
    ) -> list[Generation]:
        self.batch_sizes.append(len(prompts))
        out = []
        for p in prompts:
            rng = random.Random(f"{self.seed}{p}")
            pool = list(WRONG)
            if p in self.steps:
                pool.append(self.steps[p])
            chosen = rng.sample(pool, k=min(params.n, len(pool)))
            if p in self.steps and self.steps[p] not in chosen and rng.random() < 0.7:
                chosen[-1] = self.steps[p]
            out.append(dedup_candidates(Candidate(t, -3 * rng.random(), 3) for t in chosen))
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.zeros((len(texts), 2), dtype=np.float32)

    def close(self) -> None:
        pass


async def trace_steps(pool, theorems) -> dict[str, str]:
    """The known proofs of ``theorems`` traced through ``pool``: prompt of each state → the proof's
    next tactic (what the traced policies propose)."""
    steps: dict[str, str] = {}
    for t in theorems:
        s = await pool.start(t)
        state = s.root
        for tactic in t.proof:
            steps[format_prompt(state.text)] = tactic
            state = (await s.apply(state, tactic)).state
        await s.close()
    return steps


def test_search_over_the_propositional_repl_finds_only_verifying_proofs():
    theorems = generate_theorems(12, seed=3, min_depth=2, max_depth=5)
    lean = LeanConfig(
        repl_command=(sys.executable, "-m", "burnqed.proplogic"), imports=(), workers=3
    )
    cfg = SearchConfig(max_nodes=30, max_depth=12, num_candidates=5, concurrency=4, timeout_s=60)

    async def main():
        async with LeanPool(lean) as pool:
            steps = await trace_steps(pool, theorems)
            policy = TracedPolicy(steps)
            results = await search_all(
                theorems,
                policy,
                pool,
                dataclasses.replace(cfg, expansions_per_step=2),
                keep_trees=True,
            )
            verdicts = {
                r.theorem: await pool.verify(
                    next(t for t in theorems if t.name == r.theorem), list(r.proof)
                )
                for r in results
                if r.proof is not None
            }
            return results, verdicts, policy

    results, verdicts, policy = asyncio.run(main())
    assert len(results) == len(theorems)
    for r in results:
        r.check(cfg)
        assert r.status in ("proved", "failed"), r.reasons
    proved = [r for r in results if r.status == "proved"]
    assert len(proved) >= len(theorems) // 2
    assert all(verdicts[r.theorem].ok for r in proved), verdicts
    assert all("sorry" not in r.proof and "native_decide" not in r.proof for r in proved)
    # Banned tactics never reach the tree as states: they are error edges.
    errors = [n.error for r in results for n in r.tree.nodes if n.tactic == "sorry"]
    assert errors and all(e is not None for e in errors)
    assert max(policy.batch_sizes) > 1
