"""States adopted from answers given elsewhere (a recording, a cache) — ``ProofSession.adopt`` —
against burnqed's propositional REPL: no Lean runs when they are added; the first live use below a
chain of them rebuilds the chain in the REPL (counted), and the rebuilt state equals the live one;
an adopted state Lean prints differently is a disagreement, and the live state stands."""

from __future__ import annotations

import asyncio

import pytest

from burnqed.lean.pool import AdoptedStateError, LeanPool, TacticSuccess
from burnqed.theorems import Theorem
from tests.lean.repl_config import proplogic_config

THEOREM = Theorem(
    name="and_swap", formal_statement="theorem and_swap (p q : Prop) : p ∧ q → q ∧ p := by\n"
)
PROOF = ("intro h", "constructor", "exact h.2", "exact h.1")


async def live_chain(pool: LeanPool) -> list[str]:
    """The printed states along PROOF's first three steps, each answered by Lean."""
    s = await pool.start(THEOREM)
    state, texts = s.root, []
    for tactic in PROOF[:3]:
        r = await s.apply(state, tactic)
        assert isinstance(r, TacticSuccess)
        state = r.state
        texts.append(state.text)
    await s.close()
    return texts


def test_a_state_rebuilt_after_a_chain_of_adopted_answers_equals_the_live_one():
    async def main():
        async with LeanPool(proplogic_config()) as pool:
            texts = await live_chain(pool)
            s = await pool.start(THEOREM)
            requests = pool.stats()["requests"]
            state = s.root
            for tactic, text in zip(PROOF[:2], texts[:2], strict=True):
                state = s.adopt(state, tactic, text)
            # Adopting runs nothing in Lean; the states are the session's like any other.
            assert pool.stats()["requests"] == requests
            assert state.goals is None and not state.solved and state.depth == 2
            assert s.path(state) == PROOF[:2]
            assert s.adopt(s.root, PROOF[0], texts[0]).sid == 1  # a known step: the same state
            r = await s.apply(state, PROOF[2])  # first live use: the chain is rebuilt first
            assert isinstance(r, TacticSuccess) and r.state.text == texts[2]
            st = pool.stats()
            assert st["adopted"] == 2 and st["rebuilds"] == 2 and st["disagreements"] == 0, st
            assert st["replays"] == 2 and st["requests"] == requests + 3, st
            # Rebuilt once: the rest of the proof runs on the live states, nothing replayed again.
            done = await s.apply(r.state, PROOF[3])
            assert isinstance(done, TacticSuccess) and done.state.solved
            assert pool.stats()["replays"] == 2 and pool.stats()["rebuilds"] == 2
            assert s.path(done.state) == PROOF
            await s.close()

    asyncio.run(main())


def test_an_adopted_state_lean_prints_differently_is_a_disagreement_and_live_wins():
    async def main():
        async with LeanPool(proplogic_config()) as pool:
            texts = await live_chain(pool)
            s = await pool.start(THEOREM)
            wrong = s.adopt(s.root, PROOF[0], texts[0].replace("h :", "h' :"))
            r = await s.apply(wrong, PROOF[1])
            # The tactic ran on the live state (which has `h`), not on the adopted text.
            assert isinstance(r, TacticSuccess) and r.state.text == texts[1]
            st = pool.stats()
            assert st["rebuilds"] == 1 and st["disagreements"] == 1, st
            await s.close()

    asyncio.run(main())


def test_an_adopted_step_lean_rejects_fails_the_apply_without_restarting_the_repl():
    async def main():
        async with LeanPool(proplogic_config()) as pool:
            s = await pool.start(THEOREM)
            pid = pool.worker_pids()[0]
            bogus = s.adopt(s.root, "exact foo", "p q : Prop\n⊢ p ∧ q → q ∧ p")
            with pytest.raises(AdoptedStateError, match="cannot be rebuilt"):
                await s.apply(bogus, "intro h")
            st = pool.stats()
            assert st["disagreements"] == 1 and st["restarts"] == 0, st
            assert pool.worker_pids()[0] == pid
            # The session goes on from its live states.
            assert isinstance(await s.apply(s.root, "intro h"), TacticSuccess)
            await s.close()

    asyncio.run(main())
