"""Schedule invariance: a theorem's tree does not depend on how the run was scheduled.

The real ``LeanPool`` over burnqed's propositional REPL, a policy that honours the backends' seed
contract (candidate ``j`` is a function of the prompt and its own seed: ``burnqed.policy``) and takes
time per call, and a value model scoring one state at a time.  The same theorems are searched at
concurrency 1 with one Lean worker and batches of one, and at concurrency 16 with three workers and
generation batches of 32: every tree — node order, candidates, logprobs, energies, statuses, proof —
must be identical.  So must it be when whole-file verification is made slow (the search waits for
its verdict; other theorems go on).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from burnqed.config import LeanConfig, SearchConfig
from burnqed.data.proplogic import generate_theorems
from burnqed.lean.pool import LeanPool
from burnqed.policy import Candidate, Generation, SamplingParams, check_seeds, dedup_candidates
from burnqed.search import search_all
from burnqed.search.engine import random_key
from burnqed.trajectory import _node_columns
from burnqed.value.frontier import choice_sets
from tests.search.test_proplogic_pool import WRONG, trace_steps

# Everything a node records except timings (which are wall-clock and differ by design).
TIMINGS = {"created_s", "lean_s", "expand_wall_s", "expand_lean_s", "state"}


@dataclass
class SeededTracedPolicy:
    """Candidate j of a prompt is drawn with its own seed from the recorded step (when known) and
    wrong or plausible tactics; every call sleeps a little, so batches form differently per run."""

    steps: dict[str, str]
    call_s: float = 0.002
    model_id: str = "seeded-traced"
    batch_sizes: list[int] = field(default_factory=list)

    def generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        seeds: Sequence[Sequence[int]] | None = None,
    ) -> list[Generation]:
        check_seeds(seeds, len(prompts), params.n)
        assert seeds is not None, "search runs seeded"
        self.batch_sizes.append(len(prompts))
        time.sleep(self.call_s * (1 + random.random()))
        out = []
        for p, own in zip(prompts, seeds, strict=True):
            pool = list(WRONG)
            if p in self.steps:
                pool += [self.steps[p]] * 3
            raw = []
            for s in own:
                rng = random.Random(f"{p}\0{s}")
                raw.append(Candidate(rng.choice(pool), -3 * rng.random(), rng.randint(1, 4)))
            out.append(dedup_candidates(raw))
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.zeros((len(texts), 2), dtype=np.float32)

    def close(self) -> None:
        pass


@dataclass
class TextValue:
    """Energy from the state text alone (one state at a time, like the EBM scorer)."""

    batch_sizes: list[int] = field(default_factory=list)

    def energies(self, states: Sequence[str], goals: Sequence[str]) -> np.ndarray:
        self.batch_sizes.append(len(states))
        time.sleep(0.001 * random.random())
        return np.array([(len(s) % 17) / 4 - s.count("→") / 3 for s in states], dtype=np.float32)


def _trace(theorems, lean: LeanConfig) -> dict[str, str]:
    async def main():
        async with LeanPool(lean) as pool:
            return await trace_steps(pool, theorems)

    return asyncio.run(main())


def _search(
    theorems,
    steps,
    lean: LeanConfig,
    cfg: SearchConfig,
    *,
    slow_verify: bool = False,
    order: str = "priority",
):
    policy, value = SeededTracedPolicy(steps), TextValue()

    async def main():
        async with LeanPool(lean) as pool:
            if slow_verify:
                verify = pool.verify

                async def slow(theorem, tactics):
                    await asyncio.sleep(0.05 + 0.1 * random.random())
                    return await verify(theorem, tactics)

                pool.verify = slow  # type: ignore[method-assign]
            return await search_all(
                theorems, policy, pool, cfg, seed=7, keep_trees=True, order=order,
                value_model=value if order == "priority" else None,
            )  # fmt: skip

    results = asyncio.run(main())
    return {r.theorem: r for r in results}, policy, value


def _tree(result) -> list[dict]:
    return [
        {k: v for k, v in dataclasses.asdict(n).items() if k not in TIMINGS}
        | {"text": n.text, "state_hash": n.state_hash}
        for n in result.tree.nodes
    ]


def _outcome(result) -> tuple:
    return (
        result.status,
        result.ended_by,
        result.proof,
        result.proof_expansion,
        result.nodes_expanded,
        result.nodes_total,
        result.tokens,
    )


def test_trees_do_not_depend_on_concurrency_workers_or_batch_sizes():
    theorems = generate_theorems(10, seed=5, min_depth=2, max_depth=5)
    repl = (sys.executable, "-m", "burnqed.proplogic")
    base = SearchConfig(
        max_nodes=24,
        max_depth=10,
        num_candidates=5,
        expansions_per_step=2,
        temperature_with_ebm=1.0,
        energy_weight=0.5,
    )
    steps = _trace(theorems, LeanConfig(repl_command=repl, imports=(), workers=1))
    serial, p1, v1 = _search(
        theorems,
        steps,
        LeanConfig(repl_command=repl, imports=(), workers=1),
        dataclasses.replace(base, concurrency=1, batch_generate_size=1, batch_encode_size=1),
    )
    wide, p2, v2 = _search(
        theorems,
        steps,
        LeanConfig(repl_command=repl, imports=(), workers=3),
        dataclasses.replace(base, concurrency=16, batch_generate_size=32, batch_encode_size=8),
    )
    # The schedules really differed: batches of one against batches of many.
    assert max(p1.batch_sizes) == 1 and max(p2.batch_sizes) > 2
    assert max(v1.batch_sizes) == 1 and max(v2.batch_sizes) > 1
    assert serial.keys() == wide.keys() == {t.key for t in theorems}
    for key in serial:
        assert _outcome(serial[key]) == _outcome(wide[key]), key
        assert _tree(serial[key]) == _tree(wide[key]), key
    # Not vacuous: the trees branch, carry energies, and some (not all) theorems are proved.
    proved = [r for r in serial.values() if r.status == "proved"]
    assert 0 < len(proved) < len(serial) or len(proved) == len(serial) > 0
    assert sum(r.nodes_expanded for r in serial.values()) > 3 * len(serial)
    assert any(n.ebm_energy is not None for r in serial.values() for n in r.tree.nodes)


def test_a_slow_verifier_does_not_change_a_tree():
    theorems = generate_theorems(8, seed=11, min_depth=2, max_depth=4)
    lean = LeanConfig(
        repl_command=(sys.executable, "-m", "burnqed.proplogic"), imports=(), workers=2
    )
    cfg = SearchConfig(max_nodes=20, max_depth=8, num_candidates=4, concurrency=4)
    steps = _trace(theorems, lean)
    fast, _, _ = _search(theorems, steps, lean, cfg)
    slow, _, _ = _search(theorems, steps, lean, cfg, slow_verify=True)
    assert any(r.status == "proved" for r in fast.values())  # verification really happened
    for key in fast:
        assert _outcome(fast[key]) == _outcome(slow[key]), key
        assert _tree(fast[key]) == _tree(slow[key]), key


def _rows(key: str, result) -> list[dict]:
    """A tree's nodes as the trajectory's node rows (what :func:`choice_sets` reads)."""
    columns = _node_columns(key, result.attempt, result.tree.nodes)
    return [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]


def test_a_random_order_search_pops_by_its_seeded_keys_whatever_the_schedule():
    """``order="random"`` (the noise search): each state's key is a function of (seed, theorem,
    attempt, state), every pop takes the open state with the highest key, and the tree does not
    depend on concurrency, workers or batch sizes — and it is not the best-first search's tree."""
    theorems = generate_theorems(10, seed=5, min_depth=2, max_depth=5)
    repl = (sys.executable, "-m", "burnqed.proplogic")
    base = SearchConfig(max_nodes=24, max_depth=10, num_candidates=5, expansions_per_step=1)
    steps = _trace(theorems, LeanConfig(repl_command=repl, imports=(), workers=1))
    one = LeanConfig(repl_command=repl, imports=(), workers=1)
    serial, p1, _ = _search(theorems, steps, one, order="random",
                            cfg=dataclasses.replace(base, concurrency=1, batch_generate_size=1))  # fmt: skip
    wide, p2, _ = _search(theorems, steps, LeanConfig(repl_command=repl, imports=(), workers=3),
                          dataclasses.replace(base, concurrency=16, batch_generate_size=32),
                          order="random")  # fmt: skip
    best_first, _, _ = _search(theorems, steps, one, dataclasses.replace(base, concurrency=4))
    assert max(p1.batch_sizes) == 1 and max(p2.batch_sizes) > 2  # the schedules differed
    for key in serial:
        assert _outcome(serial[key]) == _outcome(wide[key]), key
        assert _tree(serial[key]) == _tree(wide[key]), key
    pops_checked = 0
    for key, r in serial.items():
        for n in r.tree.nodes[1:]:
            if n.is_state:
                assert n.priority == random_key(7, key, r.attempt, n.state_hash)
        for c in choice_sets(_rows(key, r), max_depth=base.max_depth, on_path_only=False):
            best = max(c.open, key=lambda row: (row["priority"], -row["node_id"]))
            assert best["node_id"] == c.popped, (key, c.expansion)
            pops_checked += 1
    assert pops_checked >= len(serial)  # not vacuous: pops that chose among several states
    assert any(_tree(serial[k]) != _tree(best_first[k]) for k in serial)
    assert any(r.status == "proved" for r in serial.values())
