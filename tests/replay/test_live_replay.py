"""``--live`` replay against burnqed's propositional REPL: a recorded log-prob search replayed under
another priority, with what the recording never answered asked live (the recording's model and
seeds; Lean below chains of recorded answers through adopted states), equals a live search with that
priority exactly — trees, results, proofs — except the clock fields."""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from burnqed.config import LeanConfig, SearchConfig
from burnqed.data.proplogic import generate_theorems
from burnqed.lean.pool import LeanPool
from burnqed.policy import Candidate, Generation, SamplingParams, check_seeds, dedup_candidates
from burnqed.replay.stage import replay_search
from burnqed.search.recorded import RecordedSource, Recording
from burnqed.search.sources import LiveSource
from burnqed.search.stage import search_to_dir
from tests.replay.test_replay import rows
from tests.search.test_proplogic_pool import trace_steps

WRONG = ("assumption", "constructor", "left", "right", "intro h9", "intro h8", "exact foo", "sorry")


@dataclass
class SeededTracedPolicy:
    """Candidate ``j`` of a prompt is a function of (prompt, its seed) alone, like a real backend:
    the recorded proof step (for traced states) among wrong and banned tactics."""

    steps: dict[str, str]  # prompt → the traced proof's next tactic
    model_id: str = "seeded-traced"

    def generate(
        self, prompts: Sequence[str], params: SamplingParams, seeds=None
    ) -> list[Generation]:
        check_seeds(seeds, len(prompts), params.n)
        assert seeds is not None, "the replay asks with the recording's seeds"
        out = []
        for p, ss in zip(prompts, seeds, strict=True):
            pool = [*WRONG, *([self.steps[p]] * 3 if p in self.steps else [])]
            raw = []
            for s in ss:
                rng = random.Random(f"{p}\0{s}")
                raw.append(Candidate(rng.choice(pool), -3 * rng.random(), 2))
            out.append(dedup_candidates(raw))
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.zeros((len(texts), 2), dtype=np.float32)

    def close(self) -> None:
        pass


class FewerHypotheses:
    """A value that reorders the search: more hypotheses and longer goals look harder."""

    def energies(self, states: Sequence[str], goals: Sequence[str]) -> np.ndarray:
        return np.array([s.count("\n") + len(s) / 40 for s in states], dtype=np.float32)


def test_live_replay_under_another_priority_equals_the_live_search(tmp_path):
    theorems = generate_theorems(8, seed=5, min_depth=3, max_depth=5)
    lean = LeanConfig(repl_command=(sys.executable, "-m", "burnqed.proplogic"), imports=(),
                      workers=2)  # fmt: skip
    cfg = SearchConfig(max_nodes=10, max_depth=12, num_candidates=6, concurrency=3,
                       expansions_per_step=1, energy_weight=1.0, max_error_fraction=1.0)  # fmt: skip
    sampling = SamplingParams(n=6, temperature=1.0)

    async def main():
        async with LeanPool(lean) as pool:
            steps = await trace_steps(pool, theorems)
            policy = SeededTracedPolicy(steps)
            await search_to_dir(theorems, policy, pool, cfg, tmp_path / "rec", sampling=sampling,
                                seed=7)  # fmt: skip
            await search_to_dir(theorems, policy, pool, cfg, tmp_path / "live", sampling=sampling,
                                seed=7, value_model=FewerHypotheses())  # fmt: skip
            before = pool.stats()
            source = RecordedSource(Recording.read(tmp_path / "rec"), live=LiveSource(policy, pool))
            await replay_search(theorems, source, cfg, sampling=sampling, seed=7,
                                value_model=FewerHypotheses(), out=tmp_path / "replay")  # fmt: skip
            after = pool.stats()
            return source, {k: after[k] - before[k] for k in ("rebuilds", "disagreements")}

    source, pool_delta = asyncio.run(main())
    live = rows(tmp_path / "live")
    assert rows(tmp_path / "replay") == live
    assert rows(tmp_path / "replay", summary=True) == rows(tmp_path / "live", summary=True)
    # The test can tell: proofs found, and both kinds of answer used.
    assert any(r["on_proof_path"] for r in live)
    st = source.stats()
    assert st["expansions"]["recorded"] > 0 and st["expansions"]["live"] > 0, st
    assert st["lean"]["recorded"] > 0 and st["lean"]["live"] > 0, st
    # Live questions below recorded answers: the chain was adopted and rebuilt, and agreed.
    assert st["states"]["adopted"] > 0 and st["states"]["rebuilds"] > 0, st
    assert st["states"]["disagreements"] == 0 and pool_delta["disagreements"] == 0
    assert pool_delta["rebuilds"] == st["states"]["rebuilds"]
    assert st["inexact_attempts"] == 0 and not source.unexpanded
