"""The expansion cache against burnqed's propositional REPL: a search whose first expansions are
answered from the cache and whose later ones go live — below chains of cached answers, whose states
the pool rebuilds — equals the live search exactly (trees, results, proofs), and every rebuilt state
equals the live one (no disagreement)."""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from burnqed.config import LeanConfig, PolicyConfig, SearchConfig
from burnqed.data.proplogic import generate_theorems
from burnqed.lean.pool import LeanPool
from burnqed.policy import Candidate, SamplingParams, generation_of
from burnqed.search.cache import CacheSpec, lean_settings, policy_settings
from burnqed.search.stage import search_to_dir
from tests.replay.test_live_replay import WRONG, SeededTracedPolicy
from tests.replay.test_replay import rows
from tests.search.test_proplogic_pool import trace_steps


@dataclass
class RawTracedPolicy(SeededTracedPolicy):
    """The traced policy with a backend's per-seed path (candidate j: its prompt and seed)."""

    candidates_independent_of_n = True

    def raw_candidates(self, prompts: Sequence[str], params: SamplingParams, seeds=None):
        out = []
        for p, ss in zip(prompts, seeds, strict=True):
            pool = [*WRONG, *([self.steps[p]] * 3 if p in self.steps else [])]
            rngs = [random.Random(f"{p}\0{s}") for s in ss]
            out.append([Candidate(r.choice(pool), -3 * r.random(), 2) for r in rngs])
        return out

    def generate(self, prompts, params, seeds=None):
        return [generation_of(r) for r in self.raw_candidates(prompts, params, seeds)]


def test_a_state_rebuilt_after_a_chain_of_cache_hits_equals_the_live_one(tmp_path):
    theorems = generate_theorems(8, seed=5, min_depth=3, max_depth=5)
    lean = LeanConfig(repl_command=(sys.executable, "-m", "burnqed.proplogic"), imports=(),
                      workers=2)  # fmt: skip
    small = SearchConfig(max_nodes=3, max_depth=12, num_candidates=6, concurrency=3,
                         expansions_per_step=1, max_error_fraction=1.0)  # fmt: skip
    large = SearchConfig(**{**small.to_dict(), "max_nodes": 10})
    sampling = SamplingParams(n=6, temperature=1.0)

    async def main():
        async with LeanPool(lean) as pool:
            steps = await trace_steps(pool, theorems)
            policy = RawTracedPolicy(steps)
            spec = CacheSpec(
                tmp_path / "cache",
                policy=policy_settings(policy, PolicyConfig(backend="transformers", device="cpu")),
                lean=lean_settings(lean, "proplogic"),
            )
            run = {"sampling": sampling, "seed": 7}
            # The first 3 expansions of every attempt go into the cache; then the 10-expansion
            # search: its first 3 are hits, the rest ask Lean below cached chains.
            await search_to_dir(theorems, policy, pool, small, tmp_path / "fill", cache=spec, **run)
            before = pool.stats()
            cached = await search_to_dir(theorems, policy, pool, large, tmp_path / "cached",
                                         cache=spec, **run)  # fmt: skip
            after = pool.stats()
            await search_to_dir(theorems, policy, pool, large, tmp_path / "live", **run)
            return cached["cache"], {k: after[k] - before[k] for k in ("rebuilds", "disagreements")}

    block, pool_delta = asyncio.run(main())
    live = rows(tmp_path / "live")
    assert rows(tmp_path / "cached") == live
    assert rows(tmp_path / "cached", summary=True) == rows(tmp_path / "live", summary=True)
    assert any(r["on_proof_path"] for r in live)
    assert sum(r["expansion_index"] is not None and r["expansion_index"] >= 3 for r in live) > 0
    # Both kinds of answer, and live questions below cached chains: adopted, rebuilt, agreeing.
    assert block["lean"]["hits"] > 0 and block["lean"]["misses"] > 0, block
    assert block["policy"]["candidates"]["hits"] > 0, block
    assert block["policy"]["candidates"]["misses"] > 0, block
    assert block["starts"]["hits"] == 8, block
    assert block["states"]["adopted"] > 0 and block["states"]["rebuilds"] > 0, block
    assert pool_delta["rebuilds"] > 0 and pool_delta["disagreements"] == 0
    assert block["states"]["disagreements"] == 0 and block["conflicts"] == 0
    assert block["lean"]["rebuild_s"] > 0
    assert block["lean"]["net_saved_s"] == block["lean"]["saved_s"] - block["lean"]["rebuild_s"]
